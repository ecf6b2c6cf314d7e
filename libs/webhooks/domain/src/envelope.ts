import { createHash } from 'node:crypto';

/** `data` of an event: `data.object` always, plus the extra keys some types add (`subscription`, `charge`...). */
export interface WebhookEventData {
  readonly object: Readonly<Record<string, unknown>>;
  readonly [key: string]: unknown;
}

/** What the store keeps of one webhook event; the envelope is built from it for every attempt. */
export interface WebhookEventRecord {
  readonly id: string;
  readonly type: string;
  readonly createdAt: Date;
  readonly data: WebhookEventData;
}

/**
 * SPEC Events > Envelope: `id`, `object: "event"`, `type`, `created_at`, `data`, and `livemode: false` only on
 * test deliveries (absent on live events, never `true`).
 */
export interface WebhookEnvelope {
  readonly id: string;
  readonly object: 'event';
  readonly type: string;
  readonly created_at: string;
  readonly data: WebhookEventData;
  readonly livemode?: false;
}

export function buildEnvelope(
  event: WebhookEventRecord,
  options: { testDelivery?: boolean } = {},
): WebhookEnvelope {
  return {
    id: event.id,
    object: 'event',
    type: event.type,
    created_at: event.createdAt.toISOString(),
    data: event.data,
    ...(options.testDelivery === true ? { livemode: false as const } : {}),
  };
}

/**
 * The exact bytes sent, which are also the bytes signed. Integers beyond 2^53 travel as strings (SPEC
 * Conventions): a bigint that slipped into a payload is written as a decimal string, never as a float.
 */
export function serializeEnvelope(envelope: WebhookEnvelope): Buffer {
  return Buffer.from(
    JSON.stringify(envelope, (_key, value: unknown) =>
      typeof value === 'bigint' ? value.toString() : value,
    ),
    'utf8',
  );
}

/**
 * The bytes of a recorded event's envelope around its `data` as the database keeps it (the jsonb column's text):
 * the dispatcher sends these without parsing `data` and serialising it again. Same envelope keys in the same
 * order as `serializeEnvelope`; inside `data` the database's key order, compact (SPEC Delivery rule 3: the
 * content is the same, key order may differ, and the signature covers the bytes sent). Numbers keep the digits
 * the database holds (a parse would round integers beyond 2^53). Never used for test deliveries (`livemode`).
 */
export function serializeRecordedEnvelope(
  event: Pick<WebhookEventRecord, 'id' | 'type' | 'createdAt'>,
  dataJson: string,
): Buffer {
  return Buffer.from(
    `{"id":${JSON.stringify(event.id)},"object":"event","type":${JSON.stringify(event.type)},` +
      `"created_at":"${event.createdAt.toISOString()}","data":${compactJsonText(dataJson)}}`,
    'utf8',
  );
}

/**
 * JSON text without the whitespace between its tokens (strings kept as they are): jsonb's text puts a space after
 * every `:` and `,`. A receiver that checks the signature against `JSON.stringify` of the parsed body instead of
 * the raw bytes (a common mistake) kept working with the compact bodies sent before; this keeps the bytes compact.
 */
export function compactJsonText(json: string): string {
  return json.replace(/"(?:[^"\\]|\\.)*"|\s+/g, (token) => (token.startsWith('"') ? token : ''));
}

const CROCKFORD = '0123456789abcdefghjkmnpqrstvwxyz';

function base32Time(ms: number): string {
  let out = '';
  let rest = Math.max(0, Math.floor(ms));
  for (let i = 0; i < 10; i++) {
    out = (CROCKFORD[rest % 32] ?? '0') + out;
    rest = Math.floor(rest / 32);
  }
  return out;
}

/**
 * SPEC Envelope: event ids are unique and stable across retries. A webhook event id is derived from the domain
 * event it comes from (its stored id) and the public type, so a redelivered domain event, a replayed consumer or a
 * second dispatcher produce the same id and the store keeps one event. Shape: `evt_` + 10 characters of the
 * creation time (so ids sort by time like every other id) + 16 characters of a SHA-256 digest.
 */
export function webhookEventId(domainEventId: string, type: string, createdAt: Date): string {
  const digest = createHash('sha256').update(`${domainEventId}\u0000${type}`).digest();
  let tail = '';
  for (let i = 0; i < 16; i++) tail += CROCKFORD[(digest[i] ?? 0) % 32] ?? '0';
  return `evt_${base32Time(createdAt.getTime())}${tail}`;
}

export const WEBHOOK_EVENT_ID = /^evt_[0-9a-z]{26}$/;
