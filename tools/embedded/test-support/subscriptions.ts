import { type BaseWallet, type Signer, Wallet } from 'ethers';
import { connectStablepayRegistry, connectTestStablecoin, toOnChainId } from '@stablepay/contracts';
import { ChargeLedgerProjection } from '@stablepay/charge-ledger-service';
import { signCharge } from '@stablepay/merchant-sdk';
import type { EmbeddedStack } from '../embedded';
import type { AnvilChain } from './anvil';
import { type Api, type Json, until } from './http';

/**
 * Waits until the charge ledger lists every charge answered so far: a charge call answers with the charge as the
 * ledger recorded it, before the ledger's projection lists its row (SPEC fiat field rule 4). No timing: resolves
 * once the projection has handled every charge event stored before the call (the answer waits for that event).
 */
export async function ledgerListed(stack: EmbeddedStack): Promise<void> {
  await stack.service.app.get(ChargeLedgerProjection).caughtUp();
}

/**
 * A merchant ready for subscriptions on chain: signer and settlement address set (the operator registers them on
 * every chain) and a pauser declared; answers once `chain`'s registry shows the signer.
 */
export async function readyForSubscriptions(
  api: Api,
  key: string | undefined,
  merchantId: string,
  chains: readonly AnvilChain[],
  keys: { signer: BaseWallet; pauser: BaseWallet; settlement?: string },
): Promise<void> {
  const set = await api(
    'POST',
    '/settings',
    {
      merchant_signer: keys.signer.address,
      settlement_address: keys.settlement ?? Wallet.createRandom().address,
    },
    key,
  );
  if (set.status !== 200) throw new Error(`settings refused: ${JSON.stringify(set.body)}`);
  const declaration = await api('GET', '/settings/pauser', undefined, key);
  const declared = await api(
    'POST',
    '/settings/pauser',
    {
      merchant_pauser: keys.pauser.address,
      signature: await keys.pauser.signMessage(String(declaration.body['declaration_message'])),
    },
    key,
  );
  if (declared.status !== 200) throw new Error(`pauser refused: ${JSON.stringify(declared.body)}`);
  for (const chain of chains) {
    await until(
      () =>
        connectStablepayRegistry(chain.local.addresses.registry, chain.provider()).merchantAuth(
          toOnChainId(merchantId),
        ),
      (auth) => auth.signer === keys.signer.address,
      `the merchant registered on ${chain.local.caip2}`,
    );
  }
}

/**
 * A subscription checkout of the plan these specs share: 1,500.00 ARS, cap 3,000.00, budget 12,000.00, hourly
 * windows, on `chain` (the merchant of `key`, default the demo merchant).
 */
export async function newArsSubscriptionCheckout(api: Api, chain: string, key?: string): Promise<Json> {
  const res = await api(
    'POST',
    '/subscription-checkouts',
    {
      price: '150000',
      price_currency: 'ARS',
      cap: '300000',
      budget: '1200000',
      period_duration: 3600,
      supported_chains: [chain],
    },
    key,
  );
  if (res.status !== 201) throw new Error(`subscription checkout refused: ${JSON.stringify(res.body)}`);
  return res.body;
}

/** The subscribe authorization of a checkout for `subscriber` paying in `symbol` on `chain` (public route). */
export async function authorizeSubscribe(
  api: Api,
  checkout: Json,
  chain: AnvilChain,
  subscriber: Wallet,
  symbol = 'USDC',
): Promise<{ path: string; params: Json; authorization: Json }> {
  const option = (checkout['subscription_options'] as Json[]).find(
    (o) => o['token_symbol'] === symbol && String(o['asset']).startsWith(`${chain.local.caip2}/`),
  );
  if (!option) throw new Error(`no ${symbol} option on ${chain.local.caip2}`);
  const path = `/subscription-checkouts/${String(checkout['id'])}/subscribe`;
  const params = { chain: chain.local.caip2, asset: option['asset'], subscriber: subscriber.address };
  const auth = await api('POST', path, params, null);
  if (auth.status !== 200) throw new Error(`subscribe not authorized: ${JSON.stringify(auth.body)}`);
  return { path, params, authorization: auth.body };
}

/** The subscriber wallet's preparation: mints the token (3x the budget) and sends the authorization's approve. */
export async function approveForSubscribe(subscriber: Wallet, authorization: Json): Promise<void> {
  const token = connectTestStablecoin(String(authorization['token_address']), subscriber);
  await (await token.mint(subscriber.address, BigInt(String(authorization['budget_amount'])) * 3n)).wait();
  const [approve] = authorization['transactions'] as Json[];
  await (
    await subscriber.sendTransaction({ to: String(approve?.['to']), data: String(approve?.['data']) })
  ).wait();
}

/** Broadcasts the authorization's subscribe transaction (not waiting for it to be mined). */
export function broadcastSubscribe(subscriber: Wallet, authorization: Json) {
  const subscribe = (authorization['transactions'] as Json[])[1];
  return subscriber.sendTransaction({ to: String(subscribe?.['to']), data: String(subscribe?.['data']) });
}

/**
 * The subscriber wallet's side of a subscribe: mint and approve, then the subscribe transaction; answers its hash
 * once mined.
 */
export async function sendSubscribe(subscriber: Wallet, authorization: Json): Promise<string> {
  await approveForSubscribe(subscriber, authorization);
  const sent = await broadcastSubscribe(subscriber, authorization);
  await sent.wait();
  return sent.hash;
}

/** The merchant's signed charge body (signCharge) for `amount` at the subscription's next charge_nonce. */
export async function signedChargeBody(
  api: Api,
  key: string | undefined,
  chain: AnvilChain,
  charge: {
    merchantId: string;
    subscriptionId: string;
    managerAddress: string;
    amount: string;
    quoteCode: string | null;
    signer: Signer;
  },
): Promise<{ amount: string; nonce: number; deadline: number; signature: string; quote_code?: string }> {
  const registry = connectStablepayRegistry(chain.local.addresses.registry, chain.provider());
  const epoch = (await registry.merchantAuth(toOnChainId(charge.merchantId))).epoch;
  const nonce = Number(
    (await api('GET', `/subscriptions/${charge.subscriptionId}`, undefined, key)).body['charge_nonce'],
  );
  const deadline = (await chain.now()) + 3600n;
  const { signature } = await signCharge(
    charge.signer,
    { chain: chain.local.caip2, verifyingContract: charge.managerAddress },
    {
      subscriptionId: charge.subscriptionId,
      amount: charge.amount,
      nonce,
      deadline,
      quoteCode: charge.quoteCode,
      epoch,
    },
  );
  return {
    amount: charge.amount,
    nonce,
    deadline: Number(deadline),
    signature,
    ...(charge.quoteCode ? { quote_code: charge.quoteCode } : {}),
  };
}
