/**
 * The EventStore port: one stream per aggregate instance (`<category>-<id>`), optimistic concurrency by
 * expected revision, a global order across all streams, and catch-up subscriptions from a checkpoint.
 * Adapters: PostgreSQL (embedded default and CI) and EventStoreDB/KurrentDB (distributed), both held to
 * the same conformance suite (event-store.conformance.ts).
 */
export type Mode = 'test' | 'live';

export interface EventMetadata {
  readonly merchantId?: string;
  readonly mode?: Mode;
  readonly correlationId?: string;
  readonly causationId?: string;
  /** ISO time the command that produced the event was decided at (from the injected clock). */
  readonly occurredAt?: string;
  readonly [key: string]: unknown;
}

/** An event to append. `id` should be deterministic from the command's idempotency key so retries are no-ops. */
export interface NewEvent<Type extends string = string, Data = unknown> {
  readonly id: string;
  readonly type: Type;
  readonly data: Data;
  readonly metadata?: EventMetadata;
}

export interface RecordedEvent<Type extends string = string, Data = unknown> {
  readonly id: string;
  readonly streamId: string;
  readonly type: Type;
  readonly data: Data;
  readonly metadata: EventMetadata;
  /** 0-based position of the event inside its stream. */
  readonly revision: number;
  /**
   * Identifies the event's place in the store-wide log; unique, and increasing with `revision` inside a stream.
   * Reads return the log in the store's order, a prefix that later commits only extend, so the last position
   * read is a safe `after` cursor. Across streams the numeric order may differ from the log order (PostgreSQL:
   * concurrent appends), so never compare positions of different streams to order events.
   */
  readonly globalPosition: bigint;
  readonly recordedAt: Date;
}

/**
 * `'any'`: no check. `'no_stream'`: the stream must not exist. `'stream_exists'`: it must exist.
 * A number: the revision of the stream's last event (so `-1` is never used; use `'no_stream'`).
 */
export type ExpectedRevision = 'any' | 'no_stream' | 'stream_exists' | number;

export interface AppendResult {
  /** Revision of the stream's last event after the append (pass it as the next expected revision). */
  readonly nextExpectedRevision: number;
  readonly lastGlobalPosition: bigint;
  /**
   * True when every event was already stored, with the same ids, exactly where this append would put them (an
   * idempotent retry): nothing was written and the result is the original one. Adapters that cannot tell omit it.
   */
  readonly retried?: boolean;
}

export interface ReadStreamOptions {
  readonly direction?: 'forwards' | 'backwards';
  /** Inclusive start revision; defaults to the first (forwards) or last (backwards) event. */
  readonly fromRevision?: number;
  readonly maxCount?: number;
}

export interface ReadAllOptions {
  /** Exclusive: events after the event at this global position, in log order. Defaults to the beginning. */
  readonly after?: bigint;
  readonly maxCount?: number;
  /** Only streams of these categories (the part of the stream id before the first '-'). */
  readonly categories?: readonly string[];
}

export interface SubscribeToAllOptions {
  /** Durable name: the checkpoint is stored under it and survives restarts. */
  readonly subscriptionId: string;
  readonly categories?: readonly string[];
  /** Called once per event in global order; the checkpoint advances only after it resolves. */
  readonly handler: (event: RecordedEvent) => Promise<void>;
  /**
   * Optional batch form for consumers that gain from batching (the Kafka relay sends one produce request per
   * batch). An adapter that supports it calls this INSTEAD of `handler` with consecutive events in global order
   * (never empty); the checkpoint advances past the whole batch only after it resolves, and a failed batch is
   * retried whole. Adapters that do not support it ignore it and call `handler` per event, so it must do the
   * same thing as `handler`.
   */
  readonly handleBatch?: (events: readonly RecordedEvent[]) => Promise<void>;
  /** Called when the handler throws; the subscription retries the same event after a back-off. */
  readonly onError?: (error: unknown, event: RecordedEvent) => void;
}

export interface StoreSubscription {
  /** Resolves once every event stored before the call has been handled (used by read-your-writes waits). */
  caughtUp(): Promise<void>;
  stop(): Promise<void>;
}

export class WrongExpectedRevisionError extends Error {
  constructor(
    readonly streamId: string,
    readonly expected: ExpectedRevision,
    readonly actual: number | 'no_stream',
  ) {
    super(`stream ${streamId}: expected revision ${String(expected)}, actual ${String(actual)}`);
    this.name = 'WrongExpectedRevisionError';
  }
}

export interface EventStore {
  appendToStream(
    streamId: string,
    events: readonly NewEvent[],
    options?: { readonly expectedRevision?: ExpectedRevision },
  ): Promise<AppendResult>;
  /** Events of one stream; an unknown stream reads as empty. */
  readStream(streamId: string, options?: ReadStreamOptions): Promise<RecordedEvent[]>;
  readAll(options?: ReadAllOptions): Promise<RecordedEvent[]>;
  /** The position of the last readable event in log order (0n when empty): a safe `after` for a later read. */
  headPosition(): Promise<bigint>;
  subscribeToAll(options: SubscribeToAllOptions): Promise<StoreSubscription>;
  close(): Promise<void>;
}

/** Stream ids are `<category>-<aggregate id>`; the category names the aggregate type. */
export function streamCategory(streamId: string): string {
  const dash = streamId.indexOf('-');
  return dash < 0 ? streamId : streamId.slice(0, dash);
}

export function streamIdFor(category: string, id: string): string {
  return `${category}-${id}`;
}
