import { type Signer, Wallet } from 'ethers';
import {
  connectStablepayRegistry,
  connectSubscriptionManager,
  connectTestStablecoin,
  toOnChainId,
} from '@stablepay/contracts';
import { signCancelSubscription, signMerchantChange } from '@stablepay/merchant-sdk';
import { createMerchant, type Json, until } from './test-support/http';
import { OnChainStack } from './test-support/stack';
import {
  authorizeSubscribe,
  ledgerListed,
  readyForSubscriptions,
  sendSubscribe,
  signedChargeBody,
} from './test-support/subscriptions';

type Authorized = Awaited<ReturnType<typeof authorizeSubscribe>>;

/**
 * Subscriptions while a merchant's settings and a chain's registry disagree (anvil, over HTTP). After `POST /settings`
 * gives a new signer and settlement address, the registry still holds the old ones until the merchant's
 * MerchantChange lands (`chain_registrations[].status` `change_requires_merchant_signature`): the chain would pay a
 * subscribe and every charge to the settlement address the merchant replaced and accept the signer it retired. So
 * the service takes none of them on that chain (409 `merchant_change_pending`, nothing signed or sent), as it takes
 * no checkout there; once the MerchantChange lands, the new signer charges and pays the new address. A subscribe
 * authorized before the change cannot be taken back (the subscriber sends it): when it lands it stands, and the
 * merchant is told where its first charge went; a charge that paid the address in force at its block time is not
 * announced, even when the indexer reads its log after the settings changed (it reads a block once two sit on it).
 * Last, the chain's node stops: every call that needs it is 503.
 */
const ADMIN_TOKEN = 'admin-token-for-the-subscription-merchant-change-test';
const CHAIN = 'eip155:8453';

describe('subscriptions while a merchant change awaits its signature (embedded stack, anvil)', () => {
  const e2e = new OnChainStack();
  const { api } = e2e;
  const chain = e2e.chain(CHAIN);
  let merchant: { id: string; apiKey: string };
  const oldSigner = Wallet.createRandom();
  const newSigner = Wallet.createRandom();
  const pauser = Wallet.createRandom();
  const oldSettlement = Wallet.createRandom().address;
  const newSettlement = Wallet.createRandom().address;
  const subscription = { id: '', manager: '', token: '' };
  /** An intent created before the change, subscribed to after it. */
  let laterCheckout: Json = {};
  /** An intent whose subscribe was authorized before the change (valid until its deadline), sent after it. */
  let staleCheckout: Json = {};
  let stale: Authorized;
  const as = (method: string, path: string, body?: unknown) => api(method, path, body, merchant.apiKey);
  const registration = async () =>
    ((await as('GET', '/settings')).body['chain_registrations'] as Json[]).find((r) => r['chain'] === CHAIN);
  const newCheckout = async () => {
    const res = await as('POST', '/subscription-checkouts', {
      price: '150000',
      price_currency: 'ARS',
      period_duration: 3600,
      supported_chains: [CHAIN],
    });
    expect(res.status).toBe(201);
    return res.body;
  };

  /** 409 merchant_change_pending naming `param`: the refusal every money-moving call on the chain gets meanwhile. */
  const expectChangePending = (res: { status: number; body: Json }, param: string) => {
    expect(res.status).toBe(409);
    expect(res.body['error']).toMatchObject({
      type: 'invalid_request',
      code: 'merchant_change_pending',
      param,
    });
  };
  const operatorNonce = () => chain.provider().getTransactionCount(e2e.stack.chains?.operator.address ?? '');
  const balanceOf = (address: string) =>
    connectTestStablecoin(subscription.token, chain.provider()).balanceOf(address);
  const signedCharge = async (signer: Signer) => {
    const quote = await as('POST', `/subscriptions/${subscription.id}/charge-quote`);
    expect(quote.status).toBe(201);
    return signedChargeBody(api, merchant.apiKey, chain, {
      merchantId: merchant.id,
      subscriptionId: subscription.id,
      managerAddress: subscription.manager,
      amount: String(quote.body['amount']),
      quoteCode: String(quote.body['quote_code']),
      signer,
    });
  };

  /** A merchant cancel `signer` signed at the subscription's current nonce and the registry's epoch. */
  const signedCancel = async (signer: Signer) => {
    const nonce = Number((await as('GET', `/subscriptions/${subscription.id}`)).body['charge_nonce']);
    const { epoch } = await connectStablepayRegistry(
      chain.local.addresses.registry,
      chain.provider(),
    ).merchantAuth(toOnChainId(merchant.id));
    const deadline = (await chain.now()) + 3600n;
    const { signature } = await signCancelSubscription(
      signer,
      { chain: CHAIN, verifyingContract: subscription.manager },
      { subscriptionId: subscription.id, nonce, epoch, deadline },
    );
    return { nonce, deadline: Number(deadline), signature };
  };

  beforeAll(async () => {
    const stack = await e2e.start('8453', { ADMIN_TOKEN, INDEXER_CONFIRMATIONS: '2' });
    merchant = await createMerchant(stack, ADMIN_TOKEN, 'Rotating Keys SA');
    await e2e.receiveWebhooks(merchant.apiKey);
    await readyForSubscriptions(api, merchant.apiKey, merchant.id, [chain], {
      signer: oldSigner,
      pauser,
      settlement: oldSettlement,
    });
    const checkout = await newCheckout();
    const subscriber = chain.wallet(3);
    const { path, params, authorization } = await authorizeSubscribe(api, checkout, chain, subscriber);
    const txHash = await sendSubscribe(subscriber, authorization);
    expect((await api('POST', path, { ...params, tx_hash: txHash }, null)).body['status']).toBe('recorded');
    subscription.id = String(checkout['onchain_id']);
    subscription.manager = String(authorization['manager_address']);
    subscription.token = String(authorization['token_address']);
    laterCheckout = await newCheckout();
    staleCheckout = await newCheckout();
    stale = await authorizeSubscribe(api, staleCheckout, chain, chain.wallet(5));

    // The merchant replaces its signer and settlement address in the settings; the chain keeps the old ones.
    expect(
      (
        await as('POST', '/settings', {
          merchant_signer: newSigner.address,
          settlement_address: newSettlement,
        })
      ).status,
    ).toBe(200);
    await until(
      registration,
      (r) => r?.['status'] === 'change_requires_merchant_signature',
      'the registration to need the merchant',
    );
  }, 180_000);

  afterAll(() => e2e.stop());

  it('does not announce a charge that paid the settlement address in force at its block time when the indexer reads its log after POST /settings replaced that address', async () => {
    // The first charge (beforeAll) paid oldSettlement while the settings held it, and nothing was mined since: the
    // indexer reads its block only now, after the change. The subscriber's cap change, a later log of the same
    // subscription, is the mark that the indexer got past the charge.
    const id = subscription.id.toLowerCase();
    const manager = connectSubscriptionManager(subscription.manager, chain.wallet(3));
    const cap = BigInt(String((await as('GET', `/subscriptions/${subscription.id}`)).body['cap_amount']));
    await (await manager.updateCap(subscription.id, cap + 1n)).wait();
    await chain.mine(2);
    await e2e.webhooks.next('subscription.cap_updated', id);
    expect(e2e.webhooks.all('subscription.charge_paid_replaced_settlement_address', id)).toEqual([]);
  });

  it('refuses to authorize a subscribe the chain would pay to the replaced settlement address: 409 merchant_change_pending, nothing signed', async () => {
    const subscriber = chain.wallet(4);
    const option = (laterCheckout['subscription_options'] as Json[]).find(
      (o) => o['token_symbol'] === 'USDC' && String(o['asset']).startsWith(`${CHAIN}/`),
    );
    const path = `/subscription-checkouts/${String(laterCheckout['id'])}/subscribe`;
    const refused = await api(
      'POST',
      path,
      { chain: CHAIN, asset: option?.['asset'], subscriber: subscriber.address },
      null,
    );
    expectChangePending(refused, 'chain');
    expect(refused.body).not.toHaveProperty('operator_signature');
    expect((await as('GET', `/subscription-checkouts/${String(laterCheckout['id'])}`)).body['status']).toBe(
      'pending',
    );
  });

  it("sends no charge while the chain holds the retired signer: the old key's signature (valid on chain) and the new key's are 409 merchant_change_pending, nothing sent or recorded", async () => {
    const before = await as('GET', `/subscriptions/${subscription.id}`);
    const nonce = await operatorNonce();
    const paid = await balanceOf(oldSettlement);
    for (const signer of [oldSigner, newSigner]) {
      const refused = await as(
        'POST',
        `/subscriptions/${subscription.id}/charge`,
        await signedCharge(signer),
      );
      expectChangePending(refused, 'chain');
    }
    expect(await operatorNonce()).toBe(nonce);
    expect(await balanceOf(oldSettlement)).toBe(paid);
    expect((await as('GET', `/subscriptions/${subscription.id}`)).body).toEqual(before.body);
  });

  it('answers a cancel signed by the new key, which the chain does not accept yet, 409 merchant_change_pending rather than invalid_signature; nothing sent', async () => {
    const before = await as('GET', `/subscriptions/${subscription.id}`);
    const nonce = await operatorNonce();
    const refused = await as(
      'POST',
      `/subscriptions/${subscription.id}/cancel`,
      await signedCancel(newSigner),
    );
    expectChangePending(refused, 'chain');
    expect(await operatorNonce()).toBe(nonce);
    expect((await as('GET', `/subscriptions/${subscription.id}`)).body).toEqual(before.body);
  });

  it('refuses to create a subscription checkout on that chain, to the merchant: 409 merchant_change_pending naming supported_chains, nothing recorded', async () => {
    const listed = async () =>
      ((await as('GET', '/subscription-checkouts?limit=100')).body['data'] as Json[]).length;
    const before = await listed();
    const refused = await as('POST', '/subscription-checkouts', {
      price: '150000',
      price_currency: 'ARS',
      supported_chains: [CHAIN],
    });
    expectChangePending(refused, 'supported_chains');
    expect(await listed()).toBe(before);
  });

  it('records a subscribe authorized before the change that lands after it (on-chain truth: completed, the first charge paid the replaced address) and tells the merchant: subscription.charge_paid_replaced_settlement_address', async () => {
    const paid = await balanceOf(oldSettlement);
    // Its block after the second of the change (block time has whole seconds): the address it pays was replaced.
    await chain.increaseTime(1);
    const txHash = await sendSubscribe(chain.wallet(5), stale.authorization);
    const first = BigInt(String(stale.authorization['first_charge_amount']));
    expect(await balanceOf(oldSettlement)).toBe(paid + first);
    expect(await balanceOf(newSettlement)).toBe(0n);

    const reported = await api('POST', stale.path, { ...stale.params, tx_hash: txHash }, null);
    expect(reported.body['status']).toBe('recorded');
    expect((await as('GET', `/subscription-checkouts/${String(staleCheckout['id'])}`)).body['status']).toBe(
      'completed',
    );
    const subscriptionId = String(staleCheckout['onchain_id']).toLowerCase();
    const told = await e2e.webhooks.next(
      'subscription.charge_paid_replaced_settlement_address',
      subscriptionId,
    );
    const mismatch = told.data['settlement_mismatch'] ?? {};
    expect(mismatch).toMatchObject({ charge_nonce: 0, tx_hash: txHash });
    expect(String(mismatch['paid_to']).toLowerCase()).toBe(oldSettlement.toLowerCase());
    expect(String(mismatch['settlement_address']).toLowerCase()).toBe(newSettlement.toLowerCase());
    await ledgerListed(e2e.stack);
    const charges = await as('GET', `/merchants/${merchant.id}/charges?subscription_id=${subscriptionId}`);
    expect((charges.body['data'] as Json[]).map((c) => c['id'])).toContain(
      mismatch['subscription_charge_id'],
    );
  });

  it('once the MerchantChange lands, the new key charges and pays the new settlement address; the old key is refused', async () => {
    const registry = chain.local.addresses.registry;
    const onChainId = toOnChainId(merchant.id);
    const { epoch } = await connectStablepayRegistry(registry, chain.provider()).merchantAuth(onChainId);
    const deadline = (await chain.now()) + 3600n;
    const { signature } = await signMerchantChange(
      oldSigner,
      { chain: CHAIN, verifyingContract: registry },
      { merchantId: onChainId, signer: newSigner.address, settlement: newSettlement, epoch, deadline },
    );
    const changed = await as('POST', '/settings/merchant-change', {
      chain: CHAIN,
      deadline: Number(deadline),
      signature,
    });
    expect(changed.status).toBe(200);
    expect((await registration())?.['status']).toBe('registered');

    const old = await as('POST', `/subscriptions/${subscription.id}/charge`, await signedCharge(oldSigner));
    expect(old.status).toBe(422);
    expect(old.body['error']).toMatchObject({ code: 'invalid_signature' });
    const body = await signedCharge(newSigner);
    const charged = await as('POST', `/subscriptions/${subscription.id}/charge`, body);
    expect(charged.status).toBe(200);
    expect(charged.body).toMatchObject({ status: 'succeeded', amount: body.amount });
    expect(await balanceOf(newSettlement)).toBe(BigInt(body.amount));
    expect(
      (await as('POST', '/subscription-checkouts', { price: '150000', price_currency: 'ARS' })).status,
    ).toBe(201);
  });

  // Last: it stops the chain.
  it('answers 503 chain_unavailable, not 500, when the chain node does not answer: charge, subscribe (authorize and report), cancel', async () => {
    // Everything is signed and created while the node answers.
    const charge = await signedCharge(newSigner);
    const cancel = await signedCancel(newSigner);
    const checkout = await newCheckout();
    const option = (checkout['subscription_options'] as Json[]).find((o) => o['token_symbol'] === 'USDC');
    const path = `/subscription-checkouts/${String(checkout['id'])}/subscribe`;
    const params = { chain: CHAIN, asset: option?.['asset'], subscriber: chain.wallet(6).address };

    await e2e.stack.chains?.stop();
    const unavailable = (res: { status: number; body: Json }) => {
      expect(res.status).toBe(503);
      expect(res.body['error']).toMatchObject({ type: 'api_error', code: 'chain_unavailable' });
    };
    unavailable(await as('POST', `/subscriptions/${subscription.id}/charge`, charge));
    unavailable(await api('POST', path, params, null));
    unavailable(await api('POST', path, { ...params, tx_hash: `0x${'ab'.repeat(32)}` }, null));
    unavailable(await as('POST', `/subscriptions/${subscription.id}/cancel`, cancel));
  });
});
