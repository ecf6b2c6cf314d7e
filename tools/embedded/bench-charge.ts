/**
 * Charge end-to-end latency beside a raw anvil transaction with its receipt, in one run on one local chain:
 *   DATABASE_URL=postgres://... node -r @swc-node/register tools/embedded/bench-charge.ts
 *
 *   raw:    an ERC-20 transfer sent by a funded anvil wallet, until its receipt (ethers `wait()`), i.e. what one
 *           transaction costs on this node;
 *   charge: `POST /subscriptions/:id/charge` with a signCharge signature prepared beforehand, until the HTTP answer
 *           (preflight with the registry read and the EIP-712 check, simulation, submit, receipt, the Subscription
 *           append, and the wait until the subscription read model and the charge ledger list it).
 * The two alternate, BENCH_CHARGES (default 30) of each after 3 warm-ups; the quote for each charge is taken before
 * its timer starts. Printed: p50/p95/max and the ratio of the p50s (goal: within 2x). Figures: docs/benchmarks.md.
 */
import 'reflect-metadata';
import { performance } from 'node:perf_hooks';
import { Wallet } from 'ethers';
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

async function main(): Promise<void> {
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

    const payer = wallet(5);
    const payerToken = connectTestStablecoin(tokenAddress, payer);
    await (await payerToken.mint(payer.address, 10n ** 12n)).wait();
    const raw: number[] = [];
    const charges: number[] = [];
    for (let i = 0; i < COUNT + WARMUP; i++) {
      let t = performance.now();
      await (await payerToken.transfer(Wallet.createRandom().address, 1n)).wait();
      if (i >= WARMUP) raw.push(performance.now() - t);

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
      t = performance.now();
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
      `${name.padEnd(40)} n=${v.length}  p50 ${percentile(v, 50).toFixed(1)} ms  p95 ${percentile(v, 95).toFixed(1)} ms  max ${Math.max(...v).toFixed(1)} ms`;
    console.log(line('raw anvil transfer + receipt', raw));
    console.log(line('POST /subscriptions/:id/charge', charges));
    console.log(`ratio of p50s: ${(percentile(charges, 50) / percentile(raw, 50)).toFixed(2)}x (goal <= 2x)`);
  } finally {
    await stack.stop();
    await db.drop();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
