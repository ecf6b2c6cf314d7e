import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { freePort } from '@stablepay/testing';
import { cleanEnv, repoRoot } from './process-harness';

/**
 * A supervisor or an operator stopping `npm start` signals the npm process, not its group. npm forwards the signal
 * to its script's process only: when that was a shell running node, the shell died and Stablepay went on serving,
 * orphaned, holding the data directory's lock (found by the probe of 2026-11-23).
 */
describe('npm start stopped by SIGTERM to the npm process alone', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'stablepay-sigterm-'));
  let groupPid: number | undefined;

  afterAll(() => {
    if (groupPid) {
      try {
        process.kill(-groupPid, 'SIGKILL');
      } catch {
        // Already gone: what the test expects.
      }
    }
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('stops the service and releases the data directory', async () => {
    const port = await freePort();
    const child = spawn('npm', ['start'], {
      cwd: repoRoot,
      env: cleanEnv({
        PORT: String(port),
        STABLEPAY_DATA_DIR: dataDir,
        LOG_LEVEL: 'warn',
      }) as NodeJS.ProcessEnv,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    groupPid = child.pid;
    const output: string[] = [];
    for (const stream of [child.stdout, child.stderr]) {
      if (stream) createInterface({ input: stream }).on('line', (l) => output.push(l));
    }
    const readyBy = Date.now() + 180_000;
    while (!output.some((l) => l.startsWith('{"ready":true'))) {
      if (child.exitCode !== null || Date.now() > readyBy)
        throw new Error(`npm start did not come up:\n${output.join('\n')}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const url = `http://127.0.0.1:${port}`;
    expect((await fetch(`${url}/health`)).status).toBe(200);
    const lock = join(dataDir, 'stablepay.lock');
    expect(existsSync(lock)).toBe(true);

    process.kill(child.pid ?? 0, 'SIGTERM');

    const stoppedBy = Date.now() + 60_000;
    for (;;) {
      const serving = await fetch(`${url}/health`).then(
        () => true,
        () => false,
      );
      if (!serving && !existsSync(lock)) break;
      if (Date.now() > stoppedBy)
        throw new Error(
          `still ${serving ? 'serving' : 'holding the lock'} 60 s after SIGTERM to npm:\n${output.join('\n')}`,
        );
      await new Promise((r) => setTimeout(r, 200));
    }
  }, 300_000);
});
