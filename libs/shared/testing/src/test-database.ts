import { Client, Pool, type PoolConfig } from 'pg';
import { randomBytes } from 'node:crypto';
import { startPgliteServer } from '@stablepay/node-util';

export interface TestDatabase {
  /** Connection URL of a database that belongs to this test file alone. */
  readonly url: string;
  /** 'postgres' when DATABASE_URL pointed at a real server, 'pglite' otherwise. */
  readonly kind: 'postgres' | 'pglite';
  drop(): Promise<void>;
}

/**
 * A fresh, empty database for one test file. With DATABASE_URL set (CI: the machine's PostgreSQL) it creates
 * a uniquely named database on that server and drops it afterwards; without it, it starts a private PGlite
 * server. Either way tests never see each other's rows, so test files can run in parallel.
 */
export async function createTestDatabase(): Promise<TestDatabase> {
  const base = process.env['DATABASE_URL'];
  if (!base) {
    const server = await startPgliteServer();
    return { url: server.url, kind: 'pglite', drop: () => server.stop() };
  }
  const name = `sp_test_${Date.now().toString(36)}_${randomBytes(4).toString('hex')}`;
  const admin = new Client({ connectionString: base });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(base);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    kind: 'postgres',
    drop: async () => {
      const c = new Client({ connectionString: base });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}

/**
 * A pg Pool for a test. The database is dropped WITH (FORCE) at teardown, and a connection the server ends while
 * the pool is still shutting down surfaces as an 'error' event on the pool; without a listener that event is an
 * unhandled error that fails whichever test Jest happens to be running. Query errors still reject as usual: only
 * idle connections report through this event.
 */
export function testPool(config: PoolConfig): Pool {
  const pool = new Pool(config);
  pool.on('error', () => undefined);
  return pool;
}

/** Runs `run` on a connection of its own to `url`, closed afterwards (a second session beside a test's pool). */
export async function withClient<T>(url: string, run: (sql: Client) => Promise<T>): Promise<T> {
  const sql = new Client({ connectionString: url });
  await sql.connect();
  try {
    return await run(sql);
  } finally {
    await sql.end();
  }
}
