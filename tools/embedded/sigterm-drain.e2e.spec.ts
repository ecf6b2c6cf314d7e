import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { freePort } from '@stablepay/testing';
import { cleanEnv, repoRoot } from './process-harness';

/**
 * SIGTERM to the whole process group of `npm start` (what a terminal's Ctrl-C or an orchestrator sends) is graceful
 * on the embedded default: the gateway stops accepting, the requests in flight finish, and only then do the
 * consumers and the database (the PGlite child, which got the signal too) stop. No client sees a 500.
 */
describe('npm start: SIGTERM to the process group while clients write', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'stablepay-sigterm-'));
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('answers every request it accepted, refuses new connections, and never answers 500', async () => {
    const port = await freePort();
    const child = spawn(process.execPath, ['tools/embedded/start.js'], {
      cwd: repoRoot,
      env: cleanEnv({
        PORT: String(port),
        STABLEPAY_DATA_DIR: dataDir,
        LOG_LEVEL: 'warn',
        STABLEPAY_LOCAL_CHAINS: 'false',
        SANDBOX_RATES: 'USD/USDC=1',
      }) as NodeJS.ProcessEnv,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    const output: string[] = [];
    for (const s of [child.stdout, child.stderr])
      if (s) createInterface({ input: s }).on('line', (l) => output.push(l));
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    const deadline = Date.now() + 120_000;
    while (!output.some((l) => l.startsWith('{"ready":true'))) {
      if (child.exitCode !== null || Date.now() > deadline) throw new Error(output.join('\n'));
      await new Promise((r) => setTimeout(r, 100));
    }
    const ready = JSON.parse(output.find((l) => l.startsWith('{"ready":true')) ?? '{}') as {
      url: string;
      demo_api_key: string;
    };

    const outcomes: string[] = [];
    let stop = false;
    const client = async () => {
      while (!stop) {
        try {
          const res = await fetch(`${ready.url}/subscription-checkouts`, {
            method: 'POST',
            headers: { authorization: `Bearer ${ready.demo_api_key}`, 'content-type': 'application/json' },
            body: JSON.stringify({ price: '1000', price_currency: 'USD' }),
          });
          await res.text();
          outcomes.push(String(res.status));
        } catch (e) {
          outcomes.push(String((e as { cause?: { code?: string } }).cause?.code ?? 'network'));
          stop = true;
        }
      }
    };
    const clients = Array.from({ length: 16 }, () => client());
    while (outcomes.filter((o) => o === '201').length < 32) await new Promise((r) => setTimeout(r, 20));
    process.kill(-(child.pid ?? 0), 'SIGTERM');
    const code = await exited;
    stop = true;
    await Promise.all(clients);

    expect(code).toBe(0);
    // Accepted requests were answered (201, or 503 for one that arrived on an open connection while closing);
    // afterwards connections are refused or reset. Never a 500 from a database that went away first.
    expect(
      outcomes.filter((o) => !['201', '503', 'ECONNREFUSED', 'ECONNRESET', 'UND_ERR_SOCKET'].includes(o)),
    ).toEqual([]);
    expect(output.join('\n')).not.toMatch(/Connection terminated|ECONNRESET|"level":"error"/);
  }, 300_000);
});
