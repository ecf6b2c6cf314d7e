import type { DataSource, EntityManager } from 'typeorm';
import type { FastifyReply } from 'fastify';
import { openDataSource } from '@stablepay/database';
import { createPostgresEventStore, type PostgresEventStore } from '@stablepay/event-store';
import {
  type BusMessage,
  listParkedStreams,
  PARKED_STREAMS_MIGRATIONS,
  ProjectionRunner,
  recordingBus,
} from '@stablepay/event-bus';
import type { Projections } from '@stablepay/aggregate';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { AdminController } from './admin.controller';
import type { MerchantsUseCases } from './merchants.port';

describe('POST /admin/projections/:projection/parked-streams/:streamId/retry', () => {
  let database: TestDatabase;
  let dataSource: DataSource;
  let store: PostgresEventStore;
  const name = 'test.admin-retry-projection';

  beforeAll(async () => {
    database = await createTestDatabase();
    dataSource = await openDataSource({
      url: database.url,
      migrations: [...PARKED_STREAMS_MIGRATIONS],
    });
    await dataSource.query('CREATE TABLE admin_rows (stream_id text PRIMARY KEY, revision integer NOT NULL)');
    store = await createPostgresEventStore({ url: database.url, poolSize: 2 });
  });

  afterAll(async () => {
    await store?.close();
    await dataSource?.destroy();
    await database?.drop();
  });

  it("answers 202 `requested` and keeps the request on the row when the retry run in this process throws (the event store away), and the projection's retry poll then serves it", async () => {
    await store.appendToStream('payment-ad', [{ id: 'payment-ad:0', type: 'PaymentNoted', data: {} }]);
    await dataSource.query(
      `INSERT INTO parked_streams (projection, stream_id, event_id, revision, event_type, error)
       VALUES ($1, 'payment-ad', 'payment-ad:0', 0, 'PaymentNoted', 'Error: refused')`,
      [name],
    );
    let storeAway = true;
    const runner = new ProjectionRunner(
      {
        name,
        topics: ['payments.payment.v1'],
        apply: async (em: EntityManager, message: BusMessage) => {
          await em.query('INSERT INTO admin_rows (stream_id, revision) VALUES ($1, $2)', [
            message.key,
            message.revision,
          ]);
          return true;
        },
      },
      {
        dataSource,
        bus: recordingBus().bus,
        store: {
          readStream: (stream, options) => {
            if (storeAway) throw new Error('event store unreachable');
            return store.readStream(stream, options);
          },
        },
        logger: { error: () => undefined, warn: () => undefined, log: () => undefined },
      },
    );
    const projections = { registry: { get: (p: string) => (p === name ? runner : undefined) } };
    const controller = new AdminController(
      {} as MerchantsUseCases,
      dataSource,
      projections as unknown as Projections,
      recordingBus().bus,
    );
    let status: number | undefined;
    const reply = {
      status: (code: number) => {
        status = code;
        return reply;
      },
    } as unknown as FastifyReply;
    try {
      const answer = await controller.retryParkedStream(name, 'payment-ad', reply);
      expect(status).toBe(202);
      expect(answer).toMatchObject({ status: 'requested', parked_stream: { stream_id: 'payment-ad' } });
      expect(answer.parked_stream?.retry_requested_at).not.toBeNull();

      // The store is back: the runner's retry poll serves the request.
      storeAway = false;
      await runner.requestRetries();
      expect(await listParkedStreams(dataSource, name)).toEqual([]);
      expect(await dataSource.query('SELECT stream_id, revision FROM admin_rows')).toEqual([
        { stream_id: 'payment-ad', revision: 0 },
      ]);
    } finally {
      await runner.stop();
    }
  });
});
