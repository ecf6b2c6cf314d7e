import { Pool } from 'pg';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { ManualClock } from '@stablepay/util';
import { collectSubscription, describeEventStoreConformance } from '../event-store.conformance';
import { WrongExpectedRevisionError, type RecordedEvent } from '../event-store.port';
import {
  createPostgresEventStore,
  DuplicateEventIdError,
  type PostgresEventStore,
} from './postgres-event-store';
import { migrateEventStore } from './postgres-event-store.schema';

// One private database for this file (PGlite when DATABASE_URL is unset); the conformance suite and the
// Postgres-specific cases below share it, each in its own streams.
let database: Promise<TestDatabase> | undefined;
const testDatabase = (): Promise<TestDatabase> => (database ??= createTestDatabase());
afterAll(async () => {
  if (database) await (await database).drop();
});

const openStore = async (extra: { clock?: ManualClock } = {}): Promise<PostgresEventStore> =>
  createPostgresEventStore({
    url: (await testDatabase()).url,
    poolSize: 5,
    subscriptions: { retry: { initialMs: 20, maxMs: 200 } },
    ...extra,
  });

describeEventStoreConformance('PostgresEventStore', async () => {
  await testDatabase();
  return { open: () => openStore(), dispose: async () => undefined };
});

describe('PostgresEventStore specifics', () => {
  let store: PostgresEventStore;
  let pool: Pool;

  beforeAll(async () => {
    store = await openStore();
    pool = new Pool({ connectionString: (await testDatabase()).url, max: 2 });
  });

  afterAll(async () => {
    await store?.close();
    await pool?.end();
  });

  it('applies its migrations once: running them again, even concurrently, changes nothing', async () => {
    expect(await Promise.all([migrateEventStore(pool), migrateEventStore(pool)])).toEqual([[], []]);
    const { rows } = await pool.query<{ version: number }>(
      "SELECT version FROM stablepay_schema_migrations WHERE component = 'event_store'",
    );
    expect(rows.map((r) => r.version)).toEqual([1]);
  });

  it('never lets a catch-up reader skip an event whose transaction commits after a later one', async () => {
    // A trigger makes one append hold its transaction open for a while after drawing its position. With a bare
    // sequence the fast append drawn after it would commit first and the poller would checkpoint past the slow
    // one; the append lock makes the fast append wait instead.
    await pool.query(`
      CREATE OR REPLACE FUNCTION sp_test_slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.type = 'SlowToCommit' THEN PERFORM pg_sleep(0.4); END IF;
        RETURN NEW;
      END $$;
      CREATE TRIGGER sp_test_slow_commit AFTER INSERT ON events FOR EACH ROW EXECUTE FUNCTION sp_test_slow_commit();
    `);
    const { seen, subscription } = await collectSubscription(store, {
      subscriptionId: 'late-commit',
      categories: ['late'],
    });
    try {
      let slowSettled = false;
      const slow = store
        .appendToStream('late-slow', [{ id: 'late-slow-1', type: 'SlowToCommit', data: {} }])
        .finally(() => (slowSettled = true));
      // Start the fast append only once the slow one sleeps with its position drawn. (PGlite serialises
      // transactions, so there this probe simply waits for the slow append to finish.)
      while (!slowSettled) {
        const { rows } = await pool.query<{ sleeping: number }>(
          "SELECT count(*)::int AS sleeping FROM pg_stat_activity WHERE wait_event = 'PgSleep'",
        );
        if ((rows[0]?.sleeping ?? 0) > 0) break;
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      const fast = store.appendToStream('late-fast', [{ id: 'late-fast-1', type: 'Quick', data: {} }]);
      const [slowResult, fastResult] = await Promise.all([slow, fast]);
      expect(fastResult.lastGlobalPosition).toBeGreaterThan(slowResult.lastGlobalPosition);
      await subscription.caughtUp();
      expect(seen.map((e) => e.id)).toEqual(['late-slow-1', 'late-fast-1']);
    } finally {
      await subscription.stop();
      await pool.query('DROP TRIGGER sp_test_slow_commit ON events; DROP FUNCTION sp_test_slow_commit()');
    }
  });

  it('keeps the checkpoint durably in subscription_checkpoints under the subscription id', async () => {
    await store.appendToStream('ckpt-1', [{ id: 'ckpt-1-a', type: 'Noted', data: {} }]);
    const { subscription } = await collectSubscription(store, {
      subscriptionId: 'ckpt:reader',
      categories: ['ckpt'],
    });
    await subscription.caughtUp();
    await subscription.stop();
    const { rows } = await pool.query<{ position: string }>(
      "SELECT position::text AS position FROM subscription_checkpoints WHERE subscription_id = 'ckpt:reader'",
    );
    expect(BigInt(rows[0]?.position ?? '0')).toBeGreaterThanOrEqual(
      (await store.readStream('ckpt-1'))[0]?.globalPosition ?? 1n,
    );
  });

  it('hands a batch handler consecutive events in global order', async () => {
    await store.appendToStream('batch-1', [
      { id: 'batch-1-a', type: 'Noted', data: {} },
      { id: 'batch-1-b', type: 'Noted', data: {} },
    ]);
    await store.appendToStream('batch-2', [{ id: 'batch-2-a', type: 'Noted', data: {} }]);
    const batches: string[][] = [];
    const perEvent: string[] = [];
    const subscription = await store.subscribeToAll({
      subscriptionId: 'batch:reader',
      categories: ['batch'],
      handler: async (event) => {
        perEvent.push(event.id);
      },
      handleBatch: async (events: readonly RecordedEvent[]) => {
        batches.push(events.map((e) => e.id));
      },
    });
    await subscription.caughtUp();
    await subscription.stop();
    expect(perEvent).toEqual([]);
    expect(batches.flat()).toEqual(['batch-1-a', 'batch-1-b', 'batch-2-a']);
  });

  it('rejects an event id already stored in another stream', async () => {
    await store.appendToStream('dup-1', [{ id: 'dup-shared', type: 'Noted', data: {} }]);
    await expect(
      store.appendToStream('dup-2', [{ id: 'dup-shared', type: 'Noted', data: {} }]),
    ).rejects.toBeInstanceOf(DuplicateEventIdError);
    expect(await store.readStream('dup-2')).toEqual([]);
  });

  it('reports a retry aimed at a revision the stream has moved past as a revision conflict', async () => {
    await store.appendToStream('moved-1', [{ id: 'moved-a', type: 'Noted', data: {} }], {
      expectedRevision: 'no_stream',
    });
    await expect(
      store.appendToStream('moved-1', [{ id: 'moved-a', type: 'Noted', data: {} }], { expectedRevision: 3 }),
    ).rejects.toBeInstanceOf(WrongExpectedRevisionError);
  });

  it('stamps recordedAt from the injected clock', async () => {
    const clock = new ManualClock('2026-03-04T05:06:07.000Z');
    const clocked = await openStore({ clock });
    try {
      await clocked.appendToStream('clock-1', [{ id: 'clock-a', type: 'Noted', data: {} }]);
      const [event] = await clocked.readStream('clock-1');
      expect(event?.recordedAt.toISOString()).toBe('2026-03-04T05:06:07.000Z');
    } finally {
      await clocked.close();
    }
  });

  it('refuses an empty append and a negative expected revision', async () => {
    await expect(store.appendToStream('bad-1', [])).rejects.toThrow(/at least one event/);
    await expect(
      store.appendToStream('bad-1', [{ id: 'bad-a', type: 'Noted', data: {} }], { expectedRevision: -1 }),
    ).rejects.toThrow(/expected revision/);
  });
});
