import type { EventStore, StoreSubscription } from '@stablepay/event-store';
import { toBusMessage } from '../bus-message';
import type { BusMessage, BusSubscription, ConsumeOptions, EventBus } from '../event-bus.port';
import { Mutex } from '../serial';
import { categoriesForTopics } from '../topics';

/** Raised by StoreLogEventBus.publish: with this adapter nothing is published, services append to the store. */
export class StoreIsTheBusError extends Error {
  constructor() {
    super(
      'StoreLogEventBus does not publish: the event store IS the bus. Append events to the event store; ' +
        'no relay is needed (EventStoreRelay is for the Kafka deployment).',
    );
    this.name = 'StoreIsTheBusError';
  }
}

/**
 * EventBus for the embedded deployment: consumers read the event store's log by global position.
 *
 * - The store IS the bus: `publish` of anything but an empty list throws StoreIsTheBusError rather than being
 *   a silent no-op, because a message given to it would otherwise be lost without a trace (a wiring mistake,
 *   e.g. a relay pointed at this bus, or code publishing events it never stored).
 * - A consumer group keeps one durable position PER TOPIC (the store subscription `bus:<group>:<topic>`), like
 *   Kafka's per-partition offsets: adding a topic to a group later starts that topic from its beginning instead
 *   of silently skipping its history. The member's handler still runs one call at a time; with `handleBatch`
 *   each call gets the batch the store's catch-up read returned (up to its batch size) for one topic.
 * - Order: per key (stream) always; within one topic also the store's global order. Across topics there is no
 *   order guarantee (there is none on Kafka either).
 * - Delivery is at-least-once: a failing handler is retried with back-off and never skipped; after a crash the
 *   messages handled since the last stored checkpoint come again.
 * - Run one member per group: two members of one group both read everything (there is no partition
 *   assignment), which idempotent handlers tolerate but which does double work.
 */
export class StoreLogEventBus implements EventBus {
  private readonly consumers = new Set<BusSubscription>();

  constructor(private readonly store: EventStore) {}

  async publish(messages: readonly BusMessage[]): Promise<void> {
    if (messages.length > 0) throw new StoreIsTheBusError();
  }

  async consume(options: ConsumeOptions): Promise<BusSubscription> {
    const topics = [...new Set(options.topics)];
    if (topics.length === 0) throw new TypeError(`consumer group ${options.group}: no topic to consume`);
    for (const topic of topics) categoriesForTopics([topic]); // rejects an unknown topic before anything starts
    const oneAtATime = new Mutex();
    const handleBatch = options.handleBatch;
    const subscriptions: StoreSubscription[] = [];
    try {
      for (const topic of topics) {
        subscriptions.push(
          await this.store.subscribeToAll({
            subscriptionId: storeLogSubscriptionId(options.group, topic),
            categories: categoriesForTopics([topic]),
            handler: (event) => oneAtATime.run(() => options.handler(toBusMessage(event))),
            ...(handleBatch
              ? { handleBatch: (batch) => oneAtATime.run(() => handleBatch(batch.map(toBusMessage))) }
              : {}),
            ...(options.onError
              ? { onError: (error, event) => options.onError?.(error, toBusMessage(event)) }
              : {}),
          }),
        );
      }
    } catch (error) {
      await Promise.all(subscriptions.map((s) => s.stop()));
      throw error;
    }
    const consumer: BusSubscription = {
      caughtUp: async () => {
        await Promise.all(subscriptions.map((s) => s.caughtUp()));
      },
      stop: async () => {
        this.consumers.delete(consumer);
        await Promise.all(subscriptions.map((s) => s.stop()));
      },
    };
    this.consumers.add(consumer);
    return consumer;
  }

  /** Stops the consumers started here; the event store belongs to the caller and stays open. */
  async close(): Promise<void> {
    await Promise.all([...this.consumers].map((c) => c.stop()));
    this.consumers.clear();
  }
}

/** The store subscription id holding a consumer group's position in one topic. */
export function storeLogSubscriptionId(group: string, topic: string): string {
  return `bus:${group}:${topic}`;
}
