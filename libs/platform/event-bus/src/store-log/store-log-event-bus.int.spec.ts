import { createPostgresEventStore, type PostgresEventStore } from '@stablepay/event-store';
import { createTestDatabase, testPool } from '@stablepay/testing';
import { describeEventBusConformance } from '../event-bus.conformance';
import { StoreIsTheBusError, StoreLogEventBus, storeLogSubscriptionId } from './store-log-event-bus';

const subscriptions = { retry: { initialMs: 20, maxMs: 200 } };

describeEventBusConformance('StoreLogEventBus', async () => {
  const database = await createTestDatabase();
  const store = await createPostgresEventStore({ url: database.url, poolSize: 4, subscriptions });
  const pool = testPool({ connectionString: database.url, max: 3 });
  const processes = new Set<PostgresEventStore>();
  return {
    append: async (streamId, events) => {
      await store.appendToStream(streamId, events);
    },
    // Each bus gets its own store instance (its own pool), as a separate process would; closing the bus ends
    // that "process".
    openBus: async () => {
      const processStore = await createPostgresEventStore({ url: database.url, poolSize: 2, subscriptions });
      processes.add(processStore);
      const bus = new StoreLogEventBus(processStore);
      return {
        publish: (messages) => bus.publish(messages),
        consume: (options) => bus.consume(options),
        close: async () => {
          await bus.close();
          await processStore.close();
          processes.delete(processStore);
        },
      };
    },
    pool,
    store,
    dispose: async () => {
      await Promise.all([...processes].map((s) => s.close()));
      await store.close();
      await pool.end();
      await database.drop();
    },
  };
});

describe('StoreLogEventBus specifics', () => {
  const notStarted = {
    appendToStream: () => Promise.reject(new Error('unused')),
    readStream: () => Promise.reject(new Error('unused')),
    readAll: () => Promise.reject(new Error('unused')),
    headPosition: () => Promise.reject(new Error('unused')),
    subscribeToAll: () => Promise.reject(new Error('unused')),
    close: () => Promise.resolve(),
  };

  it('refuses to publish, because services append to the store and the store is the bus', async () => {
    const bus = new StoreLogEventBus(notStarted);
    await expect(bus.publish([])).resolves.toBeUndefined();
    await expect(
      bus.publish([
        {
          id: 'evt_1',
          topic: 'payments.payment.v1',
          key: 'payment-1',
          type: 'PaymentCaptured',
          data: {},
          metadata: {},
          revision: 0,
          recordedAt: '2026-01-01T00:00:00.000Z',
        },
      ]),
    ).rejects.toBeInstanceOf(StoreIsTheBusError);
  });

  it('rejects an unknown topic before subscribing to anything', async () => {
    const bus = new StoreLogEventBus(notStarted);
    await expect(
      bus.consume({ group: 'g', topics: ['payments.nothing.v9'], handler: async () => undefined }),
    ).rejects.toThrow(/unknown topic/);
  });

  it('names the durable position of a group per topic', () => {
    expect(storeLogSubscriptionId('ledger-projection', 'ledger.charge.v1')).toBe(
      'bus:ledger-projection:ledger.charge.v1',
    );
  });
});
