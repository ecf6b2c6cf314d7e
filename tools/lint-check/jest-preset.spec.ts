import { spawn } from 'node:child_process';
import { join } from 'node:path';

const root = join(__dirname, '..', '..');

/** Runs Jest on a project of the shared preset; resolves with its exit code once the process has ended. */
function runJest(config: string): Promise<number | null> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [join(root, 'node_modules', 'jest', 'bin', 'jest.js'), '-c', config, '--runInBand'],
      {
        cwd: root,
        stdio: 'ignore',
        env: { ...process.env, CI: 'true' },
      },
    );
    child.once('error', reject);
    child.once('exit', (code) => resolve(code));
  });
}

describe('the shared Jest preset', () => {
  it('ends a run whose tests left a server open (a timed-out setup must not hang npm test)', async () => {
    // Without forceExit this Jest process never exits, and this test fails at its timeout.
    await expect(runJest(join(__dirname, 'fixtures', 'open-handle', 'jest.config.js'))).resolves.toBe(0);
  }, 120_000);
});
