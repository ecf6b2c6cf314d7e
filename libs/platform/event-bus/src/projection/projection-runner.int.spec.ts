import type { DataSource, EntityManager } from 'typeorm';
import { register } from 'prom-client';
import { openDataSource } from '@stablepay/database';
import { createPostgresEventStore, type PostgresEventStore } from '@stablepay/event-store';
import { createTestDatabase, eventually, type TestDatabase } from '@stablepay/testing';
import type { BusMessage } from '../event-bus.port';
import { recordingBus } from '../recording-bus';
import { StoreLogEventBus } from '../store-log/store-log-event-bus';
import { topicForCategory } from '../topics';
import {
  listParkedStreams,
  PARKED_STREAMS_MIGRATIONS,
  ProjectionRegistry,
  ProjectionRunner,
  requestParkedStreamRetry,
} from './projection-runner';

const TOPIC = 'payments.payment.v1';

describe('ProjectionRunner', () => {
  let database: TestDatabase;
  let dataSource: DataSource;
  let store: PostgresEventStore;
  let bus: StoreLogEventBus;
  const logged: Array<Record<string, unknown>> = [];
  const committed: string[] = [];

  /** A read model whose `label` column refuses NULL: an event with a null label is this test's poison. */
  const applyTo =
    (table: string) =>
    async (em: EntityManager, message: BusMessage): Promise<boolean> => {
      const { label } = message.data as { label: string | null };
      const rows: unknown[] = await em.query(
        `INSERT INTO ${table} (stream_id, label, revision) VALUES ($1, $2, $3)
         ON CONFLICT (stream_id) DO UPDATE SET label = EXCLUDED.label, revision = EXCLUDED.revision
           WHERE ${table}.revision < EXCLUDED.revision
         RETURNING stream_id`,
        [message.key, label, message.revision],
      );
      return rows.length > 0;
    };
  const apply = applyTo('runner_rows');

  const runner = (): ProjectionRunner =>
    new ProjectionRunner(
      {
        name: 'test.runner-projection',
        topics: [TOPIC],
        apply,
        onCommitted: (changed) => committed.push(...changed.map((m) => `${m.key}@${m.revision}`)),
      },
      {
        dataSource,
        bus,
        store,
        logger: {
          error: (m) => logged.push({ level: 'error', ...m }),
          warn: (m) => logged.push({ level: 'warn', ...m }),
          log: (m) => logged.push({ level: 'log', ...m }),
        },
      },
    );

  const rows = async (): Promise<Record<string, string>> => {
    const result: Array<{ stream_id: string; label: string; revision: number }> = await dataSource.query(
      'SELECT stream_id, label, revision FROM runner_rows ORDER BY stream_id',
    );
    return Object.fromEntries(result.map((r) => [r.stream_id, `${r.label}@${r.revision}`]));
  };

  const append = (stream: string, labels: Array<string | null>): Promise<unknown> =>
    store.appendToStream(
      stream,
      labels.map((label, i) => ({
        id: `${stream}:${label ?? 'null'}:${i}`,
        type: 'PaymentNoted',
        data: { label },
      })),
    );

  beforeAll(async () => {
    database = await createTestDatabase();
    dataSource = await openDataSource({
      url: database.url,
      migrations: [...PARKED_STREAMS_MIGRATIONS],
    });
    await dataSource.query(
      'CREATE TABLE runner_rows (stream_id text PRIMARY KEY, label text NOT NULL, revision integer NOT NULL)',
    );
    store = await createPostgresEventStore({
      url: database.url,
      poolSize: 3,
      subscriptions: { retry: { initialMs: 10, maxMs: 50 } },
    });
    bus = new StoreLogEventBus(store);
  });

  afterAll(async () => {
    await bus?.close();
    await store?.close();
    await dataSource?.destroy();
    await database?.drop();
  });

  it('parks the stream of an event it cannot apply, keeps its later events waiting, and goes on with every other stream', async () => {
    await append('payment-a', ['a0', null, 'a2']);
    await append('payment-b', ['b0', 'b1']);
    const projection = runner();
    const registry = new ProjectionRegistry();
    await projection.start();
    registry.add(projection);
    try {
      await projection.caughtUp();
      expect(await rows()).toEqual({ 'payment-a': 'a0@0', 'payment-b': 'b1@1' });
      const [parked] = await listParkedStreams(dataSource, 'test.runner-projection');
      expect(parked).toMatchObject({
        streamId: 'payment-a',
        revision: 1,
        eventId: 'payment-a:null:1',
        waitingRevision: 2,
        attempts: 1,
      });
      expect(parked?.error).toMatch(/null value in column "label"/);
      expect(projection.status()).toMatchObject({ parkedStreams: 1, stalled: false });
      expect(registry.readiness()).toEqual({
        stalled: [],
        degraded: ['test.runner-projection: 1 parked stream(s)'],
      });
      expect(logged.some((l) => l['level'] === 'error' && l['streamId'] === 'payment-a')).toBe(true);
      const metrics = await register.metrics();
      expect(metrics).toContain('stablepay_projection_parked_streams{projection="test.runner-projection"} 1');
      expect(metrics).toMatch(
        /stablepay_projection_batch_size_count\{projection="test.runner-projection"\} \d+/,
      );

      // Other streams go on; the parked one's new events queue behind the parked event, in order.
      await append('payment-b', ['b2']);
      await append('payment-a', ['a3']);
      await projection.caughtUp();
      expect(await rows()).toEqual({ 'payment-a': 'a0@0', 'payment-b': 'b2@2' });
      expect((await listParkedStreams(dataSource))[0]?.waitingRevision).toBe(3);

      // A retry before the cause is fixed fails again and stays parked.
      expect(await projection.retry('payment-a')).toBe('still_parked');
      expect((await listParkedStreams(dataSource))[0]?.attempts).toBe(2);

      // The cause is fixed (here: the read model learns to hold the value); the retry applies 1..3 in order.
      await dataSource.query('ALTER TABLE runner_rows ALTER COLUMN label DROP NOT NULL');
      expect(await projection.retry('payment-a')).toBe('applied');
      expect(await rows()).toEqual({ 'payment-a': 'a3@3', 'payment-b': 'b2@2' });
      expect(await listParkedStreams(dataSource)).toEqual([]);
      expect(committed.filter((c) => c.startsWith('payment-a'))).toEqual([
        'payment-a@0',
        'payment-a@1',
        'payment-a@2',
        'payment-a@3',
      ]);
      expect(await projection.retry('payment-a')).toBe('not_parked');
      expect(registry.readiness().degraded).toEqual([]);

      // Released: its next events apply live again.
      await append('payment-a', ['a4']);
      await projection.caughtUp();
      expect((await rows())['payment-a']).toBe('a4@4');
    } finally {
      await projection.stop();
    }
  });

  it('retries a stream an operator marked for retry (the route and CLI path), within the owning runner', async () => {
    await dataSource.query('ALTER TABLE runner_rows ALTER COLUMN label SET NOT NULL');
    await append('payment-c', [null]);
    const projection = runner();
    await projection.start();
    try {
      await projection.caughtUp();
      expect((await listParkedStreams(dataSource)).map((p) => p.streamId)).toEqual(['payment-c']);
      expect(await requestParkedStreamRetry(dataSource, 'test.runner-projection', 'payment-x')).toBe(false);
      await dataSource.query('ALTER TABLE runner_rows ALTER COLUMN label DROP NOT NULL');
      expect(await requestParkedStreamRetry(dataSource, 'test.runner-projection', 'payment-c')).toBe(true);
      await projection.requestRetries();
      expect(await listParkedStreams(dataSource)).toEqual([]);
      expect((await rows())['payment-c']).toBe('null@0');
    } finally {
      await projection.stop();
    }
  });

  it('counts the streams another member parked when the bus announces a partition assignment, so a later event of such a stream waits behind the parked one', async () => {
    const name = 'test.runner-assignment';
    const scripted = recordingBus();
    const projection = new ProjectionRunner(
      { name, topics: [TOPIC], apply },
      {
        dataSource,
        bus: scripted.bus,
        store,
        logger: { error: () => undefined, warn: () => undefined, log: () => undefined },
      },
    );
    await projection.start();
    const options = scripted.consumers[0];
    try {
      // Another member parked the stream after this one started (this one had no partition of it then).
      await dataSource.query(
        `INSERT INTO parked_streams (projection, stream_id, event_id, revision, event_type, error)
         VALUES ($1, 'payment-as', 'payment-as:a1:1', 1, 'PaymentNoted', 'Error: refused')`,
        [name],
      );
      // A rebalance gives this member the partition; the adapter announces it before the first batch.
      await options?.onAssigned?.();
      await options?.handleBatch?.([
        {
          id: 'payment-as:a2:2',
          topic: TOPIC,
          key: 'payment-as',
          type: 'PaymentNoted',
          data: { label: 'a2' },
          metadata: {},
          revision: 2,
          recordedAt: new Date().toISOString(),
        },
      ]);
      expect((await rows())['payment-as']).toBeUndefined();
      expect((await listParkedStreams(dataSource, name))[0]).toMatchObject({
        streamId: 'payment-as',
        revision: 1,
        waitingRevision: 2,
      });
      expect(projection.status().parkedStreams).toBe(1);
    } finally {
      await projection.stop();
    }
  });

  it("answers `applied`, not `not_parked`, to a retry that waited for another retry of the stream (another process's) which released it", async () => {
    if (database.kind === 'pglite') {
      // PGlite runs one backend: another process's retry cannot hold the stream's row lock while this one waits.
      console.log('skipped on PGlite: one backend, no second session to hold the row lock');
      return;
    }
    const name = 'test.runner-released-meanwhile';
    await append('payment-rm', ['m0']);
    await dataSource.query(
      `INSERT INTO parked_streams (projection, stream_id, event_id, revision, event_type, error)
       VALUES ($1, 'payment-rm', 'payment-rm:m0:0', 0, 'PaymentNoted', 'Error: refused')`,
      [name],
    );
    const projection = new ProjectionRunner(
      { name, topics: [TOPIC], apply },
      {
        dataSource,
        bus: recordingBus().bus,
        store,
        logger: { error: () => undefined, warn: () => undefined, log: () => undefined },
      },
    );
    // Another process's retry of the stream: it holds the row's lock until it releases the stream.
    const other = dataSource.createQueryRunner();
    await other.connect();
    try {
      await other.query('BEGIN');
      await other.query(
        `SELECT 1 FROM parked_streams WHERE projection = $1 AND stream_id = 'payment-rm' FOR UPDATE`,
        [name],
      );
      const retrying = projection.retry('payment-rm');
      await eventually(
        async () =>
          (
            await dataSource.query(
              `SELECT count(*)::int AS n FROM pg_stat_activity
                WHERE datname = current_database() AND wait_event_type = 'Lock'
                  AND query LIKE '%FROM parked_streams%FOR UPDATE%'`,
            )
          )[0].n as number,
        (n) => n > 0,
        "this retry waiting for the row's lock",
        { timeoutMs: 30_000, intervalMs: 50 },
      );
      await other.query(`DELETE FROM parked_streams WHERE projection = $1 AND stream_id = 'payment-rm'`, [
        name,
      ]);
      await other.query('COMMIT');
      expect(await retrying).toBe('applied');
      expect(await projection.retry('payment-rm')).toBe('not_parked');
    } finally {
      await other.release();
      await projection.stop();
    }
  });

  it("shows, at its next poll, the streams another instance of the projection parked and released (another process's count, /ready and gauge)", async () => {
    const name = 'test.runner-two-instances';
    await dataSource.query(
      'CREATE TABLE two_instance_rows (stream_id text PRIMARY KEY, label text NOT NULL, revision integer NOT NULL)',
    );
    // The other process: its own connections to the same database.
    const otherDataSource = await openDataSource({ url: database.url, migrations: [] });
    const quiet = { error: () => undefined, warn: () => undefined, log: () => undefined };
    // A topic of its own: the live bus hands this instance no earlier test's stream.
    const definition = { name, topics: [topicForCategory('customer')], apply: applyTo('two_instance_rows') };
    // This instance handles the live events (it parks); the other is handed none (e.g. no partition of the stream).
    const here = new ProjectionRunner(definition, { dataSource, bus, store, logger: quiet });
    const there = new ProjectionRunner(definition, {
      dataSource: otherDataSource,
      bus: recordingBus().bus,
      store,
      logger: quiet,
    });
    const hereRegistry = new ProjectionRegistry();
    const thereRegistry = new ProjectionRegistry();
    await there.start();
    thereRegistry.add(there);
    await append('customer-ti', [null]);
    await here.start();
    hereRegistry.add(here);
    try {
      await here.caughtUp();
      expect(here.status().parkedStreams).toBe(1);

      // Parked by the other process: seen at this one's next poll.
      await there.requestRetries();
      expect(there.status().parkedStreams).toBe(1);
      expect(thereRegistry.readiness().degraded).toEqual([`${name}: 1 parked stream(s)`]);

      // Released by the other process (its retry route): this one's count, /ready and gauge follow at its poll.
      await dataSource.query('ALTER TABLE two_instance_rows ALTER COLUMN label DROP NOT NULL');
      expect(await there.retry('customer-ti')).toBe('applied');
      await here.requestRetries();
      expect(here.status().parkedStreams).toBe(0);
      expect(hereRegistry.readiness().degraded).toEqual([]);
      expect(await register.metrics()).toContain(
        `stablepay_projection_parked_streams{projection="${name}"} 0`,
      );
    } finally {
      await here.stop();
      await there.stop();
      await otherDataSource.destroy();
    }
  });

  it('hears parks, releases and retry requests made by other processes at once (LISTEN/NOTIFY), not at its next poll', async () => {
    if (database.kind === 'pglite') {
      // On PGlite (one shared session) nothing listens: the runners poll every second there.
      console.log('skipped on PGlite: one shared session, no LISTEN/NOTIFY');
      return;
    }
    const name = 'test.runner-notified';
    await dataSource.query(
      'CREATE TABLE notified_rows (stream_id text PRIMARY KEY, label text NOT NULL, revision integer NOT NULL)',
    );
    const otherDataSource = await openDataSource({ url: database.url, migrations: [] });
    const quiet = { error: () => undefined, warn: () => undefined, log: () => undefined };
    // A topic of its own: the live bus hands this instance no earlier test's stream.
    const definition = { name, topics: [topicForCategory('beneficiary')], apply: applyTo('notified_rows') };
    // Both poll once an hour while they hear notifications: whatever they see before, they were told.
    const here = new ProjectionRunner(definition, {
      dataSource,
      bus,
      store,
      logger: quiet,
      notifiedPollMs: 3_600_000,
    });
    const there = new ProjectionRunner(definition, {
      dataSource: otherDataSource,
      bus: recordingBus().bus,
      store,
      logger: quiet,
      notifiedPollMs: 3_600_000,
    });
    await there.start();
    await here.start();
    try {
      // Parked by this process: the other one counts it.
      await append('beneficiary-n1', [null]);
      await here.caughtUp();
      await eventually(
        async () => there.status().parkedStreams,
        (n) => n === 1,
        "the other process counting this one's parked stream",
      );

      // The operator asks for the retry (the admin route or CLI, in a third process): one of them runs it at once,
      // and both count the release.
      await dataSource.query('ALTER TABLE notified_rows ALTER COLUMN label DROP NOT NULL');
      const operator = await openDataSource({ url: database.url, migrations: [] });
      try {
        expect(await requestParkedStreamRetry(operator, name, 'beneficiary-n1')).toBe(true);
      } finally {
        await operator.destroy();
      }
      await eventually(
        async () => [here.status().parkedStreams, there.status().parkedStreams],
        ([a, b]) => a === 0 && b === 0,
        'the retry run and the release counted by both',
      );
      expect(await listParkedStreams(dataSource, name)).toEqual([]);
      expect(
        (await dataSource.query(`SELECT label FROM notified_rows WHERE stream_id = 'beneficiary-n1'`))[0],
      ).toEqual({
        label: null,
      });
    } finally {
      await here.stop();
      await there.stop();
      await otherDataSource.destroy();
    }
  });

  describe('a retry that throws (not one of its events failing)', () => {
    const name = 'test.runner-retry-throws';
    /** A runner of `name` over `retry_rows`, started by nobody: the test runs its retry poll by hand. */
    const retryRunner = (onRead?: (stream: string) => Promise<void>): ProjectionRunner =>
      new ProjectionRunner(
        { name, topics: [TOPIC], apply: applyTo('retry_rows') },
        {
          dataSource,
          bus,
          store: {
            readStream: async (stream, options) => {
              await onRead?.(stream);
              return store.readStream(stream, options);
            },
          },
          logger: { error: () => undefined, warn: () => undefined, log: () => undefined },
          transientRetryBaseMs: 60_000,
        },
      );
    /** `stream` (one event) parked at 0 with an operator's retry request on it, as another process leaves it. */
    const parkedAndRequested = async (stream: string): Promise<void> => {
      await append(stream, ['x0']);
      await dataSource.query(
        `INSERT INTO parked_streams (projection, stream_id, event_id, revision, event_type, error, retry_requested_at)
         VALUES ($1, $2, $3, 0, 'PaymentNoted', 'Error: refused', now())`,
        [name, stream, `${stream}:x0:0`],
      );
    };
    const parked = async (stream: string) =>
      (
        await dataSource.query(
          `SELECT attempts, error, retry_requested_at <= now() AS due FROM parked_streams
            WHERE projection = $1 AND stream_id = $2`,
          [name, stream],
        )
      )[0] as { attempts: number; error: string; due: boolean } | undefined;
    /** The real DELETE fails in Postgres: a trigger refuses it for `stream`, with SQLSTATE `code`. */
    const refuseRelease = async (stream: string, code: string): Promise<() => Promise<void>> => {
      const trigger = `test_refuse_${stream.replace(/\W/g, '_')}`;
      await dataSource.query(`CREATE FUNCTION ${trigger}() RETURNS trigger LANGUAGE plpgsql
        AS $$ BEGIN RAISE EXCEPTION 'release refused by the test' USING ERRCODE = '${code}'; END $$`);
      await dataSource.query(`CREATE TRIGGER ${trigger} BEFORE DELETE ON parked_streams FOR EACH ROW
        WHEN (OLD.projection = '${name}' AND OLD.stream_id = '${stream}') EXECUTE FUNCTION ${trigger}()`);
      return async () => {
        await dataSource.query(`DROP TRIGGER IF EXISTS ${trigger} ON parked_streams`);
        await dataSource.query(`DROP FUNCTION IF EXISTS ${trigger}()`);
      };
    };
    const applied = async (): Promise<string[]> =>
      (await dataSource.query('SELECT stream_id FROM retry_rows ORDER BY stream_id')).map(
        (r: { stream_id: string }) => r.stream_id,
      );

    beforeAll(async () => {
      await dataSource.query(
        'CREATE TABLE retry_rows (stream_id text PRIMARY KEY, label text, revision integer NOT NULL)',
      );
    });

    it('puts off a retry whose DELETE of its row fails (rolled back with its effect) and goes on with the next stream: neither retried at every poll nor holding the streams after it', async () => {
      await parkedAndRequested('payment-rt1');
      await parkedAndRequested('payment-rt2');
      const allow = await refuseRelease('payment-rt1', 'P0001');
      const projection = retryRunner();
      try {
        await projection.requestRetries();
        // The stream after it was retried and released.
        expect(await parked('payment-rt2')).toBeUndefined();
        // The failing one: its effect rolled back with the DELETE, its next retry put off, the cause recorded.
        expect(await applied()).toEqual(['payment-rt2']);
        const row = await parked('payment-rt1');
        expect(row).toMatchObject({ attempts: 2, due: false });
        expect(row?.error).toMatch(/release refused by the test/);

        await allow();
        expect(await requestParkedStreamRetry(dataSource, name, 'payment-rt1')).toBe(true);
        await projection.requestRetries();
        expect(await parked('payment-rt1')).toBeUndefined();
        expect(await applied()).toEqual(['payment-rt1', 'payment-rt2']);
      } finally {
        await allow();
        await projection.stop();
      }
    });

    it("keeps an operator's request made while a retry ran when that retry fails transiently (its back-off does not postpone the request), and backs off once a retry started after the request fails", async () => {
      await parkedAndRequested('payment-rt3');
      const allow = await refuseRelease('payment-rt3', '40001');
      let requestMidway = true;
      // The operator asks again while the retry runs (after the poll read the row, before its transaction).
      const projection = retryRunner(async (stream) => {
        if (stream !== 'payment-rt3' || !requestMidway) return;
        requestMidway = false;
        expect(await requestParkedStreamRetry(dataSource, name, stream)).toBe(true);
      });
      try {
        await projection.requestRetries();
        expect(await parked('payment-rt3')).toMatchObject({ attempts: 2, due: true });
        // This retry started after the request: its transient failure puts the next one off.
        await projection.requestRetries();
        expect(await parked('payment-rt3')).toMatchObject({ attempts: 3, due: false });
      } finally {
        await allow();
        await projection.stop();
      }
    });
  });

  it('applies a batch with applyBatch in one go, and when the batch fails, parks only the culprit stream', async () => {
    await dataSource.query(
      'CREATE TABLE runner_batch_rows (stream_id text PRIMARY KEY, label text NOT NULL, revision integer NOT NULL)',
    );
    const applyBatchRow = applyTo('runner_batch_rows');
    const batchCalls: number[] = [];
    const changedSeen: string[] = [];
    const projection = new ProjectionRunner(
      {
        name: 'test.runner-batch-projection',
        topics: [TOPIC],
        apply: applyBatchRow,
        applyBatch: async (em, messages) => {
          batchCalls.push(messages.length);
          const changed: BusMessage[] = [];
          for (const message of messages) if (await applyBatchRow(em, message)) changed.push(message);
          return changed;
        },
        onCommitted: (changed) => changedSeen.push(...changed.map((m) => `${m.key}@${m.revision}`)),
      },
      {
        dataSource,
        bus,
        store,
        logger: { error: () => undefined, warn: () => undefined, log: () => undefined },
      },
    );
    const batchRows = async (): Promise<Record<string, string>> => {
      const result: Array<{ stream_id: string; label: string; revision: number }> = await dataSource.query(
        "SELECT stream_id, label, revision FROM runner_batch_rows WHERE stream_id LIKE 'payment-batch%' ORDER BY stream_id",
      );
      return Object.fromEntries(result.map((r) => [r.stream_id, `${r.label}@${r.revision}`]));
    };
    await append('payment-batch1', ['x0', 'x1']);
    await append('payment-batch2', ['y0', null, 'y2']);
    await append('payment-batch3', ['z0']);
    await projection.start();
    try {
      await projection.caughtUp();
      // The batch with the poison went through applyBatch once, failed, and was applied event by event.
      expect(batchCalls.length).toBeGreaterThan(0);
      expect(await batchRows()).toEqual({
        'payment-batch1': 'x1@1',
        'payment-batch2': 'y0@0',
        'payment-batch3': 'z0@0',
      });
      expect(
        (await listParkedStreams(dataSource, 'test.runner-batch-projection'))
          .map((p) => p.streamId)
          .filter((id) => id.startsWith('payment-batch')),
      ).toEqual(['payment-batch2']);

      // A clean batch takes the one-call path and announces what changed in log order.
      batchCalls.length = 0;
      changedSeen.length = 0;
      await append('payment-batch1', ['x2']);
      await append('payment-batch3', ['z1']);
      await projection.caughtUp();
      expect(batchCalls.reduce((a, b) => a + b, 0)).toBe(2);
      expect(changedSeen).toEqual(['payment-batch1@2', 'payment-batch3@1']);
      expect(await batchRows()).toMatchObject({ 'payment-batch1': 'x2@2', 'payment-batch3': 'z1@1' });
    } finally {
      await projection.stop();
    }
  });

  it('parks the stream of an event whose application keeps hitting the statement timeout (SQLSTATE 57014) after transient retries, applies every other stream, and releases it by itself once the timeout passes', async () => {
    if (database.kind === 'pglite') {
      // PGlite (single-threaded WASM) never cancels a running statement: statement_timeout does not fire there.
      console.log('skipped on PGlite: statement_timeout does not fire');
      return;
    }
    // A statement timeout is retried as transient first (a passing overload is not parked), but not for ever: after
    // failures in a row the batch is applied event by event and the event that still times out is parked.
    await dataSource.query(
      'CREATE TABLE timeout_rows (stream_id text PRIMARY KEY, revision integer NOT NULL)',
    );
    const failures: string[] = [];
    let overloaded = true;
    const projection = new ProjectionRunner(
      {
        name: 'test.runner-timeout-projection',
        topics: [TOPIC],
        apply: async (em, message) => {
          if ((message.data as { slow?: boolean }).slow && overloaded) {
            await em.query(`SET LOCAL statement_timeout = '20ms'`);
            await em.query('SELECT pg_sleep(2)');
          }
          await em.query(
            `INSERT INTO timeout_rows (stream_id, revision) VALUES ($1, $2)
             ON CONFLICT (stream_id) DO UPDATE SET revision = EXCLUDED.revision`,
            [message.key, message.revision],
          );
          return true;
        },
      },
      {
        dataSource,
        bus,
        store,
        logger: {
          error: (m) => {
            if (m['msg'] === 'projection batch failed, will retry') failures.push(String(m['error']));
          },
          warn: () => undefined,
          log: () => undefined,
        },
        transientRetryBaseMs: 200,
      },
    );
    await store.appendToStream('payment-slow', [
      { id: 'slow-0', type: 'PaymentNoted', data: { slow: true } },
      { id: 'slow-1', type: 'PaymentNoted', data: {} },
    ]);
    await store.appendToStream('payment-fine', [{ id: 'fine-0', type: 'PaymentNoted', data: {} }]);
    await projection.start();
    try {
      await projection.caughtUp();
      const applied: Array<{ stream_id: string }> = await dataSource.query(
        'SELECT stream_id FROM timeout_rows',
      );
      expect(applied.map((r) => r.stream_id)).toContain('payment-fine');
      expect(applied.map((r) => r.stream_id)).not.toContain('payment-slow');
      const parked = await listParkedStreams(dataSource, 'test.runner-timeout-projection');
      expect(parked).toEqual([
        expect.objectContaining({ streamId: 'payment-slow', revision: 0, waitingRevision: 1 }),
      ]);
      expect(parked[0]?.error).toMatch(/statement timeout/);
      expect(failures.length).toBeGreaterThanOrEqual(9);
      expect(projection.status()).toMatchObject({ stalled: false, parkedStreams: 1 });

      // The overload passes: the stream is retried by itself (no operator), in order, and released.
      overloaded = false;
      for (
        let i = 0;
        i < 300 && (await listParkedStreams(dataSource, 'test.runner-timeout-projection')).length;
        i++
      )
        await new Promise((r) => setTimeout(r, 100));
      expect(await listParkedStreams(dataSource, 'test.runner-timeout-projection')).toEqual([]);
      expect(
        await dataSource.query("SELECT revision FROM timeout_rows WHERE stream_id = 'payment-slow'"),
      ).toEqual([{ revision: 1 }]);
    } finally {
      await projection.stop();
    }
  });

  it('applies a batch the definition gives as one statement by that statement alone (no transaction around it); when it fails, parks only the culprit', async () => {
    await dataSource.query(
      'CREATE TABLE runner_statement_rows (stream_id text PRIMARY KEY, label text NOT NULL, revision integer NOT NULL)',
    );
    const applyRow = applyTo('runner_statement_rows');
    const statements: number[] = [];
    const changedSeen: string[] = [];
    const projection = new ProjectionRunner(
      {
        name: 'test.runner-statement-projection',
        topics: [topicForCategory('checkout')],
        apply: applyRow,
        batchStatement: (messages) => {
          statements.push(messages.length);
          return {
            sql: `INSERT INTO runner_statement_rows (stream_id, label, revision)
                  SELECT * FROM unnest($1::text[], $2::text[], $3::integer[])
                  ON CONFLICT (stream_id) DO UPDATE SET label = EXCLUDED.label, revision = EXCLUDED.revision
                    WHERE runner_statement_rows.revision < EXCLUDED.revision
                  RETURNING stream_id, revision`,
            params: [
              messages.map((m) => m.key),
              messages.map((m) => (m.data as { label: string | null }).label),
              messages.map((m) => m.revision),
            ],
            changed: (rows) => {
              const stored = new Set(
                (rows as Array<{ stream_id: string; revision: number }>).map(
                  (r) => `${r.stream_id}@${r.revision}`,
                ),
              );
              return messages.filter((m) => stored.has(`${m.key}@${m.revision}`));
            },
          };
        },
        onCommitted: (changed) => changedSeen.push(...changed.map((m) => `${m.key}@${m.revision}`)),
      },
      {
        dataSource,
        bus,
        store,
        // The wrapped form (the statement turns off its own commit's flush wait) is the one under test.
        asyncCommit: true,
        logger: { error: () => undefined, warn: () => undefined, log: () => undefined },
      },
    );
    const statementRows = async (): Promise<Record<string, string>> => {
      const result: Array<{ stream_id: string; label: string; revision: number }> = await dataSource.query(
        "SELECT stream_id, label, revision FROM runner_statement_rows WHERE stream_id LIKE 'checkout-one%' ORDER BY stream_id",
      );
      return Object.fromEntries(result.map((r) => [r.stream_id, `${r.label}@${r.revision}`]));
    };
    // What the runner sends through query runners (DataSource.query opens one per statement too).
    const sent: string[] = [];
    const createQueryRunner = dataSource.createQueryRunner.bind(dataSource);
    const spy = jest.spyOn(dataSource, 'createQueryRunner').mockImplementation((mode) => {
      const queryRunner = createQueryRunner(mode);
      const query = queryRunner.query.bind(queryRunner);
      queryRunner.query = ((sql: string, parameters?: unknown[]) => {
        sent.push(sql);
        return query(sql, parameters);
      }) as typeof queryRunner.query;
      return queryRunner;
    });
    await projection.start();
    try {
      await append('checkout-one1', ['p0']);
      await append('checkout-one2', ['q0']);
      await projection.caughtUp();
      expect(await statementRows()).toEqual({ 'checkout-one1': 'p0@0', 'checkout-one2': 'q0@0' });
      expect(changedSeen).toEqual(['checkout-one1@0', 'checkout-one2@0']);
      expect(statements.length).toBeGreaterThan(0);
      // Every batch went as its statement alone: no BEGIN, no COMMIT, one round trip per batch.
      expect(sent.filter((sql) => /\b(BEGIN|COMMIT)\b/.test(sql))).toEqual([]);
      expect(sent.filter((sql) => sql.includes('INSERT INTO runner_statement_rows'))).toHaveLength(
        statements.length,
      );
      // The session of the pool's connections keeps synchronous commits for everyone else.
      const settings: Array<{ synchronous_commit: string }> =
        await dataSource.query('SHOW synchronous_commit');
      expect(settings[0]?.synchronous_commit).toBe('on');

      // A batch whose statement fails (a null label) is applied message by message: the culprit parks.
      changedSeen.length = 0;
      await append('checkout-one3', [null]);
      await append('checkout-one1', ['p1']);
      await projection.caughtUp();
      expect(await statementRows()).toEqual({ 'checkout-one1': 'p1@1', 'checkout-one2': 'q0@0' });
      expect(
        (await listParkedStreams(dataSource, 'test.runner-statement-projection'))
          .map((p) => p.streamId)
          .filter((id) => id.startsWith('checkout-one')),
      ).toEqual(['checkout-one3']);
      expect(changedSeen).toEqual(['checkout-one1@1']);
    } finally {
      spy.mockRestore();
      await projection.stop();
    }
  });
});
