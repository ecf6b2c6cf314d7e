/**
 * Deposit-to-settled latency beside a raw anvil transaction with its receipt, in one run on one local chain:
 *   DATABASE_URL=postgres://... node -r @swc-node/register tools/embedded/bench-deposit.ts
 *
 *   raw:     an ERC-20 transfer sent by a funded anvil wallet, until its receipt (ethers `wait()`), i.e. what one
 *            transaction costs on this node (the floor: a deposit is a transfer and a deploy is another transaction);
 *   deposit: the customer's transfer of the order amount to a DIRECT checkout's deposit address, from the moment it
 *            is sent until the merchant sees the payment settled: the signed `payment.settled` webhook arriving,
 *            and (measured in the same iteration) `GET /payments/:id` polled every 25 ms answering `settled`. In
 *            between: the indexer's follower (its poll), the observation, the confirmation worker, screening, the
 *            operator's `deployDeposit` with its receipt, the payment projection and the webhook dispatcher.
 * The two alternate, BENCH_DEPOSITS (default 20) of each after 2 warm-ups; each checkout is created before its timer
 * starts. Printed: p50/p99/max and the ratio of the p50s. Figures: docs/benchmarks.md.
 */
import 'reflect-metadata';
import { createServer } from 'node:http';
import { performance } from 'node:perf_hooks';
import { Wallet } from 'ethers';
import { EVENT_STORE } from '@stablepay/aggregate';
import { connectTestStablecoin } from '@stablepay/contracts';
import { ANVIL_DEV_PRIVATE_KEYS, localChainProvider } from '@stablepay/local-chains';
import type { EventStore } from '@stablepay/event-store';
import { verifyWebhook } from '@stablepay/merchant-sdk';
import { paymentStreamId } from '@stablepay/payments-service';
import { createTestDatabase } from '@stablepay/testing';
import { startEmbedded } from './embedded';

type Json = Record<string, unknown>;
const CHAIN = 'eip155:8453';
const COUNT = Number(process.env['BENCH_DEPOSITS'] ?? 20);
const WARMUP = 2;
const AMOUNT = 12_500_000n;

const percentile = (values: readonly number[], p: number): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN;
};

async function main(): Promise<void> {
  // payment id -> when its payment.settled webhook arrived (verified).
  const settledHooks = new Map<string, number>();
  const settledHooksWall = new Map<string, number>();
  let secret = '';
  const receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const at = performance.now();
      const body = Buffer.concat(chunks).toString('utf8');
      if (verifyWebhook(body, req.headers, secret).valid) {
        const event = JSON.parse(body) as { type: string; data: { object: { id: string } } };
        if (event.type === 'payment.settled') {
          settledHooks.set(event.data.object.id, at);
          settledHooksWall.set(event.data.object.id, Date.now());
        }
      }
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const address = receiver.address();
  if (address === null || typeof address === 'string') throw new Error('receiver has no port');

  const db = await createTestDatabase();
  const stack = await startEmbedded({
    env: { DATABASE_URL: db.url, PORT: '0', LOG_LEVEL: 'error', LOCAL_CHAIN_IDS: '8453' },
    dataDir: 'memory',
  });
  try {
    const api = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`${stack.url}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${stack.demoApiKey}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const json = (await res.json()) as Json;
      if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
      return json;
    };
    const chain = stack.chains?.chains.find((c) => c.caip2 === CHAIN);
    if (!chain) throw new Error('no local chain');
    const provider = localChainProvider(chain.rpcUrl, chain.chainId);
    await api('POST', '/settings', {
      merchant_signer: Wallet.createRandom().address,
      settlement_address: Wallet.createRandom().address,
    });
    secret = String(
      (await api('PATCH', '/settings', { webhook_url: `http://127.0.0.1:${address.port}/hooks` }))[
        'webhook_secret'
      ],
    );
    // The deposit's deploy needs the merchant in the chain's registry.
    for (;;) {
      const signers = (await api('GET', '/settings'))['signers'] as Json[];
      if (signers.every((s) => s['status'] === 'registered')) break;
      await new Promise((r) => setTimeout(r, 100));
    }

    const customer = new Wallet(ANVIL_DEV_PRIVATE_KEYS[3] ?? '', provider);
    const token = connectTestStablecoin(chain.addresses.stablecoins.USDC, customer);
    await (await token.mint(customer.address, AMOUNT * BigInt(COUNT + WARMUP + 1) * 2n)).wait();
    const raw: number[] = [];
    const byWebhook: number[] = [];
    const byApi: number[] = [];
    const measured: { paymentId: string; sentAt: number }[] = [];
    for (let i = 0; i < COUNT + WARMUP; i++) {
      let t = performance.now();
      await (await token.transfer(Wallet.createRandom().address, 1n)).wait();
      if (i >= WARMUP) raw.push(performance.now() - t);

      const paymentId = String(
        (await api('POST', '/checkouts', { amount: AMOUNT.toString(), currency: 'USD', method: 'DIRECT' }))[
          'payment_id'
        ],
      );
      const depositAddress = String((await api('GET', `/payments/${paymentId}`))['deposit_address']);
      t = performance.now();
      const sentAt = Date.now();
      await token.transfer(depositAddress, AMOUNT);
      let seenByApi: number | null = null;
      for (let polls = 0; seenByApi === null || !settledHooks.has(paymentId); polls++) {
        if (polls > 2_400) throw new Error(`payment ${i} (${paymentId}) not settled within a minute`);
        if (seenByApi === null && (await api('GET', `/payments/${paymentId}`))['status'] === 'settled')
          seenByApi = performance.now();
        await new Promise((r) => setTimeout(r, 25));
      }
      if (i >= WARMUP) {
        measured.push({ paymentId, sentAt });
        byApi.push(seenByApi - t);
        byWebhook.push((settledHooks.get(paymentId) ?? Number.NaN) - t);
      }
    }
    provider.destroy();
    const line = (name: string, v: number[]) =>
      `${name.padEnd(64)} n=${v.length}  p50 ${percentile(v, 50).toFixed(1)} ms  p99 ${percentile(v, 99).toFixed(1)} ms  max ${Math.max(...v).toFixed(1)} ms`;
    console.log(line('raw anvil transfer + receipt', raw));
    console.log(line('deposit sent -> GET /payments/:id settled', byApi));
    console.log(line('deposit sent -> payment.settled webhook', byWebhook));
    // Where the time goes: each stage ends when the payment stream recorded its fact (the store's clock, this
    // machine's), the last one when the webhook arrived.
    const store = stack.service.app.get<EventStore>(EVENT_STORE);
    const stages: [string, string][] = [
      ['transfer sent -> observed (mined, indexer poll, observation)', 'PaymentTransferObserved.v1'],
      ['-> deposit confirmed (confirmation worker)', 'PaymentDepositConfirmed.v1'],
      ['-> deploy requested (screening)', 'PaymentDeployRequested.v1'],
      ['-> settled (deployDeposit sent, mined, receipt read)', 'PaymentSettled.v1'],
    ];
    const spans: number[][] = stages.map(() => []);
    const toHook: number[] = [];
    for (const m of measured) {
      const events = await store.readStream(paymentStreamId(m.paymentId));
      let previous = m.sentAt;
      stages.forEach(([, type], k) => {
        const at = events.find((e) => e.type === type)?.recordedAt.getTime() ?? Number.NaN;
        spans[k]?.push(at - previous);
        previous = at;
      });
      toHook.push((settledHooksWall.get(m.paymentId) ?? Number.NaN) - previous);
    }
    stages.forEach(([name], k) => console.log(line(`  ${name}`, spans[k] ?? [])));
    console.log(line('  -> payment.settled webhook received', toHook));
    const ratio = (v: number[]) => (percentile(v, 50) / percentile(raw, 50)).toFixed(2);
    console.log(`ratio of p50s: API ${ratio(byApi)}x, webhook ${ratio(byWebhook)}x the raw transfer`);
  } finally {
    await stack.stop();
    await db.drop();
    await new Promise<void>((resolve) => receiver.close(() => resolve()));
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
