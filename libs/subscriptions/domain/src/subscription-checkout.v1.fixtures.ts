/**
 * Frozen v1 events exactly as the v1 code (before 2026-11-22) stored them: the decider of that release produced
 * these for one intent created at 10:00 with metadata and urls, then each transition from that created state.
 * Never edit them: they are what databases in the field hold, and the upcaster tests read them.
 */
const deepFreeze = <T>(value: T): T => {
  if (typeof value === 'object' && value !== null) {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
};

const object = {
  object: 'subscription_checkout',
  id: 'schk_01kaqz0cw3fqq8v6b1nkxd2m7e',
  status: 'pending',
  onchain_id: '0x5c1f4b0d8e9a7c2b3f6e1d0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c',
  business_name: 'Acme Streaming',
  subscriber: null,
  external_customer_id: 'cus_42',
  price: '150000',
  price_currency: 'ARS',
  period_duration: 2592000,
  cap: '200000',
  budget: '1500000',
  checkout_url: 'http://127.0.0.1:3000/subscribe/schk_01kaqz0cw3fqq8v6b1nkxd2m7e',
  success_url: 'https://shop.example/ok?c={CHECKOUT_ID}',
  cancel_url: null,
  return_url: null,
  metadata: { plan_name: 'Premium' },
  supported_chains: ['eip155:8453', 'eip155:137'],
  expires_at: '2026-06-01T10:05:00.000Z',
  created_at: '2026-06-01T10:00:00.000Z',
  updated_at: '2026-06-01T10:00:00.000Z',
  completed_at: null,
  cancelled_at: null,
  expired_at: null,
  cancellation_reason: null,
};

export const V1_CREATED = deepFreeze({ type: 'SubscriptionCheckoutCreated.v1', data: { object } });

export const V1_CANCELLED = deepFreeze({
  type: 'SubscriptionCheckoutCancelled.v1',
  data: {
    object: {
      ...object,
      status: 'cancelled',
      cancelled_at: '2026-06-01T10:01:30.000Z',
      cancellation_reason: 'customer_dismissed',
      updated_at: '2026-06-01T10:01:30.000Z',
    },
    cancelledBy: 'customer',
  },
});

export const V1_EXPIRED = deepFreeze({
  type: 'SubscriptionCheckoutExpired.v1',
  data: {
    object: {
      ...object,
      status: 'expired',
      expired_at: '2026-06-01T10:05:00.000Z',
      updated_at: '2026-06-01T10:05:00.000Z',
    },
  },
});

/** A late completion after the expiry above: v1 kept expired_at in the object. */
export const V1_COMPLETED_AFTER_EXPIRY = deepFreeze({
  type: 'SubscriptionCheckoutCompleted.v1',
  data: {
    object: {
      ...object,
      status: 'completed',
      expired_at: '2026-06-01T10:05:00.000Z',
      subscriber: '0x1111111111111111111111111111111111111111',
      completed_at: '2026-06-01T10:06:00.000Z',
      updated_at: '2026-06-01T10:06:00.000Z',
    },
    chain: 'eip155:8453',
    asset: 'USDC',
    txHash: '0xabababababababababababababababababababababababababababababababab',
  },
});
