import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import {
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { ConfigError } from '@stablepay/util';
import {
  type DataDirLock,
  lockDataDir,
  prepareDataDir,
  probePort,
  removeCreatedDirs,
  type TakeoverStep,
} from './preflight';

/** A pid no process has here (Linux's pid_max is at most 2^22). */
const DEAD_PID = 4_194_304 + 17;

/** The pid a lock names as its owner (its first line: `<pid> <start time>`). */
const ownerOf = (lock: string) => lock.split('\n')[0]?.split(' ')[0];

/** Gone, or a zombie (exited, not yet reaped by its parent): nothing that can still touch a file. */
function isGone(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return /^[ZX]/.test(stat.slice(stat.lastIndexOf(')') + 2));
  } catch {
    return true;
  }
}

describe('the data directory lock', () => {
  let dir: string;
  const children: ChildProcess[] = [];
  const groupLeaders = new Set<ChildProcess>();
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'stablepay-lock-'));
  });
  afterEach(async () => {
    for (const child of children.splice(0)) {
      const running = child.exitCode === null && child.signalCode === null;
      const exited = running ? once(child, 'exit') : undefined;
      try {
        // One started as a group of its own (as a chain's watchdog is) is stopped with its group, whatever is left.
        if (groupLeaders.has(child)) process.kill(-(child.pid ?? 0), 'SIGKILL');
        else if (running) child.kill('SIGKILL');
      } catch {
        // ESRCH: nothing left of the group
      }
      await exited;
    }
    groupLeaders.clear();
    rmSync(dir, { recursive: true, force: true });
  });

  /** A process started for the test; with a first line on stdout awaited, when it says it is ready. */
  async function started(command: string, args: string[], options: { ownGroup?: boolean } = {}) {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'ignore'], detached: options.ownGroup });
    children.push(child);
    if (options.ownGroup) groupLeaders.add(child);
    const [line] = (await once(createInterface({ input: child.stdout }), 'line')) as [string];
    return { child, pid: child.pid ?? 0, line };
  }

  /** A run left as kill -9 leaves it: its lock (taken as a process of its own) records `helpers`; it is gone. */
  async function deadRun(helpers: number[]): Promise<number> {
    const { child, pid } = await started('/bin/sh', ['-c', 'echo ready; exec sleep 3600']);
    const lock = await lockDataDir(dir, { pid });
    lock.addHelpers(helpers);
    const exited = once(child, 'exit');
    child.kill('SIGKILL');
    await exited;
    return pid;
  }

  /**
   * A start run in this process as a process of its own (a `sleep`), held at each step of its takeover until
   * resumed. Killing its process is a kill -9 of that start where it is held: it never goes on.
   */
  async function heldStart() {
    const proc = await started('/bin/sh', ['-c', 'echo ready; exec sleep 3600']);
    let held: { step: TakeoverStep; resume: () => void } | undefined;
    let settled = false;
    let wake: () => void = () => undefined;
    const done: Promise<DataDirLock> = lockDataDir(dir, {
      pid: proc.pid,
      onStep: (step) =>
        new Promise<void>((resume) => {
          held = { step, resume };
          wake();
        }),
    });
    const mark = () => {
      settled = true;
      wake();
    };
    void done.then(mark, mark);
    return {
      pid: proc.pid,
      done,
      /** The step it is held at, or `settled` once it has taken the lock or refused. */
      next: () =>
        new Promise<TakeoverStep | 'settled'>((resolve) => {
          const look = () => {
            if (held) resolve(held.step);
            else if (settled) resolve('settled');
            else wake = look;
          };
          look();
        }),
      resume: () => {
        const at = held;
        held = undefined;
        at?.resume();
      },
      kill: async () => {
        const exited = once(proc.child, 'exit');
        proc.child.kill('SIGKILL');
        await exited;
      },
    };
  }

  it("lets exactly one of two starts take over a dead run's lock while that run's helper still lives", async () => {
    const helper = spawn('sleep', ['1']);
    try {
      writeFileSync(join(dir, 'stablepay.lock'), `${DEAD_PID}\n${helper.pid}\n`);
      const results = await Promise.allSettled([lockDataDir(dir), lockDataDir(dir)]);
      const taken = results.filter((r) => r.status === 'fulfilled');
      const refused = results.filter((r) => r.status === 'rejected');
      expect(taken).toHaveLength(1);
      expect(refused).toHaveLength(1);
      expect((refused[0] as PromiseRejectedResult).reason).toBeInstanceOf(ConfigError);
      expect((taken[0] as PromiseFulfilledResult<{ tookOverFrom: number | null }>).value.tookOverFrom).toBe(
        DEAD_PID,
      );
      expect(ownerOf(readFileSync(join(dir, 'stablepay.lock'), 'utf8'))).toBe(`${process.pid}`);
      expect(readdirSync(dir)).toEqual(['stablepay.lock']);
    } finally {
      helper.kill();
    }
  });

  it("takes a dead run's lock at once when a start died in the middle of its takeover, and clears what it left", async () => {
    writeFileSync(join(dir, 'stablepay.lock'), `${DEAD_PID}\n`);
    const killed = await heldStart();
    expect(await killed.next()).toBe('removing-stale-lock');
    await killed.kill();
    const lock = await lockDataDir(dir);
    expect(lock.tookOverFrom).toBe(DEAD_PID);
    expect(readdirSync(dir)).toEqual(['stablepay.lock']);
    lock.release();
    expect(readdirSync(dir)).toEqual([]);
  });

  it("lets one start only take over a dead run's lock when several start at once over a dead start's takeover", async () => {
    writeFileSync(join(dir, 'stablepay.lock'), `${DEAD_PID}\n`);
    const killed = await heldStart();
    expect(await killed.next()).toBe('removing-stale-lock');
    await killed.kill();
    // a and b both judge the dead start's takeover stale; a acts on that first; c comes; only then does b act on
    // what it judged; d comes.
    const [a, b] = [await heldStart(), await heldStart()];
    expect(await a.next()).toBe('judged-stale-guard');
    expect(await b.next()).toBe('judged-stale-guard');
    a.resume();
    await a.next();
    const c = await heldStart();
    await c.next();
    b.resume();
    await b.next();
    const d = await heldStart();
    await d.next();
    // Then each goes to its end, one at a time.
    const starts = [a, b, c, d];
    for (const start of starts) while ((await start.next()) !== 'settled') start.resume();
    const results = await Promise.allSettled(starts.map((s) => s.done));
    const taken = starts.filter((_, i) => results[i]?.status === 'fulfilled');
    expect(taken).toHaveLength(1);
    for (const result of results)
      if (result.status === 'rejected') expect(result.reason).toBeInstanceOf(ConfigError);
    expect(ownerOf(readFileSync(join(dir, 'stablepay.lock'), 'utf8'))).toBe(String(taken[0]?.pid));
  });

  it("removes an older version's stablepay.lock.takeover once provably stale, and only then", async () => {
    const legacy = join(dir, 'stablepay.lock.takeover');
    const startWith = async (guard: string | null, ageMs = 0) => {
      if (guard !== null) writeFileSync(legacy, guard);
      if (ageMs > 0) utimesSync(legacy, new Date(Date.now() - ageMs), new Date(Date.now() - ageMs));
      const lock = await lockDataDir(dir);
      lock.release();
      return existsSync(legacy);
    };
    // Its holder is gone.
    expect(await startWith(`${DEAD_PID}\n`)).toBe(false);
    // A holder that still runs (an older start in its takeover, as far as anyone can tell): left alone.
    expect(await startWith(`${process.ppid}\n`)).toBe(true);
    rmSync(legacy);
    // No holder: written long ago, stale; just now, maybe being written.
    expect(await startWith('', 5 * 60_000)).toBe(false);
    expect(await startWith('')).toBe(true);
    expect(readdirSync(dir)).toEqual(['stablepay.lock.takeover']);
  });

  it('refuses a lock a live process holds, touching nothing', async () => {
    writeFileSync(join(dir, 'stablepay.lock'), `${process.ppid}\n`);
    await expect(lockDataDir(dir)).rejects.toThrow(/in use by another Stablepay/);
    expect(readFileSync(join(dir, 'stablepay.lock'), 'utf8')).toBe(`${process.ppid}\n`);
  });

  it("takes over a dead run's lock whose owner's pid names another process now (pid reuse), not refusing", async () => {
    const previous = await deadRun([]);
    const lockFile = join(dir, 'stablepay.lock');
    const [owner, ...rest] = readFileSync(lockFile, 'utf8').split('\n');
    expect(owner).toMatch(new RegExp(`^${previous} \\d+@[0-9a-f-]+$`));
    // As if the owner's pid had come round to a live process started later: this test's parent.
    writeFileSync(lockFile, [`${process.ppid} 1@${owner?.split('@')[1]}`, ...rest].join('\n'));
    const lock = await lockDataDir(dir);
    expect(lock.tookOverFrom).toBe(process.ppid);
    expect(ownerOf(readFileSync(lockFile, 'utf8'))).toBe(`${process.pid}`);
    // The owner it recorded, start time and all, is still told as running.
    await expect(lockDataDir(dir)).rejects.toThrow(`in use by another Stablepay (pid ${process.pid})`);
    lock.release();
  });

  it('does not wait for a helper whose pid names another process now (pid reuse), and leaves that process alone', async () => {
    const other = await started('/bin/sh', ['-c', 'echo ready; exec sleep 3600']);
    const previous = await deadRun([other.pid]);
    // As if the helper had exited and its pid had come round to a process started later.
    const lockFile = join(dir, 'stablepay.lock');
    writeFileSync(
      lockFile,
      readFileSync(lockFile, 'utf8').replace(new RegExp(`^${other.pid} \\d+@`, 'm'), `${other.pid} 1@`),
    );
    // Waited for, it would hold this start for an hour.
    const lock = await lockDataDir(dir, { helperWaitMs: 3_600_000 });
    expect(lock.tookOverFrom).toBe(previous);
    expect(lock.previousHelpers).toEqual([{ pid: other.pid, fate: 'not ours' }]);
    expect(isGone(other.pid)).toBe(false);
    lock.release();
  });

  it('stops a helper of the dead run that is still running after the wait: SIGKILL when it ignores SIGTERM', async () => {
    // It ignores SIGTERM, as the PGlite server does when managed.
    const stubborn = await started('/bin/sh', ['-c', 'trap "" TERM; echo ready; exec sleep 3600']);
    const previous = await deadRun([stubborn.pid]);
    const lock = await lockDataDir(dir, { helperWaitMs: 0, helperStopGraceMs: 0 });
    expect(isGone(stubborn.pid)).toBe(true);
    expect(lock.tookOverFrom).toBe(previous);
    expect(lock.previousHelpers).toEqual([{ pid: stubborn.pid, fate: 'stopped by SIGKILL' }]);
    lock.release();
  });

  it('stops a helper leading its own process group with its group, as a chain watchdog and its node, on SIGTERM', async () => {
    // The watchdog's shape: a shell in a group of its own, waiting on the node it started in the background.
    const watchdog = await started('/bin/sh', ['-c', 'sleep 3600 & echo $!; wait'], { ownGroup: true });
    const node = Number(watchdog.line);
    await deadRun([watchdog.pid]);
    const lock = await lockDataDir(dir, { helperWaitMs: 0 });
    expect(isGone(node)).toBe(true);
    expect(isGone(watchdog.pid)).toBe(true);
    expect(lock.previousHelpers).toEqual([{ pid: watchdog.pid, fate: 'stopped by SIGTERM' }]);
    lock.release();
  });

  it('stops what is left of a watchdog killed alone: its node, still writing its state file in the data directory', async () => {
    // The node keeps the watchdog's group and names its state file in the data directory, as anvil's `--state` does.
    const watchdog = await started(
      '/bin/sh',
      [
        '-c',
        '/bin/sh -c "sleep 3600; :" node --state "$1" & echo $!; wait',
        'watchdog',
        `${dir}/chains/chain-1.json`,
      ],
      { ownGroup: true },
    );
    const node = Number(watchdog.line);
    // A process of another group naming the data directory is not the dead run's: left alone.
    const bystander = await started('/bin/sh', ['-c', 'echo ready; sleep 3600; :', 'bystander', `${dir}/x`]);
    await deadRun([watchdog.pid]);
    const exited = once(watchdog.child, 'exit');
    process.kill(watchdog.pid, 'SIGKILL');
    await exited;
    expect(isGone(node)).toBe(false);
    // Waited for (it does not end by itself), then stopped with its group.
    const lock = await lockDataDir(dir, { helperWaitMs: 300 });
    expect(isGone(node)).toBe(true);
    expect(lock.previousHelpers).toEqual([{ pid: watchdog.pid, fate: 'stopped by SIGTERM' }]);
    expect(isGone(bystander.pid)).toBe(false);
    lock.release();
  });
});

describe('the data directory check (prepareDataDir)', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'stablepay-datadir-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const refusal = (dataDir: string): unknown => {
    try {
      prepareDataDir(dataDir);
    } catch (error) {
      return error;
    }
    return undefined;
  };

  it('creates a missing directory and its parents, leaving nothing else in it', () => {
    const dataDir = join(dir, 'a', 'b');
    prepareDataDir(dataDir);
    expect(readdirSync(dataDir)).toEqual([]);
  });

  it('answers the directories it made, which removeCreatedDirs takes away again while empty', () => {
    const made = prepareDataDir(join(dir, 'a', 'b'));
    expect(made).toEqual([join(dir, 'a'), join(dir, 'a', 'b')]);
    expect(prepareDataDir(join(dir, 'a', 'b'))).toEqual([]);
    writeFileSync(join(dir, 'a', 'kept'), '');
    removeCreatedDirs(made);
    expect(readdirSync(join(dir, 'a'))).toEqual(['kept']);
    rmSync(join(dir, 'a', 'kept'));
    removeCreatedDirs(made);
    expect(readdirSync(dir)).toEqual([]);
  });

  it('refuses a file in place of the directory, naming STABLEPAY_DATA_DIR', () => {
    const file = join(dir, 'file');
    writeFileSync(file, '');
    const error = refusal(file);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toMatch(
      /^environment variable STABLEPAY_DATA_DIR: .*file is not a directory/,
    );
  });

  it('refuses a directory that cannot be created, with the real error of the level that failed', () => {
    const file = join(dir, 'file');
    writeFileSync(file, '');
    const error = refusal(join(file, 'data'));
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toMatch(/STABLEPAY_DATA_DIR: .* cannot be created \(ENOTDIR/);
  });

  it('refuses a directory no file can be created in (a read-only one), whoever runs it', () => {
    // /proc refuses new files even to root, for whom a chmod'ed directory would still be writable.
    const error = refusal('/proc');
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toMatch(/STABLEPAY_DATA_DIR: the data directory \/proc is not writable/);
  });
});

describe('the address check (probePort)', () => {
  it('names HOST when it is no address of this machine, also with PORT=0 (it failed at the real listen, exit 1)', async () => {
    // 192.0.2.1 is TEST-NET-1 (RFC 5737): never an address of this machine, and no DNS involved.
    for (const host of ['192.0.2.1']) {
      const error: unknown = await probePort(host, 0).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as Error).message).toMatch(
        new RegExp(`^environment variable HOST: cannot listen on ${host} \\(`),
      );
    }
  });

  it('names PORT when the port is taken, and passes a free address', async () => {
    const taken = createServer();
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
    const address = taken.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    try {
      await expect(probePort('127.0.0.1', port)).rejects.toThrow(
        `port ${port} on 127.0.0.1 is already in use (another Stablepay, or another program): set the environment variable PORT to a free port`,
      );
      await expect(probePort('127.0.0.1', 0)).resolves.toBeUndefined();
    } finally {
      await new Promise((r) => taken.close(r));
    }
  });
});
