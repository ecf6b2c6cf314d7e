import type { BusMessage } from '@stablepay/event-bus';
import type { Upcaster } from '@stablepay/event-store';
import {
  isWebhookEventType,
  WEBHOOK_EVENT_ID,
  type WebhookEventData,
  type WebhookEventType,
  webhookEventId,
} from '@stablepay/webhooks-domain';

/**
 * The source registry: how domain events become merchant webhook events without the webhooks scope importing
 * any other scope. Each scope contributes a `WebhookSource` (a plain object; TypeScript's structural typing
 * means the contributing scope needs no import from here), and the composition roots (apps/webhook-dispatch
 * main.ts, the embedded launcher) hand the list to `webhookDispatchService({ sources })`.
 */

/** One webhook event a source derives from one domain event. */
export interface WebhookEventDraft {
  /** Deterministic from the domain event id (`webhookEventId`), so a redelivered domain event is deduplicated. */
  readonly id: string;
  /** The merchant it belongs to (the domain event's `metadata.merchantId`). */
  readonly merchantId: string;
  /** A public type from the SPEC catalogue (`WEBHOOK_EVENT_TYPES`). */
  readonly type: string;
  readonly createdAt: Date;
  /** `data.object` plus the extra keys the type adds; amounts as integer strings. */
  readonly data: WebhookEventData;
}

/** Where a recorded webhook event came from: what `isReadable` can compare its read model against. */
export interface WebhookEventOrigin {
  readonly source: string;
  readonly topic: string;
  readonly eventId: string;
  readonly streamId: string;
  readonly revision: number;
}

export interface RecordedWebhookEvent extends WebhookEventDraft {
  readonly origin: WebhookEventOrigin;
}

/** A stored event as a source sees it: newest version (the process's store reads through the upcasters). */
export interface StreamEvent {
  readonly type: string;
  readonly data: unknown;
}

/**
 * Read access to the service database for `isReadable`: the read models live in the one database every service
 * shares (a TypeORM DataSource satisfies it). Each scope writes its own query; the webhooks scope knows no table.
 */
export interface ReadModels {
  query(sql: string, parameters?: unknown[]): Promise<unknown[]>;
}

/** Other streams a mapping reads whole, by stream id (see `relatedStreams`). */
export type RelatedHistories = ReadonlyMap<string, readonly StreamEvent[]>;

export interface WebhookSource {
  /** Unique among the registered sources; stored with each event it produced. */
  readonly name: string;
  /** The bus topic it reads (`topicForCategory(...)`). */
  readonly topic: string;
  /**
   * Set when the mapping needs the aggregate as of the event (events are facts, the object is a projection): the
   * recorder reads the message's stream from its start up to and including the message and passes it as
   * `history`. A failed read is retried like any I/O failure; the result is the same on every redelivery.
   */
  readonly withHistory?: boolean;
  /** Upcasters of the events it reads (the owning scope's): the dispatch process registers them with its store. */
  readonly upcasters?: readonly Upcaster[];
  /**
   * Streams besides the message's own that the mapping needs (e.g. a charge webhook's `data.object` is the
   * subscription, another aggregate's stream): the recorder reads each whole and passes them as `related`. Only
   * for streams that already hold what the message refers to (the message was decided from them), so the part the
   * mapping uses is the same on every redelivery. Needs `withHistory`.
   */
  relatedStreams?(message: BusMessage, history: readonly StreamEvent[]): readonly string[];
  /**
   * Whether the related streams already hold what the message refers to, when another scope writes them after the
   * message's own stream (e.g. the ledger records a first charge after the checkout completion that names it). False:
   * the recorder records nothing and the message is retried like a failed read, with the bus's back-off, until they
   * do. Absent = always ready.
   */
  relatedReady?(message: BusMessage, history: readonly StreamEvent[], related: RelatedHistories): boolean;
  /**
   * Pure mapping from one bus message to zero or more webhook events (most domain events map to none). Thrown
   * errors are treated as a bug in the source: the message is logged and skipped, never retried forever.
   */
  toWebhookEvents(
    message: BusMessage,
    history?: readonly StreamEvent[],
    related?: RelatedHistories,
  ): readonly WebhookEventDraft[];
  /**
   * Read-your-writes: resolves true once the read model a merchant would query next (e.g. the charges list
   * after a charge event) holds the record the event is about. The dispatcher does not deliver before that.
   * Absent = always readable. `reads` queries the service database.
   */
  isReadable?(event: RecordedWebhookEvent, reads: ReadModels): Promise<boolean>;
}

/** Builds a draft with the id, merchant and creation time taken from the bus message. */
export function webhookEventDraft(
  message: BusMessage,
  type: WebhookEventType,
  data: WebhookEventData,
  overrides: { readonly merchantId?: string; readonly createdAt?: Date } = {},
): WebhookEventDraft {
  const occurredAt =
    typeof message.metadata.occurredAt === 'string' ? message.metadata.occurredAt : message.recordedAt;
  const createdAt = overrides.createdAt ?? new Date(occurredAt);
  const merchantId = overrides.merchantId ?? message.metadata.merchantId ?? '';
  return { id: webhookEventId(message.id, type, createdAt), merchantId, type, createdAt, data };
}

export class InvalidWebhookEventDraftError extends Error {
  constructor(source: string, reason: string) {
    super(`webhook source ${source} produced an invalid draft: ${reason}`);
    this.name = 'InvalidWebhookEventDraftError';
  }
}

/** Checks what a source produced before anything is stored. */
export function assertValidDraft(source: string, draft: WebhookEventDraft): void {
  if (!WEBHOOK_EVENT_ID.test(draft.id))
    throw new InvalidWebhookEventDraftError(
      source,
      `id '${draft.id}' is not an evt_ id from webhookEventId()`,
    );
  if (typeof draft.merchantId !== 'string' || draft.merchantId.length === 0)
    throw new InvalidWebhookEventDraftError(source, `${draft.id} has no merchantId`);
  if (!isWebhookEventType(draft.type))
    throw new InvalidWebhookEventDraftError(source, `${draft.id} has unknown type '${draft.type}'`);
  if (!(draft.createdAt instanceof Date) || Number.isNaN(draft.createdAt.getTime()))
    throw new InvalidWebhookEventDraftError(source, `${draft.id} has no valid createdAt`);
  const object: unknown = draft.data?.object;
  if (typeof object !== 'object' || object === null || Array.isArray(object))
    throw new InvalidWebhookEventDraftError(source, `${draft.id} has no data.object`);
}

/** The registered sources, by topic and by name. */
export class WebhookSourceRegistry {
  private readonly byTopic = new Map<string, WebhookSource[]>();
  private readonly byName = new Map<string, WebhookSource>();

  constructor(sources: readonly WebhookSource[]) {
    for (const source of sources) {
      if (this.byName.has(source.name))
        throw new Error(`webhook source '${source.name}' is registered twice`);
      this.byName.set(source.name, source);
      this.byTopic.set(source.topic, [...(this.byTopic.get(source.topic) ?? []), source]);
    }
  }

  topics(): string[] {
    return [...this.byTopic.keys()];
  }

  forTopic(topic: string): readonly WebhookSource[] {
    return this.byTopic.get(topic) ?? [];
  }

  named(name: string): WebhookSource | undefined {
    return this.byName.get(name);
  }
}

/**
 * A source for a scope whose domain events map one-to-one onto webhook events: `map` returns the public type and
 * `data` (or null to send nothing), and the draft gets its deterministic id, merchant and time here. Composition
 * roots use it to register a scope's mapping without the scopes importing each other.
 */
export function domainEventSource(options: {
  readonly name: string;
  readonly topic: string;
  /** `history`: the stream up to and including `event` when `withHistory` is set, else just `[event]`. */
  readonly map: (
    event: StreamEvent,
    history: readonly StreamEvent[],
    related: RelatedHistories,
  ) => {
    type: string;
    data: { readonly object: object };
    /**
     * The domain event the webhook's id and creation time derive from when it is not `event` itself: another
     * stream's event the webhook is about, whose webhook an earlier source already sent under that id (see
     * docs/webhooks.md, "Event ids across the move to the charge ledger"), so re-reading `event` records nothing new.
     */
    idFrom?: { readonly id: string; readonly occurredAt: string };
  } | null;
  readonly withHistory?: boolean;
  readonly upcasters?: readonly Upcaster[];
  /** Stream ids the mapping reads besides the event's own (WebhookSource.relatedStreams). */
  readonly relatedStreams?: (event: StreamEvent, history: readonly StreamEvent[]) => readonly string[];
  /** WebhookSource.relatedReady. */
  readonly relatedReady?: (
    event: StreamEvent,
    history: readonly StreamEvent[],
    related: RelatedHistories,
  ) => boolean;
  readonly isReadable?: WebhookSource['isReadable'];
}): WebhookSource {
  const related = options.relatedStreams;
  const ready = options.relatedReady;
  return {
    name: options.name,
    topic: options.topic,
    ...(options.withHistory || related ? { withHistory: true } : {}),
    ...(options.upcasters ? { upcasters: options.upcasters } : {}),
    ...(related
      ? { relatedStreams: (message, history) => related({ type: message.type, data: message.data }, history) }
      : {}),
    ...(ready
      ? {
          relatedReady: (message, history, histories) =>
            ready({ type: message.type, data: message.data }, history, histories),
        }
      : {}),
    ...(options.isReadable ? { isReadable: options.isReadable } : {}),
    toWebhookEvents: (message, history, relatedHistories) => {
      const event = { type: message.type, data: message.data };
      if ((options.withHistory || related) && !history)
        throw new InvalidWebhookEventDraftError(options.name, 'needs the stream history and got none');
      const mapped = options.map(event, history ?? [event], relatedHistories ?? new Map());
      if (!mapped) return [];
      if (!isWebhookEventType(mapped.type))
        throw new InvalidWebhookEventDraftError(options.name, `unknown webhook type '${mapped.type}'`);
      const data: WebhookEventData = { ...mapped.data, object: { ...mapped.data.object } };
      const about = mapped.idFrom
        ? {
            ...message,
            id: mapped.idFrom.id,
            metadata: { ...message.metadata, occurredAt: mapped.idFrom.occurredAt },
          }
        : message;
      return [webhookEventDraft(about, mapped.type, data)];
    },
  };
}
