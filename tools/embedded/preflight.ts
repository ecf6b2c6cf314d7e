import { readFileSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { Client } from 'pg';
import { ConfigError } from '@stablepay/util';

/**
 * What the embedded run checks before it starts anything (no PGlite, no chain, no file in the data directory): a
 * problem of the environment is reported at once with a clear message, not after the chains came up.
 */

const LOCK_FILE = 'stablepay.lock';

/** The pid of a live process holding the data directory's lock, or null (no lock, or one left by a dead process). */
function liveLockOwner(dataDir: string): { pid: number | null; file: string } {
  const file = join(dataDir, LOCK_FILE);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { pid: null, file };
    throw error;
  }
  const pid = Number(text.split('\n')[0]?.trim());
  // A lock file cut short (the machine died while it was written) holds no pid: nobody can be running on it.
  if (!Number.isSafeInteger(pid) || pid <= 0) return { pid: null, file };
  return { pid: isAlive(pid) ? pid : null, file };
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: a live process of another user.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function refusal(dataDir: string, file: string, pid: number): ConfigError {
  return new ConfigError(
    `the data directory ${dataDir} is in use by another Stablepay (pid ${pid}); two runs on the same files would ` +
      `corrupt them. Stop it, or set STABLEPAY_DATA_DIR to another directory (if no Stablepay runs as pid ${pid}, ` +
      `delete ${file})`,
  );
}

/** Refuses, touching nothing, when a live process holds the data directory. */
export function refuseIfDataDirInUse(dataDir: string): void {
  const { pid, file } = liveLockOwner(dataDir);
  if (pid !== null) throw refusal(dataDir, file, pid);
}

export interface DataDirLock {
  /** The pid of the dead process whose lock was taken over (after kill -9 or a crash), if any. */
  readonly tookOverFrom: number | null;
  /**
   * Records the processes this run leaves behind for a moment if it dies (the local chains' watchdogs: their nodes
   * write their state on the way out), so a run taking the lock over waits for them.
   */
  addHelpers(pids: readonly number[]): void;
  /** Removes the lock if it is still ours. Idempotent. */
  release(): void;
}

/** The points of a takeover a test can hold a start at (its interleavings with other starts are the subject). */
export type TakeoverStep = 'judged-stale-guard' | 'removing-stale-lock';

export interface LockDataDirOptions {
  /** How long a dead run's helpers are waited for. Default 30 s. */
  readonly helperWaitMs?: number;
  /** The process this start acts as. Default: this process (a test gives each of its starts a process of its own). */
  readonly pid?: number;
  /** Awaited at each step of a takeover. Default: none. */
  readonly onStep?: (step: TakeoverStep) => Promise<void> | void;
}

/**
 * Takes the data directory for this process: `stablepay.lock` holds our pid (then our helpers' pids), created
 * exclusively. A lock left by a process that no longer runs (kill -9, a crash) is taken over once that run's helpers
 * are gone too (at most `helperWaitMs`); one held by a live process refuses.
 */
export async function lockDataDir(dataDir: string, options: LockDataDirOptions = {}): Promise<DataDirLock> {
  const self = options.pid ?? process.pid;
  const file = join(dataDir, LOCK_FILE);
  let tookOverFrom: number | null = null;
  for (let attempt = 0; ; attempt++) {
    try {
      writeFileSync(file, `${self}\n`, { flag: 'wx', mode: 0o644 });
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const owner = liveLockOwner(dataDir).pid;
    if (owner !== null) throw refusal(dataDir, file, owner);
    // Another start took the stale lock over between our two tries: it is theirs now.
    if (attempt > 0) throw new ConfigError(`the data directory ${dataDir} was just taken by another start`);
    tookOverFrom = await takeOverStaleLock(dataDir, file, self, options);
  }
  let helpers: number[] = [];
  let released = false;
  const ours = () => {
    try {
      return readFileSync(file, 'utf8').split('\n')[0]?.trim() === String(self);
    } catch {
      return false;
    }
  };
  return {
    tookOverFrom,
    addHelpers: (pids) => {
      helpers = [...helpers, ...pids];
      if (!ours()) return;
      // Whole or not at all (a rename): a start reading a half-written lock would take it for a dead run's.
      writeFileSync(`${file}.${self}`, [self, ...helpers].join('\n') + '\n', { mode: 0o644 });
      renameSync(`${file}.${self}`, file);
    },
    release: () => {
      if (released) return;
      released = true;
      if (ours()) unlinkSync(file);
    },
  };
}

/**
 * Removes a dead run's lock, under `stablepay.lock.takeover` created exclusively: two starts finding the same stale
 * lock (both restarting after a kill -9) each removed it by path, the second removing the lock the first had just
 * made, and both ran on the same files. Under the guard the lock is read again: a start that finished its takeover
 * meanwhile holds it alive (refused), or is writing its pid (read once more). The caller then creates its own lock
 * exclusively, so of two starts that both got through here one way or the other, exactly one creates it.
 */
async function takeOverStaleLock(
  dataDir: string,
  file: string,
  self: number,
  { helperWaitMs = 30_000, onStep }: LockDataDirOptions,
): Promise<number | null> {
  const guard = `${file}.takeover`;
  try {
    writeFileSync(guard, `${self}\n`, { flag: 'wx', mode: 0o644 });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    const holder = Number(readText(guard)?.trim());
    if (Number.isSafeInteger(holder) && holder > 0 && isAlive(holder))
      throw new ConfigError(
        `the data directory ${dataDir} is being taken over by another start (pid ${holder})`,
      );
    // A start killed in the middle of its takeover: its guard is as stale as the lock it was removing.
    await onStep?.('judged-stale-guard');
    unlinkQuietly(guard);
    throw new ConfigError(
      `the data directory ${dataDir} had an interrupted takeover (${guard}, now removed); start again`,
    );
  }
  try {
    let text = readText(file);
    if (text !== undefined && text.trim() === '') {
      await new Promise((r) => setTimeout(r, 200));
      text = readText(file);
    }
    if (text === undefined) return null;
    const [previous, ...helpers] = text
      .split('\n')
      .map((l) => Number(l.trim()))
      .filter((n) => Number.isSafeInteger(n) && n > 0);
    if (previous !== undefined && isAlive(previous)) throw refusal(dataDir, file, previous);
    // The dead run's chains may still be writing their state: starting ours now would load an older one.
    const deadline = Date.now() + helperWaitMs;
    while (helpers.some(isAlive) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    await onStep?.('removing-stale-lock');
    unlinkQuietly(file);
    return previous ?? null;
  } finally {
    unlinkQuietly(guard);
  }
}

function readText(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

function unlinkQuietly(file: string): void {
  try {
    unlinkSync(file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
}

/** Binds the port once and lets it go: a port another program holds is reported before anything starts. */
export async function probePort(host: string, port: number): Promise<void> {
  if (port === 0) return;
  await new Promise<void>((resolve, reject) => {
    const server = createServer();
    server.once('error', (error: NodeJS.ErrnoException) => {
      const why =
        error.code === 'EADDRINUSE'
          ? 'is already in use (another Stablepay, or another program)'
          : `cannot be bound (${error.code ?? error.message})`;
      reject(
        new ConfigError(`port ${port} on ${host} ${why}: set the environment variable PORT to a free port`),
      );
    });
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolve()));
  });
}

/** Connects to DATABASE_URL once (SELECT 1): an unreachable or refusing server is reported before anything starts. */
export async function probeDatabase(databaseUrl: string): Promise<void> {
  let where = 'DATABASE_URL';
  try {
    const url = new URL(databaseUrl);
    // Host, port and database only: the URL's password stays out of the message.
    where = `${url.hostname}:${url.port || '5432'}${url.pathname}`;
  } catch {
    // the driver reports a malformed URL below
  }
  const client = new Client({ connectionString: databaseUrl, connectionTimeoutMillis: 10_000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('SELECT 1');
  } catch (error) {
    throw new ConfigError(
      `environment variable DATABASE_URL: cannot reach the database at ${where} (${error instanceof Error ? error.message : String(error)})`,
    );
  } finally {
    await client.end().catch(() => undefined);
  }
}
