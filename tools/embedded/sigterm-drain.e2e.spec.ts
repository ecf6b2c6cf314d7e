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
 * consumers and the database (the PGlite child, which got the signal too) stop. No client sees a 500, a request
 * refused while closing gets the 503 envelope, and what is stored afterwards is exactly what was answered 201.
 */
describe('npm start: SIGTERM to the process group while clients write', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'stablepay-sigterm-'));
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  async function start(port: number) {
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
    return { child, output, exited, ...ready };
  }

  const create = (url: string, key: string) =>
    fetch(`${url}/subscription-checkouts`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ price: '1000', price_currency: 'USD' }),
    });

  it('answers every request it accepted, refuses new connections, never answers 500, and saves exactly the writes it answered 201', async () => {
    const port = await freePort();
    const run = await start(port);

    const outcomes: string[] = [];
    const created = new Set<string>();
    const refusals: Array<{ status: number; retryAfter: string | null; body: unknown }> = [];
    let stop = false;
    const client = async () => {
      while (!stop) {
        try {
          const res = await create(run.url, run.demo_api_key);
          const body = (await res.json()) as { id?: string };
          outcomes.push(String(res.status));
          if (res.status === 201 && body.id) created.add(body.id);
          else refusals.push({ status: res.status, retryAfter: res.headers.get('retry-after'), body });
        } catch (e) {
          outcomes.push(String((e as { cause?: { code?: string } }).cause?.code ?? 'network'));
          stop = true;
        }
      }
    };
    const clients = Array.from({ length: 16 }, () => client());
    while (outcomes.filter((o) => o === '201').length < 32) await new Promise((r) => setTimeout(r, 20));
    process.kill(-(run.child.pid ?? 0), 'SIGTERM');
    const code = await run.exited;
    stop = true;
    await Promise.all(clients);

    expect(code).toBe(0);
    // Accepted requests were answered (201, or 503 for one that arrived on an open connection while closing);
    // afterwards connections are refused or reset. Never a 500 from a database that went away first.
    expect(
      outcomes.filter((o) => !['201', '503', 'ECONNREFUSED', 'ECONNRESET', 'UND_ERR_SOCKET'].includes(o)),
    ).toEqual([]);
    expect(run.output.join('\n')).not.toMatch(/Connection terminated|ECONNRESET|"level":"error"/);
    // A request refused while closing ran nothing and says so in the envelope, with when to retry.
    for (const refusal of refusals) {
      expect(refusal).toEqual({
        status: 503,
        retryAfter: '1',
        body: { error: expect.objectContaining({ type: 'api_error', code: 'service_unavailable' }) },
      });
    }
    expect(created.size).toBe(outcomes.filter((o) => o === '201').length);

    // After a restart on the same data, the stored checkouts are exactly those whose clients got 201: no write
    // was lost after its answer, and none was saved whose client got an error or no answer.
    const again = await start(await freePort());
    try {
      // One more write after the restart: once the list shows it, the list shows everything stored before it.
      const sentinel = (await (await create(again.url, again.demo_api_key)).json()) as { id: string };
      const list = async (): Promise<string[]> => {
        const ids: string[] = [];
        for (;;) {
          const after = ids.length > 0 ? `&starting_after=${ids[ids.length - 1]}` : '';
          const res = await fetch(`${again.url}/subscription-checkouts?limit=100${after}`, {
            headers: { authorization: `Bearer ${again.demo_api_key}` },
          });
          const page = (await res.json()) as { data: Array<{ id: string }>; has_more: boolean };
          ids.push(...page.data.map((c) => c.id));
          if (!page.has_more) return ids;
        }
      };
      let stored = await list();
      const deadline = Date.now() + 60_000;
      while (!stored.includes(sentinel.id) && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 200));
        stored = await list();
      }
      expect(stored).toContain(sentinel.id);
      expect(new Set(stored.filter((id) => id !== sentinel.id))).toEqual(created);
    } finally {
      process.kill(-(again.child.pid ?? 0), 'SIGTERM');
      await again.exited;
    }
  }, 300_000);
});
