import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Webhook signatures: the one implementation used by merchants (verify) and by the service's dispatcher (sign).
 *
 * Two header schemes are sent with every delivery:
 * - Stablepay's (SPEC.md): `X-Signature` = hex HMAC-SHA256 of the raw body; `X-Signature-Previous` the same with
 *   the previous secret during a rotation window; `X-Webhook-Id` the event id.
 * - Standard Webhooks (standardwebhooks.com): `webhook-id`, `webhook-timestamp` (unix seconds) and
 *   `webhook-signature` = space-separated `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`, one entry per
 *   valid secret. The timestamp is signed, which is what makes replay protection possible.
 *
 * The HMAC key of BOTH schemes is the secret exactly as issued, as UTF-8 bytes, `whsec_` prefix included (one
 * secret concept). Standard Webhooks libraries verify it when told the key is raw, e.g.
 * `new Webhook(secret, { format: 'raw' })` in the `standardwebhooks` npm package; their default (base64-decoding
 * what follows `whsec_`) does not apply to Stablepay secrets.
 */
export const DEFAULT_WEBHOOK_TOLERANCE_SECONDS = 5 * 60;

export type RawBody = string | Uint8Array;
export type WebhookHeaders = Readonly<Record<string, string | readonly string[] | undefined>>;

export interface WebhookSigningInput {
  /** The event id (also the deduplication key). */
  readonly id: string;
  /** When this delivery attempt is signed: a Date or unix seconds. */
  readonly timestamp: Date | number;
  /** During a rotation window: the previous secret, which signs `X-Signature-Previous` and a second `v1` entry. */
  readonly previousSecret?: string;
}

/** A type alias (not an interface) so it is assignable to plain header records, verifyWebhook's included. */
export type WebhookSignatureHeaders = {
  readonly 'X-Webhook-Id': string;
  readonly 'X-Signature': string;
  readonly 'X-Signature-Previous'?: string;
  readonly 'webhook-id': string;
  readonly 'webhook-timestamp': string;
  readonly 'webhook-signature': string;
};

export interface VerifyWebhookOptions {
  /** Accepted distance between `webhook-timestamp` and now, either way; default 300 (5 minutes). */
  readonly toleranceSeconds?: number;
  readonly now?: Date;
  /**
   * Refuse deliveries without the Standard Webhooks headers. Off by default (SPEC.md's scheme alone is valid), but
   * only those headers give replay protection: with them required, an attacker cannot strip them to downgrade.
   */
  readonly requireTimestamp?: boolean;
}

export type WebhookFailureReason =
  'missing_signature' | 'malformed_headers' | 'timestamp_out_of_tolerance' | 'signature_mismatch';

export type WebhookVerification =
  | {
      readonly valid: true;
      /** Which header schemes were present (every one present was verified). */
      readonly schemes: readonly ('stablepay' | 'standard')[];
      /** The event id for deduplication: signed `webhook-id` when present, else the unsigned `X-Webhook-Id`. */
      readonly webhookId: string | null;
      /** The signed delivery time (Standard Webhooks only). */
      readonly timestamp: Date | null;
      /**
       * True when only the previous-secret signature matched: the secret used here has been rotated away and stops
       * working when the 24-hour window ends.
       */
      readonly matchedPreviousSecret: boolean;
    }
  | { readonly valid: false; readonly reason: WebhookFailureReason; readonly message: string };

export class WebhookVerificationError extends Error {
  constructor(
    readonly reason: WebhookFailureReason,
    message: string,
  ) {
    super(message);
    this.name = 'WebhookVerificationError';
  }
}

/** Every signature header of one delivery. */
export function signWebhookPayload(
  rawBody: RawBody,
  secret: string,
  input: WebhookSigningInput,
): WebhookSignatureHeaders {
  assertSecret(secret, 'secret');
  if (input.previousSecret !== undefined) assertSecret(input.previousSecret, 'previousSecret');
  if (!/^[\x21-\x7e]+$/.test(input.id))
    throw new TypeError('webhook id must be non-empty printable ASCII without spaces');
  const timestamp = unixSeconds(input.timestamp);
  const body = bytesOf(rawBody);
  const secrets = input.previousSecret === undefined ? [secret] : [secret, input.previousSecret];
  const [current, previous] = secrets.map((s) => stablepaySignature(body, s));
  return {
    'X-Webhook-Id': input.id,
    'X-Signature': current ?? '',
    ...(previous !== undefined ? { 'X-Signature-Previous': previous } : {}),
    'webhook-id': input.id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': secrets
      .map((s) => `v1,${standardSignature(input.id, timestamp, body, s)}`)
      .join(' '),
  };
}

/**
 * Verifies a delivery against the raw body bytes as received (never a re-serialised JSON: key order may differ
 * between retries). Every header scheme present must verify; at least one must be present.
 */
export function verifyWebhook(
  rawBody: RawBody,
  headers: WebhookHeaders,
  secret: string,
  options: VerifyWebhookOptions = {},
): WebhookVerification {
  assertSecret(secret, 'secret');
  const tolerance = options.toleranceSeconds ?? DEFAULT_WEBHOOK_TOLERANCE_SECONDS;
  if (!Number.isSafeInteger(tolerance) || tolerance < 0)
    throw new RangeError('toleranceSeconds must be a non-negative integer');
  const body = bytesOf(rawBody);
  const h = lowerCaseHeaders(headers);

  const stablepayCurrent = hexList(h.get('x-signature'));
  const stablepayPrevious = hexList(h.get('x-signature-previous'));
  const hasStablepay = stablepayCurrent.length + stablepayPrevious.length > 0;
  const standardHeaders = ['webhook-id', 'webhook-timestamp', 'webhook-signature'].map((name) => h.get(name));
  const hasStandard = standardHeaders.some((v) => v !== undefined);

  if (!hasStablepay && !hasStandard)
    return failure('missing_signature', 'No X-Signature or webhook-signature header');
  if (options.requireTimestamp === true && !hasStandard) {
    return failure(
      'missing_signature',
      'The webhook-id, webhook-timestamp and webhook-signature headers are required',
    );
  }

  const schemes: ('stablepay' | 'standard')[] = [];
  let matchedPrevious = false;
  let webhookId = single(h.get('x-webhook-id'));
  let timestamp: Date | null = null;

  if (hasStandard) {
    const [idValues, timestampValues, signatureValues] = standardHeaders;
    const id = single(idValues);
    const ts = single(timestampValues);
    if (id === null || ts === null || signatureValues === undefined || !/^[0-9]{1,15}$/.test(ts)) {
      return failure(
        'malformed_headers',
        'webhook-id, webhook-timestamp (unix seconds) and webhook-signature must each appear once',
      );
    }
    if (webhookId !== null && webhookId !== id)
      return failure('malformed_headers', 'X-Webhook-Id and webhook-id differ');
    const seconds = Number(ts);
    const now = Math.floor((options.now ?? new Date()).getTime() / 1000);
    if (Math.abs(now - seconds) > tolerance) {
      return failure(
        'timestamp_out_of_tolerance',
        `webhook-timestamp is more than ${tolerance} s away from now`,
      );
    }
    const expected = Buffer.from(standardSignature(id, seconds, body, secret), 'utf8');
    const entries = signatureValues
      .join(' ')
      .split(' ')
      .filter((e) => e.startsWith('v1,'));
    const matchIndex = firstMatch(
      entries.map((e) => Buffer.from(e.slice(3), 'utf8')),
      expected,
    );
    if (matchIndex < 0)
      return failure('signature_mismatch', 'No webhook-signature entry matches this secret');
    // The dispatcher lists the current secret's entry first and the previous secret's second.
    matchedPrevious = matchIndex > 0;
    schemes.push('standard');
    webhookId = id;
    timestamp = new Date(seconds * 1000);
  }

  if (hasStablepay) {
    const expected = Buffer.from(stablepaySignature(body, secret), 'utf8');
    const matchesCurrent = firstMatch(stablepayCurrent, expected) >= 0;
    const matchesPrevious = !matchesCurrent && firstMatch(stablepayPrevious, expected) >= 0;
    if (!matchesCurrent && !matchesPrevious) {
      return failure(
        'signature_mismatch',
        'Neither X-Signature nor X-Signature-Previous matches this secret',
      );
    }
    matchedPrevious = matchedPrevious || matchesPrevious;
    schemes.push('stablepay');
  }

  return { valid: true, schemes, webhookId, timestamp, matchedPreviousSecret: matchedPrevious };
}

/** verifyWebhook, then JSON.parse of the body; throws WebhookVerificationError when the delivery is not authentic. */
export function parseWebhookEvent<T = unknown>(
  rawBody: RawBody,
  headers: WebhookHeaders,
  secret: string,
  options?: VerifyWebhookOptions,
): T {
  const result = verifyWebhook(rawBody, headers, secret, options);
  if (!result.valid) throw new WebhookVerificationError(result.reason, result.message);
  return JSON.parse(Buffer.from(bytesOf(rawBody)).toString('utf8')) as T;
}

/**
 * Constant-time equality. Unequal lengths return false without an early exit (timingSafeEqual throws on unequal
 * lengths, and skipping the comparison would make mismatching lengths measurably faster).
 */
export function constantTimeEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) {
    timingSafeEqual(b, b);
    return false;
  }
  return timingSafeEqual(a, b);
}

function stablepaySignature(body: Uint8Array, secret: string): string {
  return createHmac('sha256', Buffer.from(secret, 'utf8')).update(body).digest('hex');
}

function standardSignature(id: string, timestamp: number, body: Uint8Array, secret: string): string {
  return createHmac('sha256', Buffer.from(secret, 'utf8'))
    .update(`${id}.${timestamp}.`, 'utf8')
    .update(body)
    .digest('base64');
}

/** Index of the first candidate equal to `expected`; every candidate is compared (no early exit on a match). */
function firstMatch(candidates: readonly Uint8Array[], expected: Uint8Array): number {
  let found = -1;
  candidates.forEach((candidate, index) => {
    if (constantTimeEqual(candidate, expected) && found < 0) found = index;
  });
  return found;
}

/**
 * Candidate hex digests of one header, as lower-case ASCII bytes (hex is case-insensitive; the expected digest is
 * lower case). A repeated header arrives comma-joined from Node's HTTP parser, hence the split.
 */
function hexList(values: readonly string[] | undefined): Uint8Array[] {
  return (values ?? [])
    .flatMap((v) => v.split(','))
    .map((v) => v.trim().toLowerCase())
    .filter((v) => v !== '')
    .map((v) => Buffer.from(v, 'utf8'));
}

function lowerCaseHeaders(headers: WebhookHeaders): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    const values = typeof value === 'string' ? [value] : [...value];
    const key = name.toLowerCase();
    out.set(key, [...(out.get(key) ?? []), ...values]);
  }
  return out;
}

function single(values: readonly string[] | undefined): string | null {
  if (values === undefined) return null;
  const distinct = [...new Set(values.map((v) => v.trim()))];
  return distinct.length === 1 && distinct[0] !== '' ? (distinct[0] ?? null) : null;
}

function bytesOf(body: RawBody): Uint8Array {
  return typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
}

function unixSeconds(value: Date | number): number {
  const seconds = value instanceof Date ? Math.floor(value.getTime() / 1000) : value;
  if (!Number.isSafeInteger(seconds) || seconds < 0)
    throw new RangeError('timestamp must be a Date or non-negative unix seconds');
  return seconds;
}

function assertSecret(secret: string, name: string): void {
  if (typeof secret !== 'string' || secret.length === 0)
    throw new TypeError(`${name} must be a non-empty string`);
}

function failure(reason: WebhookFailureReason, message: string): WebhookVerification {
  return { valid: false, reason, message };
}
