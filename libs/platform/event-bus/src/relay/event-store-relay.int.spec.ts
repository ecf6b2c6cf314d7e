import { createPostgresEventStore, type NewEvent, type PostgresEventStore } from '@stablepay/event-store';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import type { BusMessage, BusSubscription, EventBus } from '../event-bus.port';
import { EventStoreRelay } from './event-store-relay';

/** A bus that records what it is given, optionally failing its first calls. */
class RecordingBus implements EventBus {
  readonly published: BusMessage[] = [];
  calls = 0;

  constructor(private failuresLeft = 0) {}

  async publish(messages: readonly BusMessage[]): Promise<void> {
    this.calls++;
    if (this.failuresLeft > 0) {
      this.failuresLeft--;
      throw new Error('broker unavailable');
    }
    this.published.push(...messages);
  }

  consume(): Promise<BusSubscription> {
    return Promise.reject(new Error('not used'));
  }

  async close(): Promise<void> {
    // nothing to release
  }
}

const noted = (id: string): NewEvent => ({ id, type: 'Noted', data: { id } });

describe('EventStoreRelay', () => {
  let database: TestDatabase;
  let store: PostgresEventStore;
  const open = (): Promise<PostgresEventStore> =>
    createPostgresEventStore({
      url: database.url,
      poolSize: 3,
      subscriptions: { retry: { initialMs: 10, maxMs: 50 } },
    });

  beforeAll(async () => {
    database = await createTestDatabase();
    store = await open();
  });

  afterAll(async () => {
    await store?.close();
    await database?.drop();
  });

  it('publishes every stored event of a category that has a topic, in global order, in batches', async () => {
    await store.appendToStream('payment-r1', [noted('r1-a'), noted('r1-b')]);
    await store.appendToStream('internalThing-r1', [noted('internal-a')]);
    await store.appendToStream('merchant-r1', [noted('m1-a')]);
    await store.appendToStream('payment-r1', [noted('r1-c')]);
    const bus = new RecordingBus();
    const relay = new EventStoreRelay(store, bus, { subscriptionId: 'relay:first' });
    await relay.start();
    await relay.caughtUp();
    await relay.stop();

    expect(bus.published.map((m) => m.id)).toEqual(['r1-a', 'r1-b', 'm1-a', 'r1-c']);
    expect(bus.published.map((m) => m.topic)).toEqual([
      'payments.payment.v1',
      'payments.payment.v1',
      'merchants.merchant.v1',
      'payments.payment.v1',
    ]);
    expect(bus.published[2]).toMatchObject({
      key: 'merchant-r1',
      revision: 0,
      type: 'Noted',
      data: { id: 'm1-a' },
    });
    expect(bus.calls).toBeLessThan(bus.published.length);
  });

  it('resumes from its durable checkpoint after a restart without publishing anything twice', async () => {
    await store.appendToStream('payment-r2', [noted('r2-a')]);
    const bus = new RecordingBus();
    const firstProcess = await open();
    const first = new EventStoreRelay(firstProcess, bus, { subscriptionId: 'relay:restart' });
    await first.start();
    await first.caughtUp();
    await first.stop();
    await firstProcess.close();
    const publishedBefore = bus.published.length;

    await store.appendToStream('payment-r2', [noted('r2-b'), noted('r2-c')]);
    const secondProcess = await open();
    const second = new EventStoreRelay(secondProcess, bus, { subscriptionId: 'relay:restart' });
    await second.start();
    await second.caughtUp();
    await second.stop();
    await secondProcess.close();

    expect(bus.published.slice(publishedBefore).map((m) => m.id)).toEqual(['r2-b', 'r2-c']);
    expect(new Set(bus.published.map((m) => m.id)).size).toBe(bus.published.length);
  });

  it('retries a failed publish with the same events, losing and reordering nothing', async () => {
    await store.appendToStream('payment-r3', [noted('r3-a'), noted('r3-b')]);
    const bus = new RecordingBus(2);
    const errors: string[] = [];
    const relay = new EventStoreRelay(store, bus, {
      subscriptionId: 'relay:flaky',
      onError: (_error, event) => errors.push(event.id),
    });
    await relay.start();
    await relay.caughtUp();
    await relay.stop();
    const relayed = bus.published.filter((m) => m.key === 'payment-r3').map((m) => m.id);
    expect(relayed).toEqual(['r3-a', 'r3-b']);
    expect(errors.length).toBe(2);
  });

  it('relays events appended while it runs', async () => {
    const bus = new RecordingBus();
    const relay = new EventStoreRelay(store, bus, { subscriptionId: 'relay:live' });
    await relay.start();
    await relay.caughtUp();
    await store.appendToStream('payment-r4', [noted('r4-a')]);
    await relay.caughtUp();
    await relay.stop();
    expect(bus.published.map((m) => m.id)).toContain('r4-a');
  });
});
