import type { Pool } from 'pg';
import { createTestDatabase, type TestDatabase, testPool } from '@stablepay/testing';
import { ManualClock } from '@stablepay/util';
import { collectSubscription, describeEventStoreConformance } from '../event-store.conformance';
import { WrongExpectedRevisionError, type RecordedEvent } from '../event-store.port';
import {
  createPostgresEventStore,
  DuplicateEventIdError,
  PostgresEventStore,
  sharesOneSession,
} from './postgres-event-store';
import { EVENT_STORE_MIGRATIONS, migrateEventStore } from './postgres-event-store.schema';

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
    pool = testPool({ connectionString: (await testDatabase()).url, max: 2 });
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
    expect(rows.map((r) => r.version)).toEqual([1, 2]);
  });

  it('tells a server that runs every connection in one session (PGlite: no named statements there) from a real one', async () => {
    const db = await testDatabase();
    expect(await sharesOneSession(pool)).toBe(db.kind === 'pglite');
    // The probe leaves no prepared statement behind.
    const { rows } = await pool.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM pg_prepared_statements WHERE name LIKE 'sp_session_probe_%'",
    );
    expect(rows[0]?.n).toBe(0);
  });

  it('never lets a catch-up reader pass an append still in flight, and delivers it once it commits', async () => {
    const db = await testDatabase();
    if (db.kind === 'pglite') {
      // PGlite runs one backend: transactions never overlap, so there is no in-flight append to hold open.
      console.log('skipped on PGlite: one backend, appends cannot overlap');
      return;
    }
    // A trigger parks the 'HeldOpen' append inside its transaction (position drawn, row written, not committed)
    // until this test releases an advisory lock; a later append then commits at a HIGHER position.
    await pool.query(`
      CREATE OR REPLACE FUNCTION sp_test_hold() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.type = 'HeldOpen' THEN PERFORM pg_advisory_xact_lock_shared(7340501); END IF;
        RETURN NEW;
      END $$;
      CREATE TRIGGER sp_test_hold AFTER INSERT ON events FOR EACH ROW EXECUTE FUNCTION sp_test_hold();
    `);
    const gate = await pool.connect();
    const reader = await openStore(); // another instance: no waiting for its own appends
    const before = await reader.headPosition();
    const { seen, subscription } = await collectSubscription(store, {
      subscriptionId: 'held-open',
      categories: ['held'],
    });
    try {
      await gate.query('SELECT pg_advisory_lock(7340501)');
      const held = store.appendToStream('held-slow', [{ id: 'held-slow-1', type: 'HeldOpen', data: {} }]);
      // Waiting for THIS lock in this database: other test files on the server wait for advisory locks of their
      // own, and counting theirs let the fast append commit before the held one had begun (seen in CI).
      for (;;) {
        const { rows } = await pool.query<{ waiting: number }>(
          `SELECT count(*)::int AS waiting FROM pg_locks
            WHERE locktype = 'advisory' AND NOT granted AND classid = 0 AND objid = 7340501 AND objsubid = 1
              AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
        );
        if ((rows[0]?.waiting ?? 0) > 0) break;
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      const fast = await store.appendToStream('held-fast', [{ id: 'held-fast-1', type: 'Quick', data: {} }]);

      // The naive reader (committed rows by position) sees the later append alone and would checkpoint past
      // the held one, which commits below it.
      const naive = await pool.query<{ event_id: string; global_position: string }>(
        "SELECT event_id, global_position::text AS global_position FROM events WHERE category = 'held' AND global_position > $1 ORDER BY global_position",
        [before.toString()],
      );
      expect(naive.rows.map((r) => r.event_id)).toEqual(['held-fast-1']);
      // This store's catch-up read does not move past the append still in flight.
      const batch = await reader.readCatchUpBatch({ after: before, categories: ['held'] });
      expect(batch.events).toEqual([]);
      expect(batch.horizon).toBeLessThanOrEqual(await reader.watermark());
      expect(await reader.headPosition()).toBe(before);
      expect(seen).toEqual([]);

      await gate.query('SELECT pg_advisory_unlock(7340501)');
      const heldResult = await held;
      expect(heldResult.lastGlobalPosition).toBeLessThan(fast.lastGlobalPosition);
      await subscription.caughtUp();
      expect(seen.map((e) => e.id)).toEqual(['held-slow-1', 'held-fast-1']);
      expect((await reader.readAll({ after: before, categories: ['held'] })).map((e) => e.id)).toEqual([
        'held-slow-1',
        'held-fast-1',
      ]);
    } finally {
      await gate.query('SELECT pg_advisory_unlock_all()');
      gate.release();
      await subscription.stop();
      await reader.close();
      await pool.query('DROP TRIGGER sp_test_hold ON events; DROP FUNCTION sp_test_hold()');
    }
  });

  it('is not held back by a transaction in flight in another database of the cluster', async () => {
    const db = await testDatabase();
    if (db.kind === 'pglite') {
      console.log('skipped on PGlite: one database, one backend');
      return;
    }
    const other = await createTestDatabase();
    const elsewhere = testPool({ connectionString: other.url, max: 1 });
    const client = await elsewhere.connect();
    const reader = await openStore();
    try {
      const before = await reader.headPosition();
      await client.query('BEGIN');
      await client.query('SELECT pg_current_xact_id()'); // holds a transaction id, like CREATE/DROP DATABASE does
      await store.appendToStream('elsewhere-1', [{ id: 'elsewhere-1', type: 'Noted', data: {} }]);
      const batch = await reader.readCatchUpBatch({ after: before, categories: ['elsewhere'] });
      expect(batch.events.map((e) => e.id)).toEqual(['elsewhere-1']);
    } finally {
      await client.query('ROLLBACK');
      client.release();
      await elsewhere.end();
      await reader.close();
      await other.drop();
    }
  });

  it('upgrades a version-1 table: old events keep their order in front of new ones and checkpoints stay valid', async () => {
    const db = await testDatabase();
    const legacy = testPool({ connectionString: db.url, max: 1 });
    try {
      // A version-1 schema in its own PostgreSQL schema (search_path), with rows as version 1 wrote them.
      await legacy.query('CREATE SCHEMA legacy_v1; SET search_path TO legacy_v1');
      await legacy.query(EVENT_STORE_MIGRATIONS[0]?.sql ?? '');
      await legacy.query(`
        INSERT INTO events (event_id, stream_id, category, revision, type, data, recorded_at)
        VALUES ('old-1', 'old-1', 'old', 0, 'Noted', '{}', now()), ('old-2', 'old-2', 'old', 0, 'Noted', '{}', now())`);
      await legacy.query(EVENT_STORE_MIGRATIONS[1]?.sql ?? '');
      const upgraded = new PostgresEventStore(legacy);
      await upgraded.appendToStream('old-3', [{ id: 'old-3', type: 'Noted', data: {} }]);
      expect((await upgraded.readAll({})).map((e) => e.id)).toEqual(['old-1', 'old-2', 'old-3']);
      const first = (await upgraded.readStream('old-1'))[0]?.globalPosition ?? 0n;
      expect((await upgraded.readAll({ after: first })).map((e) => e.id)).toEqual(['old-2', 'old-3']);
    } finally {
      // PGlite serves every connection from one session: the search_path must not outlive this case.
      await legacy.query('RESET search_path');
      await legacy.end();
    }
  });

  it('of concurrent appends expecting the same revision exactly one wins, the others get a revision conflict', async () => {
    await store.appendToStream('race-1', [{ id: 'race-0', type: 'Noted', data: {} }]);
    const outcomes = await Promise.allSettled(
      Array.from({ length: 8 }, (_, i) =>
        store.appendToStream('race-1', [{ id: `race-a${i}`, type: 'Noted', data: {} }], {
          expectedRevision: 0,
        }),
      ),
    );
    expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(1);
    for (const o of outcomes) {
      if (o.status === 'rejected') expect(o.reason).toBeInstanceOf(WrongExpectedRevisionError);
    }
    expect(await store.readStream('race-1')).toHaveLength(2);
    // The same append sent concurrently several times (client retries) is stored once, all get its result.
    const same = [{ id: 'race-same', type: 'Noted', data: {} }];
    const results = await Promise.all(
      Array.from({ length: 5 }, () =>
        store.appendToStream('race-2', same, { expectedRevision: 'no_stream' }),
      ),
    );
    expect(new Set(results.map((r) => r.lastGlobalPosition)).size).toBe(1);
    expect(await store.readStream('race-2')).toHaveLength(1);
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

  it('reading the next batch while a full one is handled skips nothing: a failing batch, appends during handling', async () => {
    const small = await createPostgresEventStore({
      url: (await testDatabase()).url,
      poolSize: 3,
      subscriptions: { batchSize: 3, retry: { initialMs: 5, maxMs: 20 } },
    });
    try {
      const first = Array.from({ length: 7 }, (_, i) => `pf-${i}`);
      for (const stream of first)
        await small.appendToStream(stream, [{ id: `${stream}-a`, type: 'Noted', data: {} }]);
      const later = Array.from({ length: 4 }, (_, i) => `pf-later-${i}`);
      const batches: string[][] = [];
      let failOnce = true;
      const subscription = await small.subscribeToAll({
        subscriptionId: 'pf:reader',
        categories: ['pf'],
        handler: async () => undefined,
        handleBatch: async (events: readonly RecordedEvent[]) => {
          const ids = events.map((e) => e.id);
          // The second full batch fails once (the read of the third was already sent), and while it is handled
          // more events are appended behind the ones already read.
          if (ids[0] === 'pf-3-a' && failOnce) {
            failOnce = false;
            for (const stream of later)
              await small.appendToStream(stream, [{ id: `${stream}-a`, type: 'Noted', data: {} }]);
            throw new Error('projection database unavailable');
          }
          batches.push(ids);
        },
      });
      await subscription.caughtUp();
      // The failing batch ran before that (the horizon moves only past handled batches), so the later appends
      // are stored now and a second wait covers them.
      expect(failOnce).toBe(false);
      await subscription.caughtUp();
      await subscription.stop();
      expect(batches.flat()).toEqual([...first, ...later].map((s) => `${s}-a`));
      expect(batches.slice(0, 2)).toEqual([
        ['pf-0-a', 'pf-1-a', 'pf-2-a'],
        ['pf-3-a', 'pf-4-a', 'pf-5-a'],
      ]);
    } finally {
      await small.close();
    }
  });

  it('two subscriptions woken by the same append at the same position share one catch-up read', async () => {
    const quiet = await createPostgresEventStore({
      url: (await testDatabase()).url,
      poolSize: 4,
      // Only appends wake them: no poll in the middle of the measurement.
      subscriptions: { pollIntervalMs: 60_000 },
    });
    try {
      const seen = new Map<string, string[]>();
      const arrived: Array<() => void> = [];
      const both = new Promise<void>((resolve) => {
        let n = 0;
        arrived.push(
          () => (++n === 2 ? resolve() : undefined),
          () => (++n === 2 ? resolve() : undefined),
        );
      });
      // Counted from the start, by what each read returned: a read already in flight when the append commits (woken
      // by another instance's earlier append under load) may return the event, and that read is shared too.
      const read = quiet.readCatchUpBatch.bind(quiet);
      let readsReturningIt = 0;
      jest.spyOn(quiet, 'readCatchUpBatch').mockImplementation(async (options) => {
        const batch = await read(options);
        if (batch.events.some((e) => e.id === 'sharedread-1-a')) readsReturningIt += 1;
        return batch;
      });
      const subscriptions = await Promise.all(
        ['shared:projection', 'shared:recorder'].map((subscriptionId, i) =>
          quiet.subscribeToAll({
            subscriptionId,
            categories: ['sharedread'],
            handler: async () => undefined,
            handleBatch: async (events) => {
              seen.set(subscriptionId, [...(seen.get(subscriptionId) ?? []), ...events.map((e) => e.id)]);
              if (events.some((e) => e.id === 'sharedread-1-a')) arrived[i]?.();
            },
          }),
        ),
      );
      await Promise.all(subscriptions.map((s) => s.caughtUp()));
      await quiet.appendToStream('sharedread-1', [{ id: 'sharedread-1-a', type: 'Noted', data: {} }]);
      await both;
      await Promise.all(subscriptions.map((s) => s.stop()));
      expect(seen.get('shared:projection')).toEqual(['sharedread-1-a']);
      expect(seen.get('shared:recorder')).toEqual(['sharedread-1-a']);
      expect(readsReturningIt).toBe(1);
    } finally {
      await quiet.close();
    }
  });

  it('group-commits concurrent single-event appends, and one bad append does not fail its batch-mates', async () => {
    await store.appendToStream('gc-existing', [{ id: 'gc-taken', type: 'Noted', data: {} }]);
    const create = (stream: string, data: unknown = { n: 1 }) =>
      store.appendToStream(stream, [{ id: `${stream}-a`, type: 'Noted', data }], {
        expectedRevision: 'no_stream',
      });
    const good = Array.from({ length: 8 }, (_, i) => `gc-good-${i}`);
    // Fired in one go: the first appends run alone, the rest queue and go together in one statement, where some
    // do not apply (a revision conflict, an id stored elsewhere, a retry): each of those is run alone.
    const results = await Promise.allSettled([
      ...good.map((stream) => create(stream)),
      store.appendToStream('gc-conflict', [{ id: 'gc-conflict-a', type: 'Noted', data: {} }], {
        expectedRevision: 4,
      }),
      store.appendToStream('gc-dup', [{ id: 'gc-taken', type: 'Noted', data: {} }]),
      store.appendToStream('gc-existing', [{ id: 'gc-taken', type: 'Noted', data: {} }], {
        expectedRevision: 'no_stream',
      }),
    ]);
    const [conflict, dup, retried] = results.slice(good.length);
    expect(results.slice(0, good.length).map((r) => r.status)).toEqual(good.map(() => 'fulfilled'));
    expect(conflict).toMatchObject({ status: 'rejected', reason: expect.any(WrongExpectedRevisionError) });
    expect(dup).toMatchObject({ status: 'rejected', reason: expect.any(DuplicateEventIdError) });
    // The same id at the same place: an idempotent retry, answered with the original result.
    expect(retried).toMatchObject({ status: 'fulfilled', value: { nextExpectedRevision: 0, retried: true } });
    expect(await store.readStream('gc-conflict')).toEqual([]);
    // Some of them shared a transaction (a group).
    const { rows } = await pool.query<{ n: number }>(
      'SELECT count(DISTINCT transaction_id)::int AS n FROM events WHERE stream_id = ANY($1::text[])',
      [good],
    );
    expect(rows[0]?.n).toBeLessThan(good.length);

    // A statement the server refuses as a whole (jsonb holds no NUL) is re-run append by append: only the
    // culprit fails.
    const more = Array.from({ length: 8 }, (_, i) => `gc-more-${i}`);
    const second = await Promise.allSettled([
      ...more.map((stream) => create(stream)),
      create('gc-nul', { s: 'a\u0000b' }),
    ]);
    expect(second.slice(0, more.length).map((r) => r.status)).toEqual(more.map(() => 'fulfilled'));
    expect(second[more.length]).toMatchObject({ status: 'rejected' });
    expect(await store.readStream('gc-nul')).toEqual([]);

    // Every applied append is there exactly once, at revision 0, and the catch-up read returns each once.
    for (const stream of [...good, ...more]) {
      expect((await store.readStream(stream)).map((e) => [e.id, e.revision])).toEqual([[`${stream}-a`, 0]]);
    }
    const read = (await store.readAll({ categories: ['gc'] })).map((e) => e.id);
    expect(read.filter((id) => /^gc-(good|more)-/.test(id)).sort()).toEqual(
      [...good, ...more].map((g) => `${g}-a`).sort(),
    );
  });

  it('a group that fails after its statement rejects every waiting append (no hang, no unhandled rejection) and the store goes on', async () => {
    // The group statement runs for real, but its answer arrives malformed: the store cannot tell its members what
    // happened, so each must be told it failed (a retry with the same event id is then answered idempotently).
    const faulty = testPool({ connectionString: (await testDatabase()).url, max: 5 });
    const realQuery = faulty.query.bind(faulty) as (config: unknown) => Promise<{ rows: unknown[] }>;
    let malformed = true;
    faulty.query = (async (config: unknown) => {
      const result = await realQuery(config);
      const text = (config as { text?: unknown } | null)?.text;
      const isGroup = typeof text === 'string' && text.includes('WITH ORDINALITY AS r(');
      if (!isGroup || !malformed) return result;
      return { ...result, rows: result.rows.map((r) => ({ ...(r as object), transaction_id: 'not-an-id' })) };
    }) as unknown as typeof faulty.query;
    const faultyStore = new PostgresEventStore(faulty);
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const streams = Array.from({ length: 12 }, (_, i) => `gf-${i}`);
      const append = (stream: string) =>
        faultyStore.appendToStream(stream, [{ id: `${stream}-a`, type: 'Noted', data: {} }], {
          expectedRevision: 'no_stream',
        });
      const results = await Promise.allSettled(streams.map(append));
      // The first ones run alone (fulfilled); the queued ones went as a group whose answer was malformed.
      const rejected = results.filter((r) => r.status === 'rejected');
      expect(rejected.length).toBeGreaterThan(0);
      expect(rejected[0]).toMatchObject({ reason: expect.any(SyntaxError) });
      await new Promise((resolve) => setImmediate(resolve));
      expect(unhandled).toEqual([]);

      // The store still works: the same appends again are answered from what the group did store.
      malformed = false;
      const again = await Promise.allSettled(streams.map(append));
      expect(again.map((r) => r.status)).toEqual(streams.map(() => 'fulfilled'));
      for (const stream of streams)
        expect((await faultyStore.readStream(stream)).map((e) => e.id)).toEqual([`${stream}-a`]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
      await faultyStore.close();
      await faulty.end();
    }
  });

  describe('notifications between instances (LISTEN/NOTIFY)', () => {
    const until = async (done: () => boolean): Promise<void> => {
      while (!done()) await new Promise((resolve) => setTimeout(resolve, 5));
    };

    /**
     * Runs `body` with a subscription to `category` on another store instance whose subscriptions would poll only
     * once a minute: an event arriving means a notification woke it. Skipped on PGlite (notifications are off).
     */
    const withListeningReader = async (
      category: string,
      body: (seen: RecordedEvent[]) => Promise<void>,
    ): Promise<void> => {
      const db = await testDatabase();
      if (db.kind === 'pglite') {
        console.log('skipped on PGlite: one process, one session (notifications are off there)');
        return;
      }
      const other = await createPostgresEventStore({
        url: db.url,
        poolSize: 3,
        subscriptions: { pollIntervalMs: 60_000 },
      });
      try {
        const { seen, subscription } = await collectSubscription(other, {
          subscriptionId: `${category}:reader`,
          categories: [category],
        });
        await subscription.caughtUp();
        await body(seen);
        await subscription.stop();
      } finally {
        await other.close();
      }
    };

    it("wakes another instance's subscription at once when an append commits", async () => {
      await withListeningReader('notified', async (seen) => {
        await store.appendToStream('notified-1', [{ id: 'notified-1-a', type: 'Noted', data: {} }]);
        await until(() => seen.length > 0);
        expect(seen.map((e) => e.id)).toEqual(['notified-1-a']);
      });
    });

    it('listens again after its connection is killed, and catches up on what it missed', async () => {
      await withListeningReader('renotified', async (seen) => {
        const killed = await pool.query<{ pid: number }>(
          `SELECT pg_terminate_backend(pid) AS killed, pid FROM pg_stat_activity
            WHERE datname = current_database() AND query = 'LISTEN stablepay_events'`,
        );
        expect(killed.rows.length).toBeGreaterThan(0);
        // Appended while nobody listens: the reconnection wakes every subscription once.
        await store.appendToStream('renotified-1', [{ id: 'renotified-1-a', type: 'Noted', data: {} }]);
        await until(() => seen.length > 0);
        await store.appendToStream('renotified-2', [{ id: 'renotified-2-a', type: 'Noted', data: {} }]);
        await until(() => seen.length > 1);
        expect(seen.map((e) => e.id)).toEqual(['renotified-1-a', 'renotified-2-a']);
      });
    });
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
