import { Pool } from 'pg';
import { DataSource } from 'typeorm';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import {
  connectionGuardWanted,
  insideTransaction,
  installConnectionGuard,
  SecondConnectionInTransactionError,
} from '@stablepay/node-util';

/**
 * The nesting that hangs the embedded PGlite (a transaction awaiting a query on another pooled connection) fails
 * at once with the guard installed, on PostgreSQL as on PGlite, while every other use of the pools is untouched.
 */
describe('connection guard', () => {
  let db: TestDatabase;
  let dataSource: DataSource;
  let pool: Pool;

  beforeAll(async () => {
    installConnectionGuard();
    db = await createTestDatabase();
    dataSource = new DataSource({ type: 'postgres', url: db.url, extra: { max: 4 } });
    await dataSource.initialize();
    pool = new Pool({ connectionString: db.url, max: 4 });
    await dataSource.query('CREATE TABLE guarded (id int PRIMARY KEY)');
  });
  afterAll(async () => {
    await pool?.end();
    await dataSource?.destroy();
    await db?.drop();
  });

  const quietly = async <T>(work: () => Promise<T>): Promise<T> => {
    const warn = jest.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
    try {
      return await work();
    } finally {
      warn.mockRestore();
    }
  };

  it('refuses another connection inside a TypeORM transaction (TypeORM or pg pool), and rolls the work back', async () => {
    const nested = dataSource.transaction(async (em) => {
      await em.query('INSERT INTO guarded VALUES (1)');
      await dataSource.query('SELECT 1');
    });
    await expect(quietly(() => nested)).rejects.toBeInstanceOf(SecondConnectionInTransactionError);
    await expect(quietly(() => dataSource.transaction(async () => pool.query('SELECT 1')))).rejects.toThrow(
      /requested while this code holds a transaction/,
    );
    expect(await dataSource.query('SELECT count(*)::int AS n FROM guarded')).toEqual([{ n: 0 }]);
  });

  it('names where the connection was asked for and where the transaction was opened, and warns on stderr', async () => {
    const warn = jest.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
    try {
      const error: unknown = await dataSource
        .transaction(() => pool.query('SELECT 1'))
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(SecondConnectionInTransactionError);
      expect((error as SecondConnectionInTransactionError).transactionOpenedAt).toContain('EntityManager');
      expect((error as SecondConnectionInTransactionError).requestedAt).toContain(
        'connection-guard.int.spec',
      );
      expect(warn).toHaveBeenCalledWith(expect.stringContaining('Requested at'), {
        code: 'STABLEPAY_SECOND_CONNECTION_IN_TRANSACTION',
      });
    } finally {
      warn.mockRestore();
    }
  });

  it('refuses it inside a transaction held on a checked-out pg client (insideTransaction)', async () => {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const nested = insideTransaction(async () => {
        await client.query('INSERT INTO guarded VALUES (2)');
        await pool.query('SELECT 1');
      });
      await expect(quietly(() => nested)).rejects.toBeInstanceOf(SecondConnectionInTransactionError);
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
  });

  it("leaves the transaction's own queries, nested savepoints, work before and after it, and concurrent callers alone", async () => {
    let later: Promise<unknown> = Promise.resolve();
    await Promise.all([
      dataSource.transaction(async (em) => {
        await em.query('INSERT INTO guarded VALUES (3)');
        await em.transaction(async (inner) => inner.query('INSERT INTO guarded VALUES (4)'));
        // Started inside, run after the commit: the transaction no longer holds anything.
        later = new Promise((resolve) => setImmediate(resolve)).then(() => pool.query('SELECT 1'));
      }),
      // Another flow of the process, not inside the transaction: free to use the pools meanwhile.
      pool.query('SELECT 1'),
      dataSource.query('SELECT 1'),
    ]);
    await expect(later).resolves.toBeDefined();
    expect(await pool.query('SELECT id FROM guarded ORDER BY id')).toMatchObject({
      rows: [{ id: 3 }, { id: 4 }],
    });
  });

  it('is wanted in tests, on PGlite and when asked for, and can be turned off', () => {
    expect(connectionGuardWanted({ NODE_ENV: 'test' })).toBe(true);
    expect(connectionGuardWanted({ STABLEPAY_CONNECTION_GUARD: 'on' })).toBe(true);
    expect(connectionGuardWanted({ NODE_ENV: 'test', STABLEPAY_CONNECTION_GUARD: 'off' })).toBe(false);
    expect(connectionGuardWanted({ NODE_ENV: 'production' })).toBe(false);
    expect(connectionGuardWanted({ NODE_ENV: 'production' }, true)).toBe(true);
    expect(connectionGuardWanted({ STABLEPAY_CONNECTION_GUARD: 'off' }, true)).toBe(false);
  });
});
