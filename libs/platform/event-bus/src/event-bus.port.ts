/**
 * The EventBus port: domain events published per aggregate type on versioned topics, keyed by aggregate
 * (stream) id so one aggregate's events stay in order. Delivery is at-least-once; consumers in a group share a
 * durable position and must be idempotent (see IdempotentHandler). Adapters: Kafka (kafkajs) and the
 * event-store log (consumers read the Postgres event log by global position).
 *
 * Topics and the envelope are a public contract: docs/asyncapi.yaml documents them.
 */
import type { EventMetadata } from '@stablepay/event-store';

/** The envelope every topic carries. `id` is the domain event id (stable across redeliveries). */
export interface BusMessage<Type extends string = string, Data = unknown> {
  readonly id: string;
  readonly topic: string;
  /** Partition key: the aggregate's stream id. */
  readonly key: string;
  readonly type: Type;
  readonly data: Data;
  readonly metadata: EventMetadata;
  /** The aggregate stream revision the event was stored at. */
  readonly revision: number;
  /** ISO time the event was stored. */
  readonly recordedAt: string;
}

export interface ConsumeOptions {
  /** Consumer group: its position is durable and shared by every member. */
  readonly group: string;
  readonly topics: readonly string[];
  readonly handler: (message: BusMessage) => Promise<void>;
  /**
   * Optional batch form, called INSTEAD of `handler` by every adapter: consecutive messages in delivery order
   * (one key's messages in order; never empty). The group's position moves past them only after it resolves;
   * a failure redelivers the whole batch (at-least-once, never skipping). It must have the effect `handler`
   * would have on each message in turn; a consumer gains by committing one transaction per batch.
   */
  readonly handleBatch?: (messages: readonly BusMessage[]) => Promise<void>;
  /** Reports a failed handler call (for a batch, with the batch's first message); delivery is then retried. */
  readonly onError?: (error: unknown, message: BusMessage) => void;
  /**
   * The consumer parks what it cannot handle itself (the projection runner, inside its batch transaction): the
   * supervised bus then only tracks its health. Otherwise a message that keeps failing is parked per stream by
   * the supervised bus (SupervisedEventBus).
   */
  readonly isolatesItself?: boolean;
  /**
   * What the supervised bus parks and holds back as one, when finer than the stream (default: the stream id,
   * `message.key`): one stream carrying many independent subjects (the chain observation stream: one per chain,
   * every merchant's payments and subscription managers on it) parks only the failing subject, and the others go on.
   * Order is kept within a key, not across keys, so every message whose order matters to another must map to the
   * same key (a retraction to its observation's). A pure function of the message, the same in every member and
   * version. `undefined`: the message cannot be attributed to a key (e.g. an event published before it carried
   * what the key is made of): it is handled only while no key of its stream is parked, and waits otherwise.
   */
  readonly isolationKey?: (message: BusMessage) => string | undefined;
  /**
   * Called by an adapter that assigns partitions (Kafka) after each (re)assignment, before this member handles
   * the first message it got by it: a member that took over another's partitions must first learn which streams
   * the other member parked (SupervisedEventBus). Awaited; retried with back-off while it fails.
   */
  readonly onAssigned?: () => Promise<void>;
}

export interface BusSubscription {
  /** Resolves once every message published before the call has been handled by this consumer. */
  caughtUp(): Promise<void>;
  stop(): Promise<void>;
}

export interface EventBus {
  /** Publishes in order; a relay calls this (domain code appends to the event store instead: no dual writes). */
  publish(messages: readonly BusMessage[]): Promise<void>;
  consume(options: ConsumeOptions): Promise<BusSubscription>;
  close(): Promise<void>;
}

export const EVENT_BUS = Symbol('EVENT_BUS');
