import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { ConfigError } from '@stablepay/util';
import { lockDataDir } from './preflight';

/** A pid no process has here (Linux's pid_max is at most 2^22). */
const DEAD_PID = 4_194_304 + 17;

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
      expect(readFileSync(join(dir, 'stablepay.lock'), 'utf8')).toBe(`${process.pid}\n`);
      expect(existsSync(join(dir, 'stablepay.lock.takeover'))).toBe(false);
    } finally {
      helper.kill();
    }
  });

  it("removes a takeover left by a start that died in it, refusing once, and the next start takes the dead run's lock", async () => {
    writeFileSync(join(dir, 'stablepay.lock'), `${DEAD_PID}\n`);
    writeFileSync(join(dir, 'stablepay.lock.takeover'), `${DEAD_PID + 1}\n`);
    await expect(lockDataDir(dir)).rejects.toThrow(/interrupted takeover/);
    const lock = await lockDataDir(dir);
    expect(lock.tookOverFrom).toBe(DEAD_PID);
    lock.release();
    expect(existsSync(join(dir, 'stablepay.lock'))).toBe(false);
  });

  it('refuses a lock a live process holds, touching nothing', async () => {
    writeFileSync(join(dir, 'stablepay.lock'), `${process.ppid}\n`);
    await expect(lockDataDir(dir)).rejects.toThrow(/in use by another Stablepay/);
    expect(readFileSync(join(dir, 'stablepay.lock'), 'utf8')).toBe(`${process.ppid}\n`);
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
});
