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
import { DomainError } from '@stablepay/util';
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

  /** The controller with `runner` serving `name` in this process (none: the projection runs elsewhere). */
  const controllerWith = (runner?: ProjectionRunner): AdminController => {
    const projections = { registry: { get: (p: string) => (p === name ? runner : undefined) } };
    return new AdminController(
      {} as MerchantsUseCases,
      dataSource,
      projections as unknown as Projections,
      recordingBus().bus,
    );
  };
  /** A reply that keeps the status the route sets. */
  const replyRecording = (): { readonly reply: FastifyReply; status: () => number | undefined } => {
    let status: number | undefined;
    const reply = {
      status: (code: number) => {
        status = code;
        return reply;
      },
    } as unknown as FastifyReply;
    return { reply, status: () => status };
  };
  const parkedAt0 = async (stream: string): Promise<void> => {
    await store.appendToStream(stream, [{ id: `${stream}:0`, type: 'PaymentNoted', data: {} }]);
    await dataSource.query(
      `INSERT INTO parked_streams (projection, stream_id, event_id, revision, event_type, error)
       VALUES ($1, $2, $3, 0, 'PaymentNoted', 'Error: refused')`,
      [name, stream, `${stream}:0`],
    );
  };
  /** What the route threw, as the error envelope gets it (a DomainError's fields, or another error's text). */
  const refusal = (answer: Promise<unknown>): Promise<unknown> =>
    answer.then(
      () => 'answered',
      (error: unknown) => (error instanceof DomainError ? error.toJSON() : String(error)),
    );

  it('answers 202 `requested` while the row exists (again to a repeated request), and 404 `not_parked` (no param) when the projection has no parked row for the stream', async () => {
    await parkedAt0('payment-rq');
    const controller = controllerWith();
    try {
      for (const attempt of [1, 2]) {
        const { reply, status } = replyRecording();
        const answer = await controller.retryParkedStream(name, 'payment-rq', reply);
        expect({ attempt, status: status() }).toEqual({ attempt, status: 202 });
        expect(answer).toMatchObject({ status: 'requested', parked_stream: { stream_id: 'payment-rq' } });
        expect(answer.parked_stream?.retry_requested_at).not.toBeNull();
      }
      expect(
        await refusal(controller.retryParkedStream(name, 'payment-never-parked', replyRecording().reply)),
      ).toEqual({
        status: 404,
        type: 'invalid_request',
        code: 'not_parked',
        message: `No stream payment-never-parked is parked by projection or consumer group ${name}.`,
      });
    } finally {
      await dataSource.query('DELETE FROM parked_streams WHERE projection = $1', [name]);
    }
  });

  it("answers 202 `requested` and keeps the request on the row when the retry run in this process throws (the event store away), and the projection's retry poll then serves it", async () => {
    await parkedAt0('payment-ad');
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
    const { reply, status } = replyRecording();
    try {
      const answer = await controllerWith(runner).retryParkedStream(name, 'payment-ad', reply);
      expect(status()).toBe(202);
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
