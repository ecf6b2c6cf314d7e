import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { freePort } from '@stablepay/testing';
import { cleanEnv, repoRoot } from './process-harness';
import { bannerChains, payDirectCheckout, runApi, subscribeFromWallet } from './test-support/npm-start';

/**
 * `npm start` on its embedded defaults (PGlite, local anvil chains) survives kill -9 of its whole process group: a
 * new `npm start` on the same data directory comes back ready with its chain followers running. And when a local
 * chain comes back behind what the database recorded (its saved state lost), the run resets that chain's follower
 * by itself and says so in its log.
 */
describe('npm start after kill -9 and on a local chain that lost its state', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'stablepay-crash-'));
  let running: Run | undefined;

  interface Run {
    readonly child: ChildProcess;
    readonly output: string[];
    readonly url: string;
    readonly apiKey: string;
    readonly chains: Record<string, string>;
    readonly exited: Promise<void>;
  }

  async function start(port: number): Promise<Run> {
    // Its own process group, as a terminal gives `npm start`: the group is what kill -9 hits.
    const child = spawn(process.execPath, ['tools/embedded/start.js'], {
      cwd: repoRoot,
      // No DATABASE_URL, whatever the test run has: this is the embedded PGlite default.
      env: cleanEnv({
        PORT: String(port),
        STABLEPAY_DATA_DIR: dataDir,
        LOG_LEVEL: 'warn',
      }) as NodeJS.ProcessEnv,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    const output: string[] = [];
    for (const stream of [child.stdout, child.stderr]) {
      if (stream) createInterface({ input: stream }).on('line', (l) => output.push(l));
    }
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    const deadline = Date.now() + 180_000;
    while (!output.some((l) => l.startsWith('{"ready":true'))) {
      if (child.exitCode !== null || Date.now() > deadline)
        throw new Error(`npm start did not come up:\n${output.join('\n')}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const ready = JSON.parse(output.find((l) => l.startsWith('{"ready":true')) ?? '{}') as {
      url: string;
      demo_api_key: string;
    };
    return {
      child,
      output,
      url: ready.url,
      apiKey: ready.demo_api_key,
      chains: bannerChains(output),
      exited,
    };
  }

  async function rpc(url: string, method: string, params: unknown[] = []): Promise<unknown> {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
    });
    return ((await res.json()) as { result: unknown }).result;
  }

  /** Each follower's checkpoint, from /metrics. */
  async function checkpoints(url: string): Promise<Record<string, number>> {
    const text = await (await fetch(`${url}/metrics`)).text();
    const out: Record<string, number> = {};
    for (const m of text.matchAll(/^stablepay_indexer_checkpoint_block\{chain="([^"]+)"\} (-?\d+)$/gm)) {
      if (m[1] && m[2]) out[m[1]] = Number(m[2]);
    }
    return out;
  }

  /** Mines blocks on every chain and waits until every follower ingested them, and /ready is 200. */
  async function chainWork(run: Run, blocks: number): Promise<void> {
    const heads: Record<string, number> = {};
    for (const [chain, url] of Object.entries(run.chains)) {
      await rpc(url, 'anvil_mine', [`0x${blocks.toString(16)}`]);
      heads[chain] = Number(await rpc(url, 'eth_blockNumber'));
    }
    const deadline = Date.now() + 60_000;
    for (;;) {
      const at = await checkpoints(run.url);
      const ready = await fetch(`${run.url}/ready`);
      const body = await ready.text();
      if (ready.status === 200 && Object.entries(heads).every(([c, h]) => (at[c] ?? -1) >= h)) return;
      if (Date.now() > deadline)
        throw new Error(
          `followers did not catch up: ${JSON.stringify({ heads, at, body })}\n${run.output.join('\n')}`,
        );
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  async function isDown(url: string): Promise<void> {
    for (;;) {
      try {
        await rpc(url, 'eth_chainId');
      } catch {
        return;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  afterAll(async () => {
    if (running?.child.pid && running.child.exitCode === null) {
      process.kill(-running.child.pid, 'SIGTERM');
      await running.exited;
    }
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('comes back ready with its followers running after kill -9 of the process group', async () => {
    const port = await freePort();
    running = await start(port);
    expect(Object.keys(running.chains)).toEqual(['eip155:8453', 'eip155:137']);
    await chainWork(running, 5);
    expect((await runApi(running, 'GET', '/settings')).status).toBe(200);

    const pid = running.child.pid ?? 0;
    // Every process that holds the data directory's files is in the lock, for a takeover to wait for.
    const pglitePid = execFileSync('pgrep', ['-P', String(pid), '-f', 'pglite/serve.mjs'], {
      encoding: 'utf8',
    }).trim();
    expect(pglitePid).toMatch(/^\d+$/);
    // Each as `<pid> <start time>`: a pid alone would also name a later process given the same number.
    const recorded = readFileSync(join(dataDir, 'stablepay.lock'), 'utf8').split('\n');
    expect(recorded.map((l) => l.split(' ')[0])).toContain(pglitePid);
    expect(recorded.find((l) => l.startsWith(`${pglitePid} `))).toMatch(/^\d+ \d+@[0-9a-f-]+$/);
    process.kill(-pid, 'SIGKILL');
    await running.exited;
    for (const url of Object.values(running.chains)) await isDown(url);

    running = await start(port);
    await chainWork(running, 3);
    const ready = await fetch(`${running.url}/ready`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ checks: { chain_followers: 'ok', database: 'ok' } });
    expect(running.output.join('\n')).not.toMatch(/halted|reorg deeper/);
    // The dead run's PGlite server died with its group; its chain watchdogs left once their nodes had written
    // their state. Nothing had to be stopped, nothing was taken for another process.
    const takeover = running.output
      .filter((l) => l.includes('took over the data directory'))
      .map((l) => JSON.parse(l) as { previousPid: number; previousHelpers: { pid: number; fate: string }[] });
    expect(takeover).toEqual([expect.objectContaining({ previousPid: pid })]);
    expect(takeover[0]?.previousHelpers.map((h) => h.pid)).toContain(Number(pglitePid));
    for (const helper of takeover[0]?.previousHelpers ?? [])
      expect(['gone', 'exited']).toContain(helper.fate);
  }, 600_000);

  it('recovers a local chain that came back behind the database (follower, merchant registration, subscription manager), logs it, and a checkout and a subscribe on it then work', async () => {
    const LOST = 'eip155:137';
    // While the chain still has its history: the demo merchant's subscription manager is deployed on it.
    const before = await subscribeFromWallet(running as Run, LOST, 4);
    expect(before.reported.body).toMatchObject({ status: 'recorded', subscription: { status: 'active' } });
    const run = running as Run;
    // Stop cleanly, then lose one chain's saved state: it comes back empty, behind what the database recorded.
    process.kill(-(run.child.pid ?? 0), 'SIGTERM');
    await run.exited;
    for (const url of Object.values(run.chains)) await isDown(url);
    rmSync(join(dataDir, 'chains', 'chain-137.json'));

    running = await start(await freePort());
    await chainWork(running, 2);
    // The fresh chain is usable: a DIRECT checkout paid on it settles, and a new subscribe deploys the manager again.
    const { payment } = await payDirectCheckout(running, LOST, 2_000_000n);
    expect(payment).toMatchObject({ status: 'settled', detected_chain: LOST });
    const after = await subscribeFromWallet(running, LOST, 5);
    expect(after.reported).toMatchObject({
      status: 200,
      body: { status: 'recorded', subscription: { status: 'active', charge_nonce: 1 } },
    });
    const log = running.output.join('\n');
    const recovery = running.output
      .filter((l) => l.includes('local chain came back behind the database'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(recovery).toEqual([
      expect.objectContaining({
        chain: LOST,
        // Registration runs again on the fresh chain; the manager is deployed again when next needed.
        merchantRegistrationsReset: 1,
        subscriptionManagersForgotten: 1,
        // What lived only on the lost chain is not brought back; the log says so.
        notRecovered: expect.objectContaining({ subscriptions: { active: 1 } }),
      }),
    ]);
    expect(log).not.toMatch(
      /"chain":"eip155:8453"[^\n]*came back behind|came back behind[^\n]*"chain":"eip155:8453"/,
    );
    expect((await fetch(`${running.url}/ready`)).status).toBe(200);

    const registrations = (await runApi(running, 'GET', '/settings')).body['chain_registrations'] as Array<
      Record<string, unknown>
    >;
    expect(registrations.find((r) => r['chain'] === LOST)).toMatchObject({ status: 'registered' });
  }, 600_000);
});
