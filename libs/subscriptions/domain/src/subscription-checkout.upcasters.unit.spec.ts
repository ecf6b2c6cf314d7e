import { foldSubscriptionCheckout, subscriptionCheckoutObject } from './subscription-checkout';
import type { SubscriptionCheckoutEvent } from './subscription-checkout.events';
import { SUBSCRIPTION_CHECKOUT_UPCASTERS } from './subscription-checkout.upcasters';
import {
  V1_CANCELLED,
  V1_COMPLETED_AFTER_EXPIRY,
  V1_CREATED,
  V1_EXPIRED,
} from './subscription-checkout.v1.fixtures';

const upcasterOf = (type: string) => {
  const upcaster = SUBSCRIPTION_CHECKOUT_UPCASTERS.find((u) => u.from === type);
  if (!upcaster) throw new Error(`no upcaster reads ${type}`);
  return upcaster;
};
/** A frozen v1 event read as the newest version (what the store's registry does, chaining v1 -> v2 -> v3). */
const upcast = (event: { type: string; data: unknown }): SubscriptionCheckoutEvent => {
  let current = { type: upcasterOf(event.type).to, data: upcasterOf(event.type).upcast(event.data) };
  for (;;) {
    const next = SUBSCRIPTION_CHECKOUT_UPCASTERS.find((u) => u.from === current.type);
    if (!next) return current as SubscriptionCheckoutEvent;
    current = { type: next.to, data: next.upcast(current.data) };
  }
};

describe('subscription checkout upcasters (frozen v1 snapshots -> v2 facts)', () => {
  it('Created.v1 -> v2: the decided inputs and derived values, nothing of the state', () => {
    expect(upcast(V1_CREATED)).toEqual({
      type: 'SubscriptionCheckoutCreated.v2',
      data: {
        id: 'schk_01kaqz0cw3fqq8v6b1nkxd2m7e',
        onchainId: '0x5c1f4b0d8e9a7c2b3f6e1d0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c',
        businessName: 'Acme Streaming',
        checkoutUrl: 'http://127.0.0.1:3000/subscribe/schk_01kaqz0cw3fqq8v6b1nkxd2m7e',
        price: '150000',
        priceCurrency: 'ARS',
        cap: '200000',
        budget: '1500000',
        periodDuration: 2592000,
        supportedChains: ['eip155:8453', 'eip155:137'],
        metadata: { plan_name: 'Premium' },
        externalCustomerId: 'cus_42',
        successUrl: 'https://shop.example/ok?c={CHECKOUT_ID}',
        cancelUrl: null,
        returnUrl: null,
        expiresAt: '2026-06-01T10:05:00.000Z',
        createdAt: '2026-06-01T10:00:00.000Z',
      },
    });
  });

  it('Cancelled.v1 -> v2: by whom and when', () => {
    expect(upcast(V1_CANCELLED)).toEqual({
      type: 'SubscriptionCheckoutCancelled.v2',
      data: { by: 'customer', cancelledAt: '2026-06-01T10:01:30.000Z' },
    });
  });

  it('Expired.v1 -> v2: when', () => {
    expect(upcast(V1_EXPIRED)).toEqual({
      type: 'SubscriptionCheckoutExpired.v2',
      data: { expiredAt: '2026-06-01T10:05:00.000Z' },
    });
  });

  it('Completed.v1 -> v2 -> v3: subscriber, chain, asset, tx hash and when; no chain facts', () => {
    expect(upcast(V1_COMPLETED_AFTER_EXPIRY)).toEqual({
      type: 'SubscriptionCheckoutCompleted.v3',
      data: {
        subscriber: '0x1111111111111111111111111111111111111111',
        chain: 'eip155:8453',
        asset: 'USDC',
        txHash: '0xabababababababababababababababababababababababababababababababab',
        completedAt: '2026-06-01T10:06:00.000Z',
        subscription: null,
        firstCharge: null,
      },
    });
  });

  it('a Completed.v1 without a subscriber is corrupt and refused, not guessed', () => {
    const corrupt = {
      ...V1_COMPLETED_AFTER_EXPIRY.data,
      object: { ...V1_COMPLETED_AFTER_EXPIRY.data.object, subscriber: null },
    };
    expect(() => upcasterOf('SubscriptionCheckoutCompleted.v1').upcast(corrupt)).toThrow(
      'without a subscriber',
    );
  });

  it('a v1 stream folds to exactly the objects it stored, event by event', () => {
    for (const stream of [
      [V1_CREATED],
      [V1_CREATED, V1_CANCELLED],
      [V1_CREATED, V1_EXPIRED],
      [V1_CREATED, V1_EXPIRED, V1_COMPLETED_AFTER_EXPIRY],
    ]) {
      const { checkout } = foldSubscriptionCheckout(stream.map(upcast));
      expect(checkout && subscriptionCheckoutObject(checkout)).toEqual(stream.at(-1)?.data.object);
    }
  });

  it('Completed.v2 -> v3: the v2 facts, and no chain facts (no data.subscription / first_charge for it)', () => {
    const v2 = {
      subscriber: '0x1111111111111111111111111111111111111111',
      chain: 'eip155:8453',
      asset: 'eip155:8453/erc20:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
      txHash: null,
      completedAt: '2026-06-01T10:01:00.000Z',
    };
    expect(upcasterOf('SubscriptionCheckoutCompleted.v2').upcast(v2)).toEqual({
      ...v2,
      subscription: null,
      firstCharge: null,
    });
  });
});
