import type {
  CancelledBy,
  SubscriptionCheckoutCancelled,
  SubscriptionCheckoutCompleted,
  SubscriptionCheckoutCompletedV2,
  SubscriptionCheckoutCreated,
  SubscriptionCheckoutExpired,
  SubscriptionCheckoutObject,
} from './subscription-checkout.events';

/**
 * Upcasters of the subscription checkout events (see docs/architecture.md, Event versioning). The platform's
 * UpcasterRegistry reads them structurally: `{ from, to, upcast }`, pure functions of the stored data.
 *
 * v1 (until 2026-11): every event carried `object`, the whole API object after the change (an API snapshot), and
 * evolve replaced state with it. v2 carries the facts only; each v1 -> v2 upcaster picks the facts out of the
 * snapshot, so a v1 stream folds to the very object it stored.
 */
export interface V1Data {
  readonly object: SubscriptionCheckoutObject;
}

const created = (data: unknown): SubscriptionCheckoutCreated['data'] => {
  const o = (data as V1Data).object;
  return {
    id: o.id,
    onchainId: o.onchain_id,
    businessName: o.business_name,
    checkoutUrl: o.checkout_url,
    price: o.price,
    priceCurrency: o.price_currency,
    cap: o.cap,
    budget: o.budget,
    periodDuration: o.period_duration,
    supportedChains: [...o.supported_chains],
    metadata: { ...o.metadata },
    externalCustomerId: o.external_customer_id,
    successUrl: o.success_url,
    cancelUrl: o.cancel_url,
    returnUrl: o.return_url,
    expiresAt: o.expires_at,
    createdAt: o.created_at,
  };
};

/** The time a v1 event happened: the stamp its transition set, else updated_at (which v1 set to the same). */
const stamp = (o: SubscriptionCheckoutObject, field: 'cancelled_at' | 'expired_at' | 'completed_at') =>
  o[field] ?? o.updated_at;

const cancelled = (data: unknown): SubscriptionCheckoutCancelled['data'] => {
  const v1 = data as V1Data & { readonly cancelledBy: CancelledBy };
  return { by: v1.cancelledBy, cancelledAt: stamp(v1.object, 'cancelled_at') };
};

const expired = (data: unknown): SubscriptionCheckoutExpired['data'] => ({
  expiredAt: stamp((data as V1Data).object, 'expired_at'),
});

const completed = (data: unknown): SubscriptionCheckoutCompletedV2['data'] => {
  const v1 = data as V1Data & {
    readonly chain: string;
    readonly asset: string;
    readonly txHash: string | null;
  };
  // v1 always set the subscriber on completion: without one the stored event is corrupt, and reading it fails loudly.
  if (v1.object.subscriber === null) throw new Error('SubscriptionCheckoutCompleted.v1 without a subscriber');
  return {
    subscriber: v1.object.subscriber,
    chain: v1.chain,
    asset: v1.asset,
    txHash: v1.txHash,
    completedAt: stamp(v1.object, 'completed_at'),
  };
};

export const SUBSCRIPTION_CHECKOUT_UPCASTERS = [
  { from: 'SubscriptionCheckoutCreated.v1', to: 'SubscriptionCheckoutCreated.v2', upcast: created },
  { from: 'SubscriptionCheckoutCancelled.v1', to: 'SubscriptionCheckoutCancelled.v2', upcast: cancelled },
  { from: 'SubscriptionCheckoutExpired.v1', to: 'SubscriptionCheckoutExpired.v2', upcast: expired },
  { from: 'SubscriptionCheckoutCompleted.v1', to: 'SubscriptionCheckoutCompleted.v2', upcast: completed },
  // v2 completions carried no chain facts: their webhook has no data.subscription / data.first_charge.
  {
    from: 'SubscriptionCheckoutCompleted.v2',
    to: 'SubscriptionCheckoutCompleted.v3',
    upcast: (data: unknown): SubscriptionCheckoutCompleted['data'] => ({
      ...(data as SubscriptionCheckoutCompletedV2['data']),
      subscription: null,
      firstCharge: null,
    }),
  },
] as const satisfies ReadonlyArray<{
  readonly from: string;
  readonly to: string;
  readonly upcast: (data: unknown) => unknown;
}>;
