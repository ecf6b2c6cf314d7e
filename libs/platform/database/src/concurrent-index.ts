import type { QueryRunner } from 'typeorm';

/** Between two tries of another runner's build lock (a build takes seconds to minutes on a large table). */
const LOCK_RETRY_MS = 200;

/**
 * Builds an index on a table in use without stopping its writes: `CREATE INDEX CONCURRENTLY` takes SHARE UPDATE
 * EXCLUSIVE, where a plain CREATE INDEX holds SHARE (every INSERT, UPDATE and DELETE of the table waits) for the whole
 * build. It cannot run in a transaction, so the migration calling it sets `transaction = false` (the runner's
 * `migrationsTransactionMode: 'each'` honours it); its other statements must then be safe to run again on their own.
 *
 * Every service runs the pending migrations at its start, one process at a time under the migration lock
 * (data-source.ts), and a build stopped half way (its pod killed) leaves an INVALID index that `IF NOT EXISTS` would
 * then keep for ever, unused by the planner. The session advisory lock per index came before the migration lock and
 * still covers a runner that does not take that one (a version before it, during a rollout): a second runner waits
 * for the first build instead of skipping past it and recording the migration while the index is not usable yet; it
 * then finds the index valid.
 * An invalid index found under the lock is one whose build died: it is dropped (CONCURRENTLY) and built again.
 *
 * `definition`: what follows the index name (`ON table (columns) [WHERE ...]`), written by the migration, never input.
 */
export async function createIndexConcurrently(
  q: QueryRunner,
  name: string,
  definition: string,
): Promise<void> {
  if (q.isTransactionActive) {
    throw new Error(
      `index ${name}: CREATE INDEX CONCURRENTLY cannot run in a transaction; set transaction = false on the migration`,
    );
  }
  const lock = `stablepay:create-index:${name}`;
  // Tried, not awaited in pg_advisory_lock: a build waits for every transaction older than its snapshot, and a
  // runner blocked in that statement would be one, waiting for the lock the build's runner holds (a deadlock).
  while (!(await tryLock(q, lock))) await new Promise((resolve) => setTimeout(resolve, LOCK_RETRY_MS));
  try {
    const found = (await q.query(
      `SELECT i.indisvalid AS valid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
        WHERE c.relname = $1 AND c.relnamespace = current_schema()::regnamespace`,
      [name],
    )) as Array<{ valid: boolean }>;
    if (found[0]?.valid) return;
    if (found[0]) await q.query(`DROP INDEX CONCURRENTLY IF EXISTS ${name}`);
    await q.query(`CREATE INDEX CONCURRENTLY IF NOT EXISTS ${name} ${definition}`);
  } finally {
    await q.query('SELECT pg_advisory_unlock(hashtext($1))', [lock]);
  }
}

async function tryLock(q: QueryRunner, lock: string): Promise<boolean> {
  const [row] = (await q.query('SELECT pg_try_advisory_lock(hashtext($1)) AS locked', [lock])) as Array<{
    locked: boolean;
  }>;
  return row?.locked === true;
}
