import { Wallet } from 'ethers';
import { createMerchant, type Json, until } from './test-support/http';
import { OnChainStack } from './test-support/stack';
import { authorizeSubscribe, readyForSubscriptions, sendSubscribe } from './test-support/subscriptions';

/**
 * Subscriptions while a merchant's settings and a chain's registry disagree (anvil, over HTTP). After `POST /settings`
 * gives a new signer and settlement address, the registry still holds the old ones until the merchant's
 * MerchantChange lands (`chain_registrations[].status` `change_requires_merchant_signature`): the chain would pay a
 * subscribe and every charge to the settlement address the merchant replaced and accept the signer it retired. So
 * the service takes none of them on that chain (409 `merchant_change_pending`, nothing signed or sent), as it takes
 * no checkout there; once the MerchantChange lands, the new signer charges and pays the new address.
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

  beforeAll(async () => {
    const stack = await e2e.start('8453', { ADMIN_TOKEN });
    merchant = await createMerchant(stack, ADMIN_TOKEN, 'Rotating Keys SA');
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
    expect(refused.status).toBe(409);
    expect(refused.body['error']).toMatchObject({
      type: 'invalid_request',
      code: 'merchant_change_pending',
      param: 'chain',
    });
    expect(refused.body).not.toHaveProperty('operator_signature');
    expect((await as('GET', `/subscription-checkouts/${String(laterCheckout['id'])}`)).body['status']).toBe(
      'pending',
    );
  });
});
