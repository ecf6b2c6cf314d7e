import { Wallet } from 'ethers';
import { connectTestStablecoin } from '@stablepay/contracts';
import { type Json, until } from './test-support/http';
import { newPayment, paymentUntil, transferToken } from './test-support/payments';
import { OnChainStack } from './test-support/stack';
import {
  authorizeSubscribe,
  ledgerListed,
  readyForSubscriptions,
  sendSubscribe,
  signedChargeBody,
} from './test-support/subscriptions';

/**
 * The second supported chain end to end, through HTTP on the embedded stack with two local anvils (8453 and 137, as
 * `npm start` runs): a payment paid on 137 through the real indexer and deployed there, a transfer on the other
 * chain counted as non-funding (`wrong_chain`), and a subscription subscribed and charged on 137; the signed
 * webhooks name the chain.
 */
const BASE = 'eip155:8453';
const POLYGON = 'eip155:137';
const USDC = 10n ** 6n;

describe('the second local chain (137) end to end (embedded stack, two anvils)', () => {
  const e2e = new OnChainStack();
  const { api, webhooks } = e2e;
  const signer = Wallet.createRandom();
  const pauser = Wallet.createRandom();
  const settlement = Wallet.createRandom().address;
  const base = e2e.chain(BASE);
  const polygon = e2e.chain(POLYGON);
  const merchantId = () => e2e.stack.demoMerchantId;

  beforeAll(async () => {
    await e2e.start('8453,137');
    await readyForSubscriptions(api, undefined, merchantId(), [base, polygon], {
      signer,
      pauser,
      settlement,
    });
    await e2e.receiveWebhooks();
  }, 180_000);

  afterAll(() => e2e.stop());

  it('a payment paid on 137 through the indexer is settled there; a transfer on 8453 meanwhile is non-funding (wrong_chain)', async () => {
    const p = await newPayment(api, {
      amount: '100000000',
      method: 'DIRECT',
      accepted_chains: [BASE, POLYGON],
      accepted_tokens: ['USDC'],
    });
    const paymentId = String(p['id']);
    const deposit = String(p['deposit_address']);
    const payer = polygon.wallet(5);
    // A partial payment on 137 makes 137 the detected chain.
    const partial = await transferToken(polygon, payer, 'USDC', deposit, 40n * USDC);
    await paymentUntil(api, paymentId, (x) => x['detected_chain'] === POLYGON, 'the 137 transfer observed');
    // The same deposit address on the other chain, while the order is still open and 137 is further along: listed,
    // never counted (a transfer that paid the whole order there would have become the payment: docs/payments.md).
    const other = await transferToken(base, base.wallet(5), 'USDC', deposit, 10n * USDC);
    const listed = await paymentUntil(
      api,
      paymentId,
      (x) => x['non_funding_transactions_count'] === 1,
      'the 8453 transfer observed',
    );
    expect(listed).toMatchObject({ status: 'pending', amount_paid: '40000000' });
    expect((listed['transactions'] as Json[]).find((t) => t['tx_hash'] === other)).toMatchObject({
      chain: BASE,
      is_funding: false,
      non_funding_reason: 'wrong_chain',
    });

    const topUp = await transferToken(polygon, payer, 'USDC', deposit, 60n * USDC);
    const settled = await paymentUntil(api, paymentId, (x) => x['status'] === 'settled', 'settled on 137');
    expect(settled).toMatchObject({
      detected_chain: POLYGON,
      detected_asset: `${POLYGON}/erc20:${polygon.local.addresses.stablecoins.USDC}`,
      amount_paid: '100000000',
      non_funding_transactions_count: 1,
    });
    expect(
      (settled['transactions'] as Json[])
        .filter((t) => t['is_funding'] === true)
        .map((t) => [t['tx_hash'], t['chain']]),
    ).toEqual(
      expect.arrayContaining([
        [partial, POLYGON],
        [topUp, POLYGON],
      ]),
    );
    const usdc137 = connectTestStablecoin(polygon.local.addresses.stablecoins.USDC, polygon.provider());
    expect(await usdc137.balanceOf(settlement)).toBe(100n * USDC);
    // The deposit contract exists on 137, and nothing was deployed on 8453.
    expect(await polygon.provider().getCode(deposit)).not.toBe('0x');
    expect(await base.provider().getCode(deposit)).toBe('0x');
    const hook = await webhooks.next('payment.settled', paymentId);
    expect(hook.data['object']).toMatchObject({ status: 'settled', detected_chain: POLYGON });
  }, 180_000);

  it('subscribes and charges on 137: the subscription, the ledger rows and the webhooks name 137', async () => {
    const checkout = await api('POST', '/subscription-checkouts', {
      price: '150000',
      price_currency: 'ARS',
      period_duration: 3600,
      supported_chains: [POLYGON],
    });
    expect(checkout.status).toBe(201);
    const options = checkout.body['subscription_options'] as Json[];
    expect(options.every((o) => String(o['asset']).startsWith(`${POLYGON}/`))).toBe(true);
    const subscriber = polygon.wallet(3);
    const { path, params, authorization } = await authorizeSubscribe(api, checkout.body, polygon, subscriber);
    expect(authorization['chain']).toBe(POLYGON);
    const manager = String(authorization['manager_address']);
    expect(await polygon.provider().getCode(manager)).not.toBe('0x');
    const txHash = await sendSubscribe(subscriber, authorization);
    const reported = await api('POST', path, { ...params, tx_hash: txHash }, null);
    expect(reported.body).toMatchObject({
      status: 'recorded',
      subscription: { chain: POLYGON, charge_nonce: 1 },
    });
    const id = String(checkout.body['onchain_id']);

    const quote = await api('POST', `/subscriptions/${id}/charge-quote`);
    const body = await signedChargeBody(api, undefined, polygon, {
      merchantId: merchantId(),
      subscriptionId: id,
      managerAddress: manager,
      amount: String(quote.body['amount']),
      quoteCode: String(quote.body['quote_code']),
      signer,
    });
    const charged = await api('POST', `/subscriptions/${id}/charge`, body);
    expect(charged.body).toMatchObject({ status: 'succeeded', chain: POLYGON, charge_nonce: 1 });
    const receipt = await polygon.provider().getTransactionReceipt(String(charged.body['tx_hash']));
    expect(receipt?.status).toBe(1);

    await ledgerListed(e2e.stack);
    const byChain = await api('GET', `/merchants/${merchantId()}/charges?chain=${POLYGON}&limit=100`);
    expect((byChain.body['data'] as Json[]).map((c) => c['charge_nonce']).sort()).toEqual([0, 1]);
    const onBase = await api('GET', `/merchants/${merchantId()}/charges?chain=${BASE}&limit=100`);
    expect(onBase.body['data']).toEqual([]);
    const created = await webhooks.next('subscription.created', id);
    expect(created.data['object']).toMatchObject({ chain: POLYGON });
    const hook = await webhooks.next('subscription.charge_succeeded', String(charged.body['id']), {
      key: 'charge',
    });
    expect(hook.data['charge']).toEqual(charged.body);
    await until(
      () => api('GET', `/subscription-checkouts/${String(checkout.body['id'])}`),
      (r) => r.body['status'] === 'completed',
      'the intent completed',
    );
  }, 180_000);
});
