import { Test } from '@nestjs/testing';
import { EVENT_STORE } from '@stablepay/aggregate';
import { type BusMessage, type BusSubscription, EVENT_BUS, type EventBus } from '@stablepay/event-bus';
import { createPostgresEventStore, type PostgresEventStore } from '@stablepay/event-store';
import { ReadinessRegistry } from '@stablepay/http';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { ConfigError } from '@stablepay/util';
import { relayService } from './relay';

/** A broker stand-in that refuses while `down` and records what it accepted. */
class FlakyBus implements EventBus {
  readonly published: BusMessage[] = [];
  down = true;
  async publish(messages: readonly BusMessage[]): Promise<void> {
    if (this.down) throw new Error('broker unavailable');
    this.published.push(...messages);
  }
  consume(): Promise<BusSubscription> {
    return Promise.reject(new Error('not used'));
  }
  async close(): Promise<void> {
    // owned by the test
  }
}

async function eventually(check: () => Promise<boolean> | boolean): Promise<void> {
  for (;;) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('the relay role', () => {
  it('is a configuration error with the store-log bus (the store is the bus; no relay runs)', () => {
    expect(() => relayService({ eventBus: 'store-log' })).toThrow(ConfigError);
    expect(() => relayService({ eventBus: 'store-log' })).toThrow(/EVENT_BUS must be kafka/);
  });

  describe('with the Kafka bus', () => {
    let database: TestDatabase;
    let store: PostgresEventStore;

    beforeAll(async () => {
      database = await createTestDatabase();
      store = await createPostgresEventStore({
        url: database.url,
        poolSize: 3,
        subscriptions: { retry: { initialMs: 10, maxMs: 50 } },
      });
    });

    afterAll(async () => {
      await store?.close();
      await database?.drop();
    });

    it('publishes stored events from its checkpoint, is not ready while the broker refuses, and resumes after a restart', async () => {
      const bus = new FlakyBus();
      const boot = async () => {
        const definition = relayService({ eventBus: 'kafka' });
        const moduleRef = await Test.createTestingModule({
          providers: [
            { provide: EVENT_STORE, useValue: store },
            { provide: EVENT_BUS, useValue: bus },
            ReadinessRegistry,
            ...(definition.providers ?? []),
          ],
        }).compile();
        return moduleRef.init();
      };
      await store.appendToStream('merchant-m1', [{ id: 'e1', type: 'Noted', data: {} }]);
      let app = await boot();
      const readiness = app.get(ReadinessRegistry);
      await eventually(async () => !(await readiness.run()).ready);
      expect((await readiness.run()).checks['relay']).toMatch(/broker unavailable/);

      bus.down = false;
      await eventually(() => bus.published.length === 1);
      expect((await readiness.run()).ready).toBe(true);
      expect(bus.published[0]).toMatchObject({
        id: 'e1',
        key: 'merchant-m1',
        topic: 'merchants.merchant.v1',
      });

      await app.close();
      await store.appendToStream('merchant-m1', [{ id: 'e2', type: 'Noted', data: {} }], {
        expectedRevision: 0,
      });
      app = await boot();
      await eventually(() => bus.published.length === 2);
      expect(bus.published.map((m) => m.id)).toEqual(['e1', 'e2']);
      await app.close();
    });
  });
});
