import { randomBytes } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmdirSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { Client } from 'pg';
import { ConfigError } from '@stablepay/util';
import { createWhole, unlinkQuietly } from './data-files';

/**
 * What the embedded run checks before it starts anything (no PGlite, no chain, no file in the data directory): a
 * problem of the environment is reported at once with a clear message, not after the chains came up.
 */

const LOCK_FILE = 'stablepay.lock';

/** The pid of a live process holding the data directory's lock, or null (no lock, or one left by a dead process). */
function liveLockOwner(dataDir: string): { pid: number | null; file: string } {
  const file = join(dataDir, LOCK_FILE);
  const text = readText(file);
  // A lock file cut short (the machine died while it was written) holds no owner: nobody can be running on it.
  const owner = text === undefined ? null : parseLock(text).owner;
  return { pid: owner !== null && holdsLock(owner) ? owner.pid : null, file };
}

/**
 * Whether a lock's owner still runs. Its pid alone would keep a dead run's lock for as long as any later process
 * has that pid (after a reboot, or once pids came round), and the start would refuse until the file is deleted by
 * hand; with its start time recorded, a later process with the pid is told from it. A lock of an older version, or
 * one written where there is no /proc, names the pid only: a process answering to it is taken as the owner.
 */
function holdsLock(owner: RecordedProcess): boolean {
  const now = lookUp(owner);
  return now === 'same' || now === 'unverified';
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

/**
 * A process as a lock records it: its pid and, where /proc tells it, when it started (`<ticks since boot>@<boot
 * id>`). A pid alone names whatever process has it now: the one recorded, or, once that one is gone, any other.
 */
interface RecordedProcess {
  readonly pid: number;
  readonly started?: string;
}

function recordLine(pid: number): string {
  const started = startedOf(pid);
  return started === undefined ? String(pid) : `${pid} ${started}`;
}

function parseRecord(line: string): RecordedProcess | undefined {
  const [pid, started] = line.trim().split(/\s+/);
  const n = Number(pid);
  if (!Number.isSafeInteger(n) || n <= 0) return undefined;
  return started ? { pid: n, started } : { pid: n };
}

let cachedBootId: string | null | undefined;
function bootId(): string | undefined {
  if (cachedBootId === undefined) {
    try {
      cachedBootId = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim() || null;
    } catch {
      cachedBootId = null;
    }
  }
  return cachedBootId ?? undefined;
}

/** /proc/<pid>/stat read: undefined where there is no /proc (then the pid alone is all we know). */
function procStat(
  pid: number,
): { readonly state: string; readonly group: number; readonly started: string } | 'absent' | undefined {
  const boot = bootId();
  if (boot === undefined) return undefined;
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return 'absent';
  }
  // The command name (field 2) may hold spaces and parentheses: the fields are counted after its last ')'.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return { state: fields[0] ?? '', group: Number(fields[2]), started: `${fields[19] ?? ''}@${boot}` };
}

function startedOf(pid: number): string | undefined {
  const stat = procStat(pid);
  return stat === undefined || stat === 'absent' ? undefined : stat.started;
}

/**
 * What runs as a recorded process now. `gone`: nothing, or a zombie (an exited process its parent has not reaped,
 * which holds no file; in a container whose init does not reap, it stays). `another`: a process that got the pid
 * since. `same`: the recorded one. `unverified`: something answers to the pid, but nothing was recorded to tell
 * whether it is the same (no /proc, or a lock of an older version).
 */
function lookUp(recorded: RecordedProcess): 'gone' | 'another' | 'same' | 'unverified' {
  const stat = procStat(recorded.pid);
  if (stat === 'absent' || stat?.state === 'Z' || stat?.state === 'X') return 'gone';
  if (stat === undefined || recorded.started === undefined)
    return isAlive(recorded.pid) ? 'unverified' : 'gone';
  return stat.started === recorded.started ? 'same' : 'another';
}

/** The processes of a process group that have not exited. */
function groupMembers(group: number): number[] {
  const members: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const stat = procStat(Number(name));
    if (typeof stat === 'object' && stat.group === group && stat.state !== 'Z' && stat.state !== 'X')
      members.push(Number(name));
  }
  return members;
}

/** What a takeover found of one of the dead run's helpers, and what it did about it. */
export type HelperFate =
  /** Already gone. */
  | 'gone'
  /** Its pid names another process now: left alone, not waited for. */
  | 'not ours'
  /** Went by itself while waited for. */
  | 'exited'
  /** Still answering after the wait, but nothing tells it is the one recorded (no /proc): left alone. */
  | 'left running'
  | 'stopped by SIGTERM'
  | 'stopped by SIGKILL';

export interface PreviousHelper {
  readonly pid: number;
  readonly fate: HelperFate;
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
  /** The dead run's helpers found in its lock, each with what the takeover found and did. */
  readonly previousHelpers: readonly PreviousHelper[];
  /**
   * Records the processes this run leaves behind for a moment if it dies (the local chains' watchdogs: their nodes
   * write their state on the way out; the PGlite server), so a run taking the lock over waits for them, and stops
   * them if they outstay the wait. Call it as soon as they are started: each is recorded with its start time, read
   * now, which tells it from a later process given the same pid.
   */
  addHelpers(pids: readonly number[]): void;
  /** Removes the lock if it is still ours. Idempotent. */
  release(): void;
}

/** The points of a takeover a test can hold a start at (its interleavings with other starts are the subject). */
export type TakeoverStep = 'judged-stale-guard' | 'removing-stale-lock';

export interface LockDataDirOptions {
  /** How long a dead run's helpers are waited for before they are stopped. Default 30 s. */
  readonly helperWaitMs?: number;
  /** How long a helper is given between SIGTERM and SIGKILL. Default 10 s. */
  readonly helperStopGraceMs?: number;
  /** The process this start acts as. Default: this process (a test gives each of its starts a process of its own). */
  readonly pid?: number;
  /** Awaited at each step of a takeover. Default: none. */
  readonly onStep?: (step: TakeoverStep) => Promise<void> | void;
}

/**
 * Takes the data directory for this process: `stablepay.lock` holds our pid, an id of its own (`id <random>`), then
 * our helpers (each `<pid> <start time>`), created whole and exclusively. A lock left by a process that no longer
 * runs (kill -9, a crash) is taken over once that run's helpers are gone too: each is waited for at most
 * `helperWaitMs`, then stopped; one held by a live process refuses.
 */
export async function lockDataDir(dataDir: string, options: LockDataDirOptions = {}): Promise<DataDirLock> {
  const self = options.pid ?? process.pid;
  const file = join(dataDir, LOCK_FILE);
  // The id tells this lock from every other the directory sees, even one of a later run given the same pid: the
  // guards of a takeover are named for the lock they take over.
  const head = `${recordLine(self)}\nid ${randomBytes(8).toString('hex')}\n`;
  let tookOver: TookOver = { tookOverFrom: null, previousHelpers: [] };
  for (let attempt = 0; !createLockFile(file, head, self); attempt++) {
    const text = readText(file);
    if (text === undefined) continue;
    const held = parseLock(text);
    if (held.owner !== null && holdsLock(held.owner)) throw refusal(dataDir, file, held.owner.pid);
    // Round after round another start took the lock between our tries, and died at once: say so, do not spin.
    if (attempt >= 3)
      throw new ConfigError(`the data directory ${dataDir} keeps being taken by other starts`);
    const outcome = await takeOverStaleLock(dataDir, file, held, self, options);
    if (outcome !== 'changed') tookOver = outcome;
  }
  removeStaleLegacyGuard(dataDir);
  let helpers: string[] = [];
  let released = false;
  const ours = () => readText(file)?.startsWith(head) ?? false;
  return {
    ...tookOver,
    addHelpers: (pids) => {
      helpers = [...helpers, ...pids.map(recordLine)];
      if (!ours()) return;
      // Whole or not at all (a rename): a start reading a half-written lock would take it for a dead run's.
      writeFileSync(`${file}.${self}`, head + helpers.map((h) => `${h}\n`).join(''), { mode: 0o644 });
      renameSync(`${file}.${self}`, file);
    },
    release: () => {
      if (released) return;
      released = true;
      if (ours()) unlinkSync(file);
    },
  };
}

interface TookOver {
  readonly tookOverFrom: number | null;
  readonly previousHelpers: readonly PreviousHelper[];
}

interface HeldLock {
  /** Null for a lock cut short (the machine died while it was written). */
  readonly owner: RecordedProcess | null;
  /** Its id line; a lock of an older version has none, and is named by its pid. */
  readonly id: string;
  readonly helpers: readonly RecordedProcess[];
}

function parseLock(text: string): HeldLock {
  const lines = text.split('\n').map((l) => l.trim());
  const owner = parseRecord(lines[0] ?? '') ?? null;
  const id =
    lines.find((l) => /^id [0-9a-f]+$/.test(l))?.slice(3) ??
    (owner === null ? 'cut-short' : `pid${owner.pid}`);
  return { owner, id, helpers: lines.slice(1).flatMap((l) => parseRecord(l) ?? []) };
}

/** A lock or guard file created whole (createWhole), written aside under the lock's own prefix. */
function createLockFile(path: string, text: string, self: number): boolean {
  return createWhole(path, text, { mode: 0o644, aside: join(dirname(path), `${LOCK_FILE}.${self}.new`) });
}

const TAKEOVER = `${LOCK_FILE}.takeover-`;

/**
 * Removes a dead run's lock under a guard, so that of several starts finding it (all restarting after a kill -9),
 * one only removes it; each removing it by path, one would remove the lock another had just made, and both would run
 * on the same files. The guard is `stablepay.lock.takeover-<lock id>`, created whole and exclusively; under it the
 * lock is read again, and gone or changed (another start got there first) it is left alone.
 *
 * A start killed in its takeover leaves its guard. Removing it by path once its holder is judged dead is not safe:
 * a start that judged it, then paused, would remove the live guard another start had made meanwhile, and two would
 * be inside. So a stale guard is never removed while it guards anything: a start that finds one goes on to the next
 * guard, named for it (`<guard>.<its holder's pid>`), and so on. Every start finding the same dead holders walks the
 * same names, created once each and never changed, so one start at most is inside for a lock. A lock's guards are
 * removed once the lock is gone: its id is its own, it never comes back, its guards guard nothing.
 */
async function takeOverStaleLock(
  dataDir: string,
  file: string,
  held: HeldLock,
  self: number,
  options: LockDataDirOptions,
): Promise<TookOver | 'changed'> {
  let guard = join(dataDir, `${TAKEOVER}${held.id}`);
  while (!createLockFile(guard, `${recordLine(self)}\n`, self)) {
    const text = readText(guard);
    // Its lock was taken over and its guards removed since: this start finds so below.
    if (text === undefined) continue;
    // A guard without a holder was cut short by a machine that died: as stale as one whose holder is gone.
    const holder = parseRecord(text) ?? { pid: 0 };
    const now = holder.pid === 0 ? 'gone' : lookUp(holder);
    if (now === 'same' || now === 'unverified')
      throw new ConfigError(
        `the data directory ${dataDir} is being taken over by another start (pid ${holder.pid})`,
      );
    await options.onStep?.('judged-stale-guard');
    guard = `${guard}.${holder.pid}`;
  }
  let lockGone = false;
  try {
    const text = readText(file);
    const now = text === undefined ? undefined : parseLock(text);
    if (now?.id !== held.id) {
      lockGone = true;
      return 'changed';
    }
    const previousHelpers = await settleHelpers(dataDir, now.helpers, options);
    // While this lock stands, what other locks' takeovers left behind guards nothing: those locks are gone.
    removeTakeoverGuards(dataDir, (id) => id !== held.id);
    await options.onStep?.('removing-stale-lock');
    unlinkQuietly(file);
    lockGone = true;
    return { tookOverFrom: now.owner?.pid ?? null, previousHelpers };
  } finally {
    if (lockGone) removeTakeoverGuards(dataDir, (id) => id === held.id);
    else unlinkQuietly(guard);
  }
}

/** The takeover guard of versions before the guards were named for their lock: `<pid>` of the start inside. */
const LEGACY_TAKEOVER = `${LOCK_FILE}.takeover`;
/** An older version wrote its guard whole in one write right after creating it: older than this, it is not being written. */
const LEGACY_WRITE_MS = 60_000;

/**
 * Removes `stablepay.lock.takeover`, the guard of an older version's takeover, when it is provably stale: no process
 * has its holder's pid any more, or it names no holder and was last written over a minute ago (an older start wrote
 * its pid right after creating it). This version never makes or removes it otherwise, so one left by an older
 * start killed in its takeover stayed for good. Called holding the lock (no start of this version is in a
 * takeover); a live older start's guard is left alone.
 */
function removeStaleLegacyGuard(dataDir: string): void {
  const guard = join(dataDir, LEGACY_TAKEOVER);
  const text = readText(guard);
  if (text === undefined) return;
  let writtenAt: number;
  try {
    writtenAt = statSync(guard).mtimeMs;
  } catch {
    return;
  }
  const holder = parseRecord(text.trim());
  // Its pid alone names whatever process has it now: only a holder that is gone proves it stale.
  const stale = holder === undefined ? Date.now() - writtenAt > LEGACY_WRITE_MS : lookUp(holder) === 'gone';
  if (stale) unlinkQuietly(guard);
}

function removeTakeoverGuards(dataDir: string, ofLock: (id: string) => boolean): void {
  for (const name of readdirSync(dataDir)) {
    if (name.startsWith(TAKEOVER) && ofLock(name.slice(TAKEOVER.length).split('.')[0] ?? ''))
      unlinkQuietly(join(dataDir, name));
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls until `done` (true) or `ms` have passed (false). */
async function waitUntil(done: () => boolean, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (done()) return true;
    if (Date.now() >= deadline) return false;
    await sleep(100);
  }
}

/**
 * Waits for the dead run's helpers to be gone: its chains' nodes may still be writing their state, its PGlite
 * server closing its files, and starting ours now would load an older state or open the same files twice. A pid that
 * names another process now (pid reuse) is not waited for. One of ours still running after `helperWaitMs` (hung,
 * or an orphan nobody told to stop) is stopped: SIGTERM (anvil writes its state on it; the PGlite server, managed,
 * ignores it), then SIGKILL after `helperStopGraceMs`.
 */
async function settleHelpers(
  dataDir: string,
  helpers: readonly RecordedProcess[],
  { helperWaitMs = 30_000, helperStopGraceMs = 10_000 }: LockDataDirOptions,
): Promise<PreviousHelper[]> {
  const fates = new Map<RecordedProcess, HelperFate>();
  const orphaned = (helper: RecordedProcess) => orphansOf(dataDir, helper).length > 0;
  for (const helper of helpers) {
    const now = lookUp(helper);
    if (now === 'another') fates.set(helper, 'not ours');
    else if (now === 'gone' && !orphaned(helper)) fates.set(helper, 'gone');
  }
  const running = () => helpers.filter((h) => !fates.has(h));
  await waitUntil(() => {
    for (const helper of running()) if (!isRunning(helper) && !orphaned(helper)) fates.set(helper, 'exited');
    return running().length === 0;
  }, helperWaitMs);
  for (const helper of running()) {
    const now = lookUp(helper);
    if (now === 'same' || orphaned(helper))
      fates.set(helper, await stopHelper(dataDir, helper, helperStopGraceMs));
    else fates.set(helper, now === 'unverified' ? 'left running' : 'exited');
  }
  return helpers.map((h) => ({ pid: h.pid, fate: fates.get(h) ?? 'gone' }));
}

/**
 * What is left running of a gone helper's process group: a local chain's node (and its watchdog's pipe reader) whose
 * watchdog was killed alone goes on writing its state file, and a node started now on the same file would race it.
 * While one of a group runs, the kernel gives the group's number to no new process, so a group numbered as the gone
 * helper was led by it; its members are taken as ours only when their command line names a file in this data
 * directory, as a chain's node does (`--state <data dir>/chains/...`).
 */
function orphansOf(dataDir: string, helper: RecordedProcess): number[] {
  if (bootId() === undefined || lookUp(helper) !== 'gone') return [];
  const within = [`${dataDir}/`, `${resolve(dataDir)}/`];
  return groupMembers(helper.pid).filter((pid) =>
    commandLine(pid).some((arg) => within.some((dir) => arg.startsWith(dir))),
  );
}

function commandLine(pid: number): string[] {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
  } catch {
    return [];
  }
}

function isRunning(recorded: RecordedProcess): boolean {
  const now = lookUp(recorded);
  return now === 'same' || now === 'unverified';
}

/**
 * Stops a helper known to be the one recorded. One that leads its own process group (a local chain's watchdog,
 * with its node in the group) is signalled as a group and waited for until the whole group is gone: the watchdog
 * dies at once on SIGTERM while its node is still writing its state. So is what is left of a gone leader's group
 * (`orphansOf`).
 */
async function stopHelper(dataDir: string, helper: RecordedProcess, graceMs: number): Promise<HelperFate> {
  const stat = procStat(helper.pid);
  const group =
    (typeof stat === 'object' && stat.group === helper.pid) || orphansOf(dataDir, helper).length > 0;
  const target = group ? -helper.pid : helper.pid;
  const gone = () => (group ? groupMembers(helper.pid).length === 0 : !isRunning(helper));
  signal(target, 'SIGTERM');
  if (await waitUntil(gone, graceMs)) return 'stopped by SIGTERM';
  // Not gone at the last look: still the recorded process, or, for a group, still ours even with its leader gone
  // (while one of a group runs, the kernel gives the group's number to no new process).
  signal(target, 'SIGKILL');
  if (await waitUntil(gone, 5_000)) return 'stopped by SIGKILL';
  throw new ConfigError(
    `the data directory ${dataDir} is still in use by pid ${helper.pid}, left by a run that is no longer running: ` +
      `it did not stop on SIGKILL`,
  );
}

function signal(target: number, name: NodeJS.Signals): void {
  try {
    process.kill(target, name);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
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

/**
 * Creates the data directory if needed and proves it writable (answering the directories it created, outermost
 * first, for `removeCreatedDirs` should the start refuse later): a read-only mount, a file in its place or a parent
 * that cannot be made is a ConfigError naming STABLEPAY_DATA_DIR (exit 78), before anything starts. Without it the
 * run failed on its lock file with the bare errno and exit 1, and a read-only parent was reported as ENOENT
 * (Node's recursive mkdir hides the real error).
 */
export function prepareDataDir(dataDir: string): string[] {
  const refuse = (why: string) =>
    new ConfigError(
      `environment variable STABLEPAY_DATA_DIR: the data directory ${dataDir} ${why}; set STABLEPAY_DATA_DIR to a directory this user can write`,
    );
  // Duck-typed: fs errors need not be instances of this realm's Error (Jest's sandbox).
  const reason = (error: unknown) => {
    const message = (error as { message?: unknown } | null)?.message;
    return typeof message === 'string' ? message : String(error);
  };
  if (existsSync(dataDir) && !statSync(dataDir).isDirectory()) throw refuse('is not a directory');
  // One level at a time, so the error is the real one (EROFS, EACCES, ENOTDIR) of the level that failed.
  const missing: string[] = [];
  for (let at = resolve(dataDir); !existsSync(at); at = dirname(at)) {
    missing.unshift(at);
    if (dirname(at) === at) break;
  }
  const made: string[] = [];
  try {
    for (const dir of missing) {
      mkdirSync(dir);
      made.push(dir);
    }
  } catch (error) {
    removeCreatedDirs(made);
    throw refuse(`cannot be created (${reason(error)})`);
  }
  const probe = join(dataDir, `.write-probe-${process.pid}-${randomBytes(4).toString('hex')}`);
  try {
    writeFileSync(probe, '');
  } catch (error) {
    removeCreatedDirs(missing);
    throw refuse(`is not writable (${reason(error)})`);
  }
  unlinkQuietly(probe);
  return missing;
}

/**
 * Removes the directories a start created (`prepareDataDir`'s answer, outermost first) when it refuses: a refused
 * start leaves the data directory as it found it. Only empty ones go (rmdir), deepest first, so nothing another
 * program put there meanwhile is touched.
 */
export function removeCreatedDirs(created: readonly string[]): void {
  for (const dir of [...created].reverse()) {
    try {
      rmdirSync(dir);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') continue;
      // Not empty: left as it is, and so is every directory above it.
      return;
    }
  }
}

/**
 * Binds the address once and lets it go: a port another program holds, or a HOST that is no address of this machine
 * (a typo, a public address), is reported before anything starts, naming the variable to change. Port 0 is bound
 * too: it always has a free port, but HOST still has to be an address here (with PORT=0 a bad HOST failed only at
 * the real listen, after the database and the chains had started, exit 1 with the bare errno).
 */
export async function probePort(host: string, port: number): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const server = createServer();
    server.once('error', (error: NodeJS.ErrnoException) => {
      const code = error.code ?? error.message;
      if (code === 'EADDRINUSE' || code === 'EACCES')
        reject(
          new ConfigError(
            `port ${port} on ${host} ${code === 'EADDRINUSE' ? 'is already in use (another Stablepay, or another program)' : 'needs privileges this user lacks (EACCES)'}: set the environment variable PORT to a free port`,
          ),
        );
      else
        reject(
          new ConfigError(
            `environment variable HOST: cannot listen on ${host} (${code}): set HOST to an address of this machine (127.0.0.1, or 0.0.0.0 for every interface)`,
          ),
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
