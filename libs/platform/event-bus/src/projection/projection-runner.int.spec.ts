import type { DataSource, EntityManager } from 'typeorm';
import { register } from 'prom-client';
import { openDataSource } from '@stablepay/database';
import { createPostgresEventStore, type PostgresEventStore } from '@stablepay/event-store';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import type { BusMessage } from '../event-bus.port';
import { StoreLogEventBus } from '../store-log/store-log-event-bus';
import {
  CreateParkedStreams1767312000000,
  listParkedStreams,
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
    dataSource = await openDataSource({ url: database.url, migrations: [CreateParkedStreams1767312000000] });
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
});
