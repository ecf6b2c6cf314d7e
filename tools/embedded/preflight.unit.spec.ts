import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '@stablepay/util';
import { lockDataDir } from './preflight';

/** A pid no process has here (Linux's pid_max is at most 2^22). */
const DEAD_PID = 4_194_304 + 17;

describe('the data directory lock', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'stablepay-lock-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

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
});
