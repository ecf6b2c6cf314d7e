import type { EventStore, RecordedEvent, StoreSubscription } from '@stablepay/event-store';
import { toBusMessage } from '../bus-message';
import type { EventBus } from '../event-bus.port';
import { TOPIC_BY_CATEGORY } from '../topics';

export interface EventStoreRelayOptions {
  /** Durable checkpoint name of the relay's store subscription. */
  readonly subscriptionId?: string;
  /** Called when publishing fails; the relay retries the same events after a back-off. */
  readonly onError?: (error: unknown, event: RecordedEvent) => void;
}

/**
 * Publishes every stored event of a category that has a topic to an EventBus, in global order, from a durable
 * catch-up subscription (checkpoint `relay:kafka` by default). Services only append to the event store, so there
 * is no dual write: an event is published if and only if it was stored.
 *
 * At-least-once: the checkpoint advances only after the bus accepted a batch, so a crash between the publish
 * and the checkpoint publishes that batch again (consumers deduplicate by message id). Batches come from the
 * store subscription's `handleBatch` (one produce request per batch); a store that does not batch calls the
 * per-event handler instead. Streams whose category has no topic are internal and are not relayed.
 *
 * Run one relay per subscription id: two would publish everything twice.
 */
export class EventStoreRelay {
  private subscription: StoreSubscription | undefined;

  constructor(
    private readonly store: EventStore,
    private readonly bus: EventBus,
    private readonly options: EventStoreRelayOptions = {},
  ) {}

  get subscriptionId(): string {
    return this.options.subscriptionId ?? 'relay:kafka';
  }

  async start(): Promise<void> {
    if (this.subscription) return;
    this.subscription = await this.store.subscribeToAll({
      subscriptionId: this.subscriptionId,
      categories: Object.keys(TOPIC_BY_CATEGORY),
      handler: (event) => this.bus.publish([toBusMessage(event)]),
      handleBatch: (events) => this.bus.publish(events.map(toBusMessage)),
      ...(this.options.onError ? { onError: this.options.onError } : {}),
    });
  }

  /** Resolves once every event stored before the call has been published. */
  async caughtUp(): Promise<void> {
    if (!this.subscription) throw new Error('the relay is not started');
    await this.subscription.caughtUp();
  }

  /** Stops relaying; the bus and the store stay open (they belong to the caller). */
  async stop(): Promise<void> {
    const subscription = this.subscription;
    this.subscription = undefined;
    await subscription?.stop();
  }
}
