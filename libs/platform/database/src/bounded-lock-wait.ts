import { Logger } from '@nestjs/common';
import type { QueryRunner } from 'typeorm';

/**
 * How long one try of a migration's DDL waits for its table lock before it gives way (SQLSTATE 55P03).
 * An `ALTER TABLE` asks for ACCESS EXCLUSIVE: queued behind a long transaction on the table (a report, an idle
 * session in a transaction), it holds up every later reader and writer of that table behind itself, so a migration
 * at a deploy stopped the service it migrates for as long as that transaction ran. Bounded, readers queued behind a
 * try wait at most this long, then go through while the migration pauses and tries again.
 */
export const MIGRATION_LOCK_TIMEOUT_MS = 2_000;
/** Between two tries: what queued behind the last one runs meanwhile. */
const RETRY_PAUSE_MS = 500;
const WARN_EVERY_TRIES = 10;
const LOCK_NOT_AVAILABLE = '55P03';
const SAVEPOINT = 'stablepay_bounded_lock_wait';
const logger = new Logger('migrations');

export interface BoundedLockWaitOptions {
  /** Per try; MIGRATION_LOCK_TIMEOUT_MS unless told. */
  readonly lockTimeoutMs?: number;
}

/**
 * Runs one statement that takes a strong table lock (ALTER TABLE, DROP/CREATE without CONCURRENTLY) with its lock
 * wait bounded, trying again until it gets the lock. Inside the migration's transaction a try that times out is
 * rolled back to a savepoint (the transaction stays usable, the statements before it stay applied); outside one
 * (`transaction = false`) the session's setting is set for the statement and put back after. The statement must be
 * safe to try again (it either ran whole or not at all, as any single DDL statement).
 */
export async function queryWithBoundedLockWait(
  q: QueryRunner,
  statement: string,
  options: BoundedLockWaitOptions = {},
): Promise<void> {
  const timeout = `${options.lockTimeoutMs ?? MIGRATION_LOCK_TIMEOUT_MS}ms`;
  for (let tries = 1; ; tries++) {
    if (await tryOnce(q, statement, timeout)) return;
    if (tries % WARN_EVERY_TRIES === 0)
      logger.warn(
        `${statement.replace(/\s+/g, ' ').trim().slice(0, 120)}: no lock after ${tries} tries of ${timeout}; a long transaction holds the table, trying again`,
      );
    await new Promise((resolve) => setTimeout(resolve, RETRY_PAUSE_MS));
  }
}

async function tryOnce(q: QueryRunner, statement: string, timeout: string): Promise<boolean> {
  const [before] = (await q.query(`SELECT current_setting('lock_timeout') AS value`)) as Array<{
    value: string;
  }>;
  const restore = before?.value ?? '0';
  if (q.isTransactionActive) {
    await q.query(`SAVEPOINT ${SAVEPOINT}`);
    // Local to the transaction, and undone with the savepoint when the try gives way.
    await q.query(`SELECT set_config('lock_timeout', $1, true)`, [timeout]);
    try {
      await q.query(statement);
    } catch (error) {
      if (!lockNotAvailable(error)) throw error;
      await q.query(`ROLLBACK TO SAVEPOINT ${SAVEPOINT}`);
      await q.query(`RELEASE SAVEPOINT ${SAVEPOINT}`);
      return false;
    }
    await q.query(`RELEASE SAVEPOINT ${SAVEPOINT}`);
    // The rest of the migration waits as it did (its own statements may be long).
    await q.query(`SELECT set_config('lock_timeout', $1, true)`, [restore]);
    return true;
  }
  await q.query(`SELECT set_config('lock_timeout', $1, false)`, [timeout]);
  try {
    await q.query(statement);
    return true;
  } catch (error) {
    if (!lockNotAvailable(error)) throw error;
    return false;
  } finally {
    await q.query(`SELECT set_config('lock_timeout', $1, false)`, [restore]);
  }
}

function lockNotAvailable(error: unknown): boolean {
  const e = error as { code?: unknown; driverError?: { code?: unknown } } | null;
  return e?.code === LOCK_NOT_AVAILABLE || e?.driverError?.code === LOCK_NOT_AVAILABLE;
}
