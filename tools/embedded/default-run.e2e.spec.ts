import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { verifyWebhook } from '@stablepay/merchant-sdk';
import { freePort } from '@stablepay/testing';
import { cleanEnv, repoRoot } from './process-harness';
import {
  bannerChains,
  payDirectCheckout,
  runApi,
  subscribeFromWallet,
  until,
} from './test-support/npm-start';

/**
 * The default run, proven whatever the test run's DATABASE_URL: `npm start` (tools/embedded/start.js) on the
 * embedded PGlite and its local anvil chains, driven only through HTTP and the chains as a newcomer would. A DIRECT
 * checkout paid on chain settles; a subscription checkout subscribed from a wallet records its first charge in the
 * ledger; then kill -9 of the whole process group, a new `npm start` on the same data directory is ready, what
 * was recorded is still there, a new payment settles and a signed test webhook goes out with the secret issued
 * before the crash. The demo merchant comes seeded with a signer and a pauser: the first checkout needs no settings
 * call. CI runs on PostgreSQL, so without this the embedded default's own failures would hide.
 */
type Json = Record<string, unknown>;
const CHAIN = 'eip155:8453';
const START_TIMEOUT_MS = 170_000;

interface Run {
  readonly child: ChildProcess;
  readonly output: string[];
  readonly exited: Promise<void>;
  readonly url: string;
  readonly apiKey: string;
  readonly merchantId: string;
  readonly chains: Record<string, string>;
  /** The demo merchant's seeded signer (also its settlement address) and pauser, from the ready line. */
  readonly demoSigner: string;
  readonly demoPauser: string;
}

describe('npm start on its defaults (PGlite, local chains): pay, subscribe, kill -9, restart, pay again', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'stablepay-default-run-'));
  const runs: Run[] = [];
  let run: Run;
  let receiver: Server;
  let receiverUrl = '';
  const received: Array<{ body: Buffer; headers: IncomingHttpHeaders }> = [];
  let webhookSecret = '';
  // The seeded demo signer, which is also the demo merchant's settlement address (set by the first run).
  let settlement = '';
  let firstPaymentId = '';

  async function start(): Promise<Run> {
    // Its own process group, as a terminal gives `npm start`: the group is what kill -9 hits. No DATABASE_URL
    // (cleanEnv passes only PATH and HOME): this is the embedded PGlite, whatever this test run uses.
    const child = spawn(process.execPath, ['tools/embedded/start.js'], {
      cwd: repoRoot,
      env: cleanEnv({
        PORT: String(await freePort()),
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
    const started: Pick<Run, 'child' | 'output' | 'exited'> = { child, output, exited };
    runs.push(started as Run);
    const line = await until(
      'npm start to print its ready line',
      async () => {
        if (child.exitCode !== null)
          throw new Error(`npm start exited ${child.exitCode}:\n${output.join('\n')}`);
        return output.find((l) => l.startsWith('{"ready":true'));
      },
      async () => output.slice(-20),
      // On a busy 2-core machine (load 20) the first start took 90 s: two anvils, PGlite and every service.
      START_TIMEOUT_MS,
    );
    const ready = JSON.parse(line) as {
      url: string;
      demo_api_key: string;
      demo_merchant_id: string;
      demo_merchant_signer: string;
      demo_merchant_pauser: string;
    };
    const chains = bannerChains(output);
    const complete: Run = {
      ...started,
      url: ready.url,
      apiKey: ready.demo_api_key,
      merchantId: ready.demo_merchant_id,
      chains,
      demoSigner: ready.demo_merchant_signer,
      demoPauser: ready.demo_merchant_pauser,
    };
    runs[runs.length - 1] = complete;
    return complete;
  }

  /** Ends a run's whole process group and waits for it (afterAll, whatever state the run was left in). */
  async function stopGroup(r: Run, signal: NodeJS.Signals): Promise<void> {
    if (r.child.pid === undefined || r.child.exitCode !== null || r.child.signalCode !== null) return;
    process.kill(-r.child.pid, signal);
    await r.exited;
  }

  const chainDown = (url: string): Promise<true | undefined> =>
    fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }),
    }).then(
      () => undefined,
      () => true,
    );

  const api = (method: string, path: string, body?: unknown) => runApi(run, method, path, body);

  /** A DIRECT checkout paid on chain settles, and the demo merchant's settlement address receives the amount. */
  async function payACheckout(amount: bigint): Promise<Json> {
    const { payment, settlementReceived } = await payDirectCheckout(run, CHAIN, amount, { settlement });
    expect(payment).toMatchObject({ amount_paid: amount.toString(), detected_chain: CHAIN });
    expect(settlementReceived).toBe(amount);
    return payment;
  }

  beforeAll(async () => {
    receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        received.push({ body: Buffer.concat(chunks), headers: req.headers });
        res.writeHead(200).end('ok');
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    const address = receiver.address();
    receiverUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/hooks`;
  });

  afterAll(async () => {
    for (const r of runs) await stopGroup(r, 'SIGKILL');
    // The chains outlive the group by a moment and write their state into the data dir as they go: removing it
    // before they are gone raced with that write (ENOTEMPTY).
    for (const r of runs)
      for (const url of Object.values(r.chains)) await until(`${url} to stop`, async () => chainDown(url));
    await new Promise((r) => receiver?.close(r));
    rmSync(dataDir, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
  }, 120_000);

  it('comes up on PGlite with its local chains, the demo merchant seeded with a signer and a pauser (no settings call)', async () => {
    run = await start();
    const banner = run.output.join('\n');
    expect(banner).toContain('Database:         embedded PGlite');
    expect(Object.keys(run.chains)).toContain(CHAIN);
    expect(run.demoSigner).toMatch(/^0x[0-9a-fA-F]{40}$/);
    expect(banner).toContain(`Demo signer:      ${run.demoSigner}`);
    expect(banner).toContain(`Demo pauser:      ${run.demoPauser}`);
    // The sandbox keys are kept with the data, readable by the owner only.
    expect(statSync(join(dataDir, 'demo-merchant-keys.json')).mode & 0o077).toBe(0);
    const settings = (await api('GET', '/settings')).body;
    expect(settings).toMatchObject({
      merchant_signer: run.demoSigner,
      settlement_address: run.demoSigner,
      merchant_pauser: run.demoPauser,
    });
    settlement = run.demoSigner;
  }, 240_000);

  it("settles the newcomer's first DIRECT checkout, paid on the local chain, with no settings call before it", async () => {
    firstPaymentId = String((await payACheckout(7_000_000n))['id']);
    const registrations = (await api('GET', '/settings')).body['chain_registrations'] as Json[];
    expect(registrations.length).toBeGreaterThan(0);
    expect(registrations.every((r) => r['status'] === 'registered')).toBe(true);
  }, 120_000);

  it("subscribes from a wallet and lists the first charge in the merchant's charge ledger", async () => {
    const hooked = await api('PATCH', '/settings', { webhook_url: receiverUrl });
    expect(hooked.status).toBe(200);
    webhookSecret = String(hooked.body['webhook_secret']);
    const { checkout, txHash, reported } = await subscribeFromWallet(run, CHAIN, 4);
    expect(reported.status).toBe(200);
    expect(reported.body).toMatchObject({
      status: 'recorded',
      subscription: { status: 'active', charge_nonce: 1 },
    });
    const subscriptionId = String(checkout['onchain_id']);
    const charge = await until(
      'the first charge in the ledger',
      async () => {
        const list = await api(
          'GET',
          `/merchants/${run.merchantId}/charges?subscription_id=${subscriptionId}`,
        );
        return (list.body['data'] as Json[] | undefined)?.[0];
      },
      async () => (await api('GET', `/merchants/${run.merchantId}/charges`)).body,
    );
    expect(charge).toMatchObject({
      subscription_id: subscriptionId,
      status: 'succeeded',
      charge_nonce: 0,
      tx_hash: txHash,
    });
    expect((await api('GET', `/subscription-checkouts/${String(checkout['id'])}`)).body).toMatchObject({
      status: 'completed',
    });
  }, 120_000);

  it('after kill -9 of the process group, a new npm start on the same data is ready and keeps what was recorded', async () => {
    await stopGroup(run, 'SIGKILL');
    // The chains leave with their launcher (their watchdog sees its pipe close) and write their state on the way
    // out; the next run reads that state, so it starts once they are gone.
    for (const url of Object.values(run.chains)) await until(`${url} to stop`, async () => chainDown(url));
    run = await start();
    const ready = await until(
      '/ready to answer 200',
      async () => {
        const res = await fetch(`${run.url}/ready`);
        return res.status === 200 ? ((await res.json()) as Json) : undefined;
      },
      async () => (await fetch(`${run.url}/ready`)).text(),
    );
    expect(ready).toMatchObject({ checks: { database: 'ok', chain_followers: 'ok' } });
    const log = run.output.join('\n');
    // The killed run's lock (its pid is gone) does not block the restart; the restart says it took it over.
    expect(log).toContain('took over the data directory from a run that is no longer running');
    // The chains came back from the state anvil kept in the data directory, not through the recovery of a chain
    // that lost its state (which would pass this test without persistence).
    expect(log).not.toMatch(/came back behind/);
    // The same seeded keys, not new ones.
    expect(run.demoSigner).toBe(settlement);
    expect((await api('GET', `/payments/${firstPaymentId}`)).body).toMatchObject({ status: 'settled' });
    expect(
      ((await api('GET', `/merchants/${run.merchantId}/charges`)).body['data'] as Json[]).length,
    ).toBeGreaterThan(0);
  }, 360_000);

  it('settles a new payment after the restart', async () => {
    await payACheckout(3_000_000n);
  }, 120_000);

  it('sends a signed test webhook after the restart with the secret issued before it', async () => {
    const before = received.length;
    const test = await api('POST', '/settings/webhook/test');
    expect(test).toMatchObject({ status: 200, body: { delivered: true, response_status: 200 } });
    const delivery = received.slice(before).find((r) => r.body.toString('utf8').includes('"type"'));
    expect(delivery).toBeDefined();
    expect(
      verifyWebhook(delivery?.body ?? '', (delivery?.headers ?? {}) as Record<string, string>, webhookSecret)
        .valid,
    ).toBe(true);
  }, 60_000);
});
