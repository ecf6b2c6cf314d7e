import { Wallet } from 'ethers';
import { connectTestStablecoin } from '@stablepay/contracts';
import { ANVIL_DEV_PRIVATE_KEYS, localChainProvider } from '@stablepay/local-chains';
import type { Json } from './http';

/**
 * Driving a spawned `npm start` (tools/embedded/start.js) as a newcomer would: over HTTP with the demo key printed in
 * its ready line, and on the local chains its banner names.
 */
export interface NpmStartRun {
  readonly url: string;
  readonly apiKey: string;
  /** CAIP-2 chain id -> the local chain's RPC URL, from the banner. */
  readonly chains: Record<string, string>;
}

/**
 * Polls `probe` every 100 ms until it answers (`timeoutMs`, 90 s by default); the failure says what was last seen.
 */
export async function until<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  seen?: () => Promise<unknown>,
  timeoutMs = 90_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what}; last seen ${JSON.stringify(await seen?.())}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The chains a run's banner names (`Chain eip155:8453   http://127.0.0.1:...`). */
export function bannerChains(output: readonly string[]): Record<string, string> {
  const chains: Record<string, string> = {};
  for (const line of output) {
    const m = /Chain (eip155:\d+) +(http:\/\/127\.0\.0\.1:\d+)/.exec(line);
    if (m?.[1] && m[2]) chains[m[1]] = m[2];
  }
  return chains;
}

export async function runApi(
  run: NpmStartRun,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: Json }> {
  const res = await fetch(`${run.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${run.apiKey}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: (await res.json()) as Json };
}

/** An anvil dev key's wallet on one of the run's local chains (destroy its provider when done). */
export function chainWallet(run: NpmStartRun, chain: string, index: number): Wallet {
  const rpcUrl = run.chains[chain];
  if (!rpcUrl) throw new Error(`no local chain ${chain} in the banner`);
  return new Wallet(
    ANVIL_DEV_PRIVATE_KEYS[index] ?? '',
    localChainProvider(rpcUrl, Number(chain.split(':')[1])),
  );
}

async function balanceOf(run: NpmStartRun, chain: string, token: string, address: string): Promise<bigint> {
  const w = chainWallet(run, chain, 0);
  try {
    return await connectTestStablecoin(token, w.provider).balanceOf(address);
  } finally {
    w.provider?.destroy();
  }
}

/**
 * POST /checkouts (DIRECT, USD), the customer (dev key `payerIndex`) mints USDC and pays the deposit address on
 * `chain`, then GET /payments/:id until settled. Answers the settled payment and what `settlement` received.
 */
export async function payDirectCheckout(
  run: NpmStartRun,
  chain: string,
  amount: bigint,
  options: { payerIndex?: number; settlement?: string } = {},
): Promise<{ payment: Json; settlementReceived: bigint }> {
  const created = await runApi(run, 'POST', '/checkouts', {
    amount: amount.toString(),
    currency: 'USD',
    method: 'DIRECT',
  });
  if (created.status !== 201) throw new Error(`checkout refused: ${JSON.stringify(created.body)}`);
  const usdc = (created.body['accepted_assets'] as Json[]).find(
    (a) => a['chain'] === chain && a['token_symbol'] === 'USDC',
  );
  const token = String(usdc?.['asset']).split('/erc20:')[1] ?? '';
  const before = options.settlement ? await balanceOf(run, chain, token, options.settlement) : 0n;
  const payer = chainWallet(run, chain, options.payerIndex ?? 3);
  try {
    const coin = connectTestStablecoin(token, payer);
    await (await coin.mint(payer.address, amount)).wait();
    await (await coin.transfer(String(created.body['deposit_address']), amount)).wait();
  } finally {
    payer.provider?.destroy();
  }
  const paymentId = String(created.body['payment_id']);
  const payment = await until(
    `payment ${paymentId} to settle`,
    async () => {
      const p = await runApi(run, 'GET', `/payments/${paymentId}`);
      return p.body['status'] === 'settled' ? p.body : undefined;
    },
    async () => (await runApi(run, 'GET', `/payments/${paymentId}`)).body,
  );
  const after = options.settlement ? await balanceOf(run, chain, token, options.settlement) : 0n;
  return { payment, settlementReceived: after - before };
}

/**
 * A subscription checkout on `chain` (150000 ARS), subscribed from the wallet of dev key `subscriberIndex` as a
 * wallet does with the authorization (fund, approve the manager, the one subscribe transaction), then reported with
 * its hash. Answers the checkout, the transaction hash and the report's answer.
 */
export async function subscribeFromWallet(
  run: NpmStartRun,
  chain: string,
  subscriberIndex: number,
): Promise<{ checkout: Json; txHash: string; reported: { status: number; body: Json } }> {
  const checkout = await runApi(run, 'POST', '/subscription-checkouts', {
    price: '150000',
    price_currency: 'ARS',
    supported_chains: [chain],
  });
  if (checkout.status !== 201) throw new Error(`checkout refused: ${JSON.stringify(checkout.body)}`);
  const option = (checkout.body['subscription_options'] as Json[]).find((o) => o['token_symbol'] === 'USDC');
  const subscriber = chainWallet(run, chain, subscriberIndex);
  const subscribe = (extra: Json = {}) =>
    fetch(`${run.url}/subscription-checkouts/${String(checkout.body['id'])}/subscribe`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ chain, asset: option?.['asset'], subscriber: subscriber.address, ...extra }),
    }).then(async (res) => ({ status: res.status, body: (await res.json()) as Json }));
  let txHash: string;
  try {
    const authorization = await subscribe();
    if (authorization.status !== 200)
      throw new Error(`subscribe not authorized: ${JSON.stringify(authorization.body)}`);
    const token = connectTestStablecoin(String(authorization.body['token_address']), subscriber);
    await (await token.mint(subscriber.address, BigInt(String(authorization.body['budget_amount'])))).wait();
    const [approve, subscribeTx] = authorization.body['transactions'] as Json[];
    await (
      await subscriber.sendTransaction({ to: String(approve?.['to']), data: String(approve?.['data']) })
    ).wait();
    const sent = await subscriber.sendTransaction({
      to: String(subscribeTx?.['to']),
      data: String(subscribeTx?.['data']),
    });
    await sent.wait();
    txHash = sent.hash;
  } finally {
    subscriber.provider?.destroy();
  }
  return { checkout: checkout.body, txHash, reported: await subscribe({ tx_hash: txHash }) };
}
