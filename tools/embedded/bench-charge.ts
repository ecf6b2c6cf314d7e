/**
 * Charge end-to-end latency beside a raw anvil transaction with its receipt, in one run on one local chain:
 *   DATABASE_URL=postgres://... node -r @swc-node/register tools/embedded/bench-charge.ts
 *
 *   raw:    an ERC-20 transfer sent by a funded anvil wallet, until its receipt (ethers `wait()`), i.e. what one
 *           transaction costs on this node. The floor: its provider does not hold requests back to batch them
 *           (`batchStallTime: 0`, like the relayer's); with ethers' default 10 ms stall per call (the floor of the
 *           figures before 2026-11-23 03:00, when the relayer paid the stall too) it is printed for comparison;
 *   charge: `POST /subscriptions/:id/charge` with a signCharge signature prepared beforehand, until the HTTP answer
 *           (preflight with the registry read and the EIP-712 check, simulation, submit, receipt, the Subscription
 *           append, and the wait until the subscription read model and the charge ledger list it).
 * The two alternate, BENCH_CHARGES (default 30) of each after 3 warm-ups; the quote for each charge is taken before
 * its timer starts. Printed: p50/p95/max, the ratio of the p50s to the floor (goal: within 2x) and the load average
 * before and after. Figures: docs/benchmarks.md.
 */
import 'reflect-metadata';
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { getAddress, hexlify, JsonRpcProvider, Network, randomBytes, Wallet } from 'ethers';
import { connectStablepayRegistry, connectTestStablecoin, toOnChainId } from '@stablepay/contracts';
import { ANVIL_DEV_PRIVATE_KEYS, localChainProvider } from '@stablepay/local-chains';
import { signCharge } from '@stablepay/merchant-sdk';
import { createTestDatabase } from '@stablepay/testing';
import { startEmbedded } from './embedded';

type Json = Record<string, unknown>;
const CHAIN = 'eip155:8453';
const COUNT = Number(process.env['BENCH_CHARGES'] ?? 30);
const WARMUP = 3;

const percentile = (values: readonly number[], p: number): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
};

const load = (): string =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');

async function main(): Promise<void> {
  const loadBefore = load();
  const db = await createTestDatabase();
  const stack = await startEmbedded({
    env: {
      DATABASE_URL: db.url,
      PORT: '0',
      LOG_LEVEL: 'error',
      STABLEPAY_LOCAL_CHAINS: 'true',
      LOCAL_CHAIN_IDS: '8453',
    },
    dataDir: 'memory',
  });
  try {
    const api = async (method: string, path: string, body?: unknown, auth = true) => {
      const res = await fetch(`${stack.url}${path}`, {
        method,
        headers: {
          ...(auth ? { authorization: `Bearer ${stack.demoApiKey}` } : {}),
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
    const wallet = (i: number) => new Wallet(ANVIL_DEV_PRIVATE_KEYS[i] ?? '', provider);
    const merchantSigner = Wallet.createRandom();
    const pauser = Wallet.createRandom();
    await api('POST', '/settings', {
      merchant_signer: merchantSigner.address,
      settlement_address: Wallet.createRandom().address,
    });
    const declaration = await api('GET', '/settings/pauser');
    await api('POST', '/settings/pauser', {
      merchant_pauser: pauser.address,
      signature: await pauser.signMessage(String(declaration['declaration_message'])),
    });
    // A plan whose budget holds every charge of the run in one window.
    const checkout = await api('POST', '/subscription-checkouts', {
      price: '100',
      price_currency: 'ARS',
      budget: '100000',
      cap: '100',
      supported_chains: [CHAIN],
    });
    const usdc = (checkout['subscription_options'] as Json[]).find((o) => o['token_symbol'] === 'USDC');
    const subscriber = wallet(3);
    const path = `/subscription-checkouts/${String(checkout['id'])}/subscribe`;
    const params = { chain: CHAIN, asset: usdc?.['asset'], subscriber: subscriber.address };
    const auth = await api('POST', path, params, false);
    const tokenAddress = String(auth['token_address']);
    const managerAddress = String(auth['manager_address']);
    await (
      await connectTestStablecoin(tokenAddress, subscriber).mint(
        subscriber.address,
        BigInt(String(auth['budget_amount'])) * 10n,
      )
    ).wait();
    const [approve, subscribe] = auth['transactions'] as Json[];
    await (
      await subscriber.sendTransaction({ to: String(approve?.['to']), data: String(approve?.['data']) })
    ).wait();
    const sent = await subscriber.sendTransaction({
      to: String(subscribe?.['to']),
      data: String(subscribe?.['data']),
    });
    await sent.wait();
    await api('POST', path, { ...params, tx_hash: sent.hash }, false);
    const subscriptionId = String(checkout['onchain_id']);
    const registry = connectStablepayRegistry(chain.addresses.registry, provider);
    const { epoch } = await registry.merchantAuth(toOnChainId(stack.demoMerchantId));

    // The floor's provider: no batching stall, like the relayer's; the other one keeps ethers' defaults.
    const network = new Network(`local-${chain.chainId}`, chain.chainId);
    const unstalled = new JsonRpcProvider(chain.rpcUrl, network, {
      staticNetwork: network,
      cacheTimeout: -1,
      pollingInterval: 50,
      batchStallTime: 0,
    });
    const raw: number[] = [];
    const rawStalled: number[] = [];
    const charges: number[] = [];
    const floors = [
      { payer: new Wallet(ANVIL_DEV_PRIVATE_KEYS[5] ?? '', unstalled), into: raw },
      { payer: wallet(6), into: rawStalled },
    ].map(({ payer, into }) => ({ token: connectTestStablecoin(tokenAddress, payer), payer, into }));
    for (const { token, payer } of floors) await (await token.mint(payer.address, 10n ** 12n)).wait();
    for (let i = 0; i < COUNT + WARMUP; i++) {
      for (const { token, into } of floors) {
        // A fresh recipient each time, drawn before the timer starts (a random wallet costs a key derivation).
        const to = getAddress(hexlify(randomBytes(20)));
        const t = performance.now();
        await (await token.transfer(to, 1n)).wait();
        if (i >= WARMUP) into.push(performance.now() - t);
      }

      const quote = await api('POST', `/subscriptions/${subscriptionId}/charge-quote`);
      const nonce = Number((await api('GET', `/subscriptions/${subscriptionId}`))['charge_nonce']);
      const deadline = BigInt((await provider.getBlock('latest'))?.timestamp ?? 0) + 3600n;
      const amount = String(quote['amount']);
      const quoteCode = String(quote['quote_code']);
      const { signature } = await signCharge(
        merchantSigner,
        { chain: CHAIN, verifyingContract: managerAddress },
        { subscriptionId, amount, nonce, deadline, quoteCode, epoch },
      );
      const t = performance.now();
      const charged = await api('POST', `/subscriptions/${subscriptionId}/charge`, {
        amount,
        nonce,
        deadline: Number(deadline),
        signature,
        quote_code: quoteCode,
      });
      if (charged['status'] !== 'succeeded') throw new Error(`charge ${i} ${String(charged['status'])}`);
      if (i >= WARMUP) charges.push(performance.now() - t);
    }
    const line = (name: string, v: number[]) =>
      `${name.padEnd(48)} n=${v.length}  p50 ${percentile(v, 50).toFixed(1)} ms  p95 ${percentile(v, 95).toFixed(1)} ms  max ${Math.max(...v).toFixed(1)} ms`;
    const ratio = (floor: number[]) => (percentile(charges, 50) / percentile(floor, 50)).toFixed(2);
    console.log(line('raw anvil transfer + receipt (floor)', raw));
    console.log(line('raw, ethers default provider (10 ms stall)', rawStalled));
    console.log(line('POST /subscriptions/:id/charge', charges));
    console.log(
      `ratio of p50s: ${ratio(raw)}x the floor (goal <= 2x); ${ratio(rawStalled)}x the stalled raw`,
    );
    console.log(`load average (1, 5, 15 min): before ${loadBefore}, after ${load()}`);
  } finally {
    await stack.stop();
    await db.drop();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
