import { Logger } from '@nestjs/common';
import { DataSource, MigrationExecutor, type MigrationInterface, type QueryRunner } from 'typeorm';
import { connectionGuardWanted, installConnectionGuard } from '@stablepay/node-util';

export type MigrationClass = new () => MigrationInterface;

export interface DatabaseOptions {
  readonly url: string;
  /** Every migration of every module hosted by this process; applied in class-name timestamp order. */
  readonly migrations: readonly MigrationClass[];
  readonly poolSize?: number;
  readonly applicationName?: string;
}

/**
 * Opens the read-model database and applies pending migrations. Schema changes happen by migrations only:
 * `synchronize` stays off so a deploy never mutates a table by guessing from entity classes. Every process
 * applies them at start, one process at a time (see runMigrationsAlone).
 */
export async function openDataSource(options: DatabaseOptions): Promise<DataSource> {
  // Tests make a connection asked for inside a transaction fail (it hangs the embedded PGlite): see the guard.
  if (connectionGuardWanted()) installConnectionGuard();
  const migrations = [...new Set(options.migrations)].sort((a, b) => migrationOrder(a) - migrationOrder(b));
  const dataSource = new DataSource({
    type: 'postgres',
    url: options.url,
    synchronize: false,
    migrationsRun: false,
    migrationsTransactionMode: 'each',
    migrations: migrations as MigrationClass[],
    entities: [],
    extra: { max: options.poolSize ?? 10, application_name: options.applicationName ?? 'stablepay' },
    logging: ['error'],
  });
  await dataSource.initialize();
  try {
    await runMigrationsAlone(dataSource);
  } catch (error) {
    await dataSource.destroy();
    throw error;
  }
  return dataSource;
}

/**
 * The session-level advisory lock that serialises migration runs across every process on one database, in the
 * two-key form (pg_locks: classid = 1397768537 ('SPAY'), objid = 1, objsubid = 2) so an operator can find its
 * holder with one query (docs/architecture.md, Read models and HTTP). It is apart from the event store's
 * transaction-scoped single-key locks (`sql-migrations.ts`).
 */
export const MIGRATION_LOCK = { space: 1397768537, id: 1 } as const;
const LOCK_RETRY_MS = 250;
const STILL_WAITING_EVERY_MS = 10_000;
const logger = new Logger('migrations');

/**
 * Replicas started together (two gateways, or any services sharing the platform migrations) each found the same
 * migrations pending and ran them at once: a plain CREATE or ADD COLUMN failed in all but one, crashing that
 * replica's start, and a data backfill ran twice. Now each run holds the lock on ONE connection and applies every
 * pending migration on that same connection; the others wait for the lock and then find nothing pending. A
 * session lock, not a transaction one, because each migration commits on its own ('each'). A holder that dies
 * (SIGKILL, a probe restart, a dropped connection) loses the lock with its session, its unfinished migration
 * rolls back, and the next in line applies it.
 *
 * On PGlite every connection is the same backend session, so the lock is granted to all of them and excludes
 * nothing; that is acceptable there because embedded mode is one process running its migrations once.
 */
async function runMigrationsAlone(dataSource: DataSource): Promise<void> {
  const runner = dataSource.createQueryRunner();
  try {
    await setKeepalives(runner, 'set');
    await takeMigrationLock(runner);
    const executor = new MigrationExecutor(dataSource, runner);
    executor.transaction = 'each';
    try {
      await executor.executePendingMigrations();
    } catch (error) {
      // The caller closes the pool, and with it this session and its lock, even if this unlock cannot run.
      await releaseMigrationLock(runner).catch(() => undefined);
      throw error;
    }
    await releaseMigrationLock(runner);
    await setKeepalives(runner, 'reset');
  } finally {
    await runner.release();
  }
}

/**
 * A holder whose host died without closing its connection (a node lost, a network cut) keeps the lock until the
 * server notices the dead peer: with the operating system's keepalive defaults about two hours, every replica's
 * start waiting behind it. The migration session asks the server to probe its peer after 30 s idle, every 10 s,
 * three times: a dead holder's lock goes within about a minute. Ignored where the session is no TCP connection
 * (a Unix socket, PGlite); '0' afterwards gives the pooled session the system default back.
 */
export const MIGRATION_SESSION_KEEPALIVES = {
  tcp_keepalives_idle: 30,
  tcp_keepalives_interval: 10,
  tcp_keepalives_count: 3,
};
const KEEPALIVES = Object.entries(MIGRATION_SESSION_KEEPALIVES);

/** Set, or reset to the system default ('0'); never fails the start (the migrations have run or will run anyway). */
async function setKeepalives(runner: QueryRunner, to: 'set' | 'reset'): Promise<void> {
  try {
    await runner.query(
      `SELECT ${KEEPALIVES.map(([name, value]) => `set_config('${name}', '${to === 'set' ? value : 0}', false)`).join(', ')}`,
    );
  } catch (error) {
    logger.warn(
      `migration session keepalives not ${to}: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
}

/**
 * Tried every LOCK_RETRY_MS, not awaited inside pg_advisory_lock: a waiter blocked in that statement holds a snapshot,
 * and a CREATE INDEX CONCURRENTLY run by the holder (createIndexConcurrently) waits for every older snapshot to go
 * (a deadlock). Between tries the waiter's session is idle.
 */
async function takeMigrationLock(runner: QueryRunner): Promise<void> {
  if (await tryMigrationLock(runner)) return;
  // Say who is migrating, so a replica slow to become ready is explained in its own log.
  logger.log(`waiting for the migration lock, held by ${await migrationLockHolder(runner)}`);
  const since = Date.now();
  let remindAt = since + STILL_WAITING_EVERY_MS;
  while (!(await tryMigrationLock(runner))) {
    if (Date.now() >= remindAt) {
      remindAt += STILL_WAITING_EVERY_MS;
      logger.warn(
        `still waiting for the migration lock after ${seconds(since)} s, held by ${await migrationLockHolder(runner)}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, LOCK_RETRY_MS));
  }
  logger.log(`took the migration lock after ${seconds(since)} s`);
}

async function tryMigrationLock(runner: QueryRunner): Promise<boolean> {
  const rows: Array<{ taken: boolean }> = await runner.query('SELECT pg_try_advisory_lock($1, $2) AS taken', [
    MIGRATION_LOCK.space,
    MIGRATION_LOCK.id,
  ]);
  return rows[0]?.taken === true;
}

const seconds = (since: number): number => Math.round((Date.now() - since) / 1000);

async function migrationLockHolder(runner: QueryRunner): Promise<string> {
  const rows: Array<{ pid: number; application_name: string; client_addr: string | null; query: string }> =
    await runner.query(
      `SELECT a.pid, a.application_name, host(a.client_addr) AS client_addr, left(a.query, 200) AS query
         FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
        WHERE l.locktype = 'advisory' AND l.granted AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
          AND l.classid = $1 AND l.objid = $2 AND l.objsubid = 2`,
      [MIGRATION_LOCK.space, MIGRATION_LOCK.id],
    );
  const row = rows[0];
  if (!row) return 'a session that has just let it go';
  const where = row.client_addr ? ` at ${row.client_addr}` : '';
  return `pid ${row.pid} (${row.application_name || 'no application_name'}${where}), running: ${row.query.replace(/\s+/g, ' ').trim()}`;
}

/** Migration classes are named `<Name><13-digit timestamp>` (TypeORM's convention); order by that timestamp. */
function migrationOrder(m: MigrationClass): number {
  const match = /(\d{13})$/.exec(m.name);
  if (!match?.[1]) throw new Error(`migration class ${m.name} must end with a 13-digit timestamp`);
  return Number(match[1]);
}

async function releaseMigrationLock(runner: QueryRunner): Promise<void> {
  await runner.query('SELECT pg_advisory_unlock($1, $2)', [MIGRATION_LOCK.space, MIGRATION_LOCK.id]);
}
