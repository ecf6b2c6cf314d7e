import type { Pool } from 'pg';
import { DataSource } from 'typeorm';
import { createTestDatabase, type TestDatabase, testPool } from '@stablepay/testing';
import type { BusMessage } from '../event-bus.port';
import {
  CreateProcessedMessages1767225600000,
  idempotentEntityManagerHandler,
  idempotentHandler,
  migrateProcessedMessages,
} from './idempotent-handler';

const message = (id: string): BusMessage => ({
  id,
  topic: 'ledger.charge.v1',
  key: 'charge-1',
  type: 'ChargeRecorded',
  data: { id },
  metadata: {},
  revision: 0,
  recordedAt: '2026-01-01T00:00:00.000Z',
});

describe('idempotent handlers', () => {
  let database: TestDatabase;
  let pool: Pool;

  beforeAll(async () => {
    database = await createTestDatabase();
    pool = testPool({ connectionString: database.url, max: 3 });
    await migrateProcessedMessages(pool);
    await pool.query('CREATE TABLE effects (consumer text NOT NULL, message_id text NOT NULL)');
  });

  afterAll(async () => {
    await pool?.end();
    await database?.drop();
  });

  const effects = async (consumer: string): Promise<string[]> =>
    (
      await pool.query<{ message_id: string }>(
        'SELECT message_id FROM effects WHERE consumer = $1 ORDER BY 1',
        [consumer],
      )
    ).rows.map((r) => r.message_id);

  describe('with a pg client', () => {
    const recordEffect = (consumer: string) =>
      idempotentHandler(pool, consumer, async (client, m) => {
        await client.query('INSERT INTO effects (consumer, message_id) VALUES ($1, $2)', [consumer, m.id]);
      });

    it('applies a message once and skips its redelivery', async () => {
      const handle = recordEffect('pg-once');
      expect(await handle(message('m1'))).toBe('applied');
      expect(await handle(message('m1'))).toBe('skipped');
      expect(await effects('pg-once')).toEqual(['m1']);
    });

    it('applies a message once when two deliveries of it run at the same time', async () => {
      const handle = recordEffect('pg-race');
      const outcomes = await Promise.all([handle(message('m2')), handle(message('m2'))]);
      expect(outcomes.sort()).toEqual(['applied', 'skipped']);
      expect(await effects('pg-race')).toEqual(['m2']);
    });

    it('keeps groups apart: the same message is applied once per consumer group', async () => {
      expect(await recordEffect('pg-group-a')(message('m3'))).toBe('applied');
      expect(await recordEffect('pg-group-b')(message('m3'))).toBe('applied');
    });

    it('leaves neither effect nor mark when the effect fails, so a redelivery applies it', async () => {
      let fail = true;
      const handle = idempotentHandler(pool, 'pg-fail', async (client, m) => {
        await client.query('INSERT INTO effects (consumer, message_id) VALUES ($1, $2)', ['pg-fail', m.id]);
        if (fail) throw new Error('half-way failure');
      });
      await expect(handle(message('m4'))).rejects.toThrow('half-way failure');
      expect(await effects('pg-fail')).toEqual([]);
      fail = false;
      expect(await handle(message('m4'))).toBe('applied');
      expect(await effects('pg-fail')).toEqual(['m4']);
    });
  });

  describe('with a TypeORM EntityManager', () => {
    let dataSource: DataSource;

    beforeAll(async () => {
      dataSource = new DataSource({
        type: 'postgres',
        url: database.url,
        migrations: [CreateProcessedMessages1767225600000],
        migrationsTableName: 'typeorm_migrations',
        extra: { max: 2 },
      });
      await dataSource.initialize();
      // The TypeORM migration coexists with migrateProcessedMessages on one database.
      await dataSource.runMigrations({ transaction: 'each' });
    });

    afterAll(async () => {
      await dataSource?.destroy();
    });

    it('applies the effect and the mark in one transaction and skips the redelivery', async () => {
      const handle = idempotentEntityManagerHandler(dataSource, 'orm-once', async (manager, m) => {
        await manager.query('INSERT INTO effects (consumer, message_id) VALUES ($1, $2)', ['orm-once', m.id]);
      });
      expect(await handle(message('t1'))).toBe('applied');
      expect(await handle(message('t1'))).toBe('skipped');
      expect(await effects('orm-once')).toEqual(['t1']);
    });

    it('rolls the mark back with a failed effect', async () => {
      let fail = true;
      const handle = idempotentEntityManagerHandler(dataSource, 'orm-fail', async (manager, m) => {
        await manager.query('INSERT INTO effects (consumer, message_id) VALUES ($1, $2)', ['orm-fail', m.id]);
        if (fail) throw new Error('projection bug');
      });
      await expect(handle(message('t2'))).rejects.toThrow('projection bug');
      fail = false;
      expect(await handle(message('t2'))).toBe('applied');
      expect(await effects('orm-fail')).toEqual(['t2']);
    });
  });
});
