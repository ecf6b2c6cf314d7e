import { AsyncLocalStorage } from 'node:async_hooks';
import { Pool } from 'pg';
import { EntityManager } from 'typeorm';

/**
 * Raised when code running inside a database transaction asks a pool for another connection. On PostgreSQL that
 * only costs a connection; on the embedded PGlite (one backend serving every connection in turn, and a connection
 * inside a transaction owns it until it ends) the second connection waits for the transaction and the transaction
 * waits for it: the process hangs without an error. The guard turns that hang into this error, with both places.
 */
export class SecondConnectionInTransactionError extends Error {
  constructor(
    readonly transactionOpenedAt: string,
    readonly requestedAt: string,
  ) {
    super(
      'a database connection was requested while this code holds a transaction on another one (on the embedded ' +
        'PGlite it would wait for that transaction forever): do the read before the transaction opens, or run it ' +
        `on the transaction's own connection. Requested at:\n${requestedAt}\nThe transaction was opened at:\n` +
        transactionOpenedAt,
    );
    this.name = 'SecondConnectionInTransactionError';
  }
}

interface TransactionScope {
  open: boolean;
  readonly openedAt: () => string;
}

const scope = new AsyncLocalStorage<TransactionScope>();
const INSTALLED = Symbol.for('stablepay.connectionGuard');
/**
 * Whether this module's guard reads `scope`. Until then `insideTransaction` does not enter it: the first `run` of
 * an AsyncLocalStorage turns on Node 20's async hooks for the rest of the process, a hook on every promise made
 * from then on, which a process without the guard (PostgreSQL outside tests) would pay for nothing.
 */
let guarding = false;

/**
 * Runs `work` as the body of a transaction the caller holds on one connection (the caller's own BEGIN on a
 * checked-out client). Any pool connection requested from inside it, while it runs, fails when the guard is
 * installed (without it, `work` just runs). TypeORM's `transaction()` callbacks are scoped by the guard itself.
 */
export function insideTransaction<T>(work: () => Promise<T>): Promise<T> {
  if (!guarding) return work();
  const capture: { stack?: string } = {};
  Error.captureStackTrace(capture, insideTransaction);
  const current: TransactionScope = { open: true, openedAt: () => framesOf(capture.stack) };
  return scope.run(current, async () => {
    try {
      return await work();
    } finally {
      // What the body started and left running (a timer, a loop) keeps this scope; it is free once we are done.
      current.open = false;
    }
  });
}

function stackBelow(fn: (...args: never[]) => unknown): string {
  const here: { stack?: string } = {};
  Error.captureStackTrace(here, fn);
  return framesOf(here.stack);
}

/** The frames of a captured stack (its first line is the error's name). */
const framesOf = (stack: string | undefined): string => stack?.split('\n').slice(1).join('\n') ?? '';

/**
 * True when the guard should run: `STABLEPAY_CONNECTION_GUARD=on|off` decides; unset, it runs in tests
 * (`NODE_ENV=test`) and where `onByDefault` (the server is PGlite, where the nesting hangs).
 */
export function connectionGuardWanted(
  env: Record<string, string | undefined> = process.env,
  onByDefault = false,
): boolean {
  const setting = env['STABLEPAY_CONNECTION_GUARD'];
  if (setting === 'on' || setting === 'off') return setting === 'on';
  return onByDefault || env['NODE_ENV'] === 'test';
}

/**
 * Makes every pg pool refuse a connection asked for inside a transaction (TypeORM `transaction()` callbacks and
 * `insideTransaction` bodies), so the nesting that deadlocks the embedded PGlite fails loudly everywhere, on
 * PostgreSQL in CI too. Idempotent; patches the loaded `pg` and `typeorm` modules of this module registry.
 */
export function installConnectionGuard(): void {
  const pool = Pool.prototype as unknown as Record<symbol, boolean> & {
    connect: (this: Pool, callback?: (error: Error | undefined, ...rest: unknown[]) => void) => unknown;
  };
  if (pool[INSTALLED]) return;
  pool[INSTALLED] = true;
  guarding = true;
  const connect = pool.connect;
  pool.connect = function guardedConnect(this: Pool, callback) {
    const held = scope.getStore();
    if (held?.open) {
      const error = new SecondConnectionInTransactionError(held.openedAt(), stackBelow(guardedConnect));
      // Also said on stderr: a caller that swallows or parks the error must not hide the bug from a test run.
      process.emitWarning(error.message, { code: 'STABLEPAY_SECOND_CONNECTION_IN_TRANSACTION' });
      if (callback) {
        process.nextTick(() => callback(error));
        return undefined;
      }
      return Promise.reject(error);
    }
    return connect.call(this, callback);
  };

  const manager = EntityManager.prototype as unknown as {
    transaction: (this: EntityManager, ...args: unknown[]) => Promise<unknown>;
  };
  const transaction = manager.transaction;
  manager.transaction = function guardedTransaction(this: EntityManager, ...args: unknown[]) {
    const at = args.findIndex((a) => typeof a === 'function');
    const body = args[at] as ((em: EntityManager) => Promise<unknown>) | undefined;
    if (body) args[at] = (em: EntityManager) => insideTransaction(() => body(em));
    return transaction.apply(this, args);
  };
}
