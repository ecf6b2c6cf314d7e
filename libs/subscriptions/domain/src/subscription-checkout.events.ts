/**
 * Events of the `subscriptionCheckout-<schk_id>` stream (topic `subscriptions.subscription-checkout.v1`).
 *
 * Each event carries `object`: the subscription checkout object exactly as SPEC.md's Events section shapes
 * `data.object` of the `subscription_checkout.*` webhooks (every field of the resource table, metadata echoed,
 * never `subscription_options`). The webhook dispatcher builds a delivery from the event alone; the read model
 * stores the latest object. Other fields are facts the object does not show (who cancelled, which chain the
 * subscribe confirmed on).
 *
 * Types are past tense with an explicit version; a changed shape becomes a new version plus an upcaster.
 */
export type SubscriptionCheckoutStatus = 'pending' | 'completed' | 'cancelled' | 'expired';

/** SPEC Resources > Subscription checkout, without the API-only `subscription_options`. */
export interface SubscriptionCheckoutObject {
  readonly object: 'subscription_checkout';
  readonly id: string;
  readonly status: SubscriptionCheckoutStatus;
  /** 32-byte hex (0x + 64 hex digits); equals the subscription id once completed. */
  readonly onchain_id: string;
  readonly business_name: string;
  readonly subscriber: string | null;
  readonly external_customer_id: string | null;
  /** Minor units of price_currency (hundredths), like cap and budget. */
  readonly price: string;
  readonly price_currency: string | null;
  readonly period_duration: number;
  readonly cap: string;
  readonly budget: string;
  readonly checkout_url: string;
  readonly success_url: string | null;
  readonly cancel_url: string | null;
  readonly return_url: string | null;
  readonly metadata: Readonly<Record<string, string>>;
  readonly supported_chains: readonly string[];
  readonly expires_at: string;
  readonly created_at: string;
  readonly updated_at: string;
  readonly completed_at: string | null;
  readonly cancelled_at: string | null;
  readonly expired_at: string | null;
  readonly cancellation_reason: CancellationReason | null;
}

/** `merchant_cancelled`: PATCH /subscription-checkouts/:id/cancel. `customer_dismissed`: the hosted page's dismiss. */
export type CancellationReason = 'merchant_cancelled' | 'customer_dismissed';

export type SubscriptionCheckoutCreated = {
  type: 'SubscriptionCheckoutCreated.v1';
  data: { object: SubscriptionCheckoutObject };
};

export type SubscriptionCheckoutCancelled = {
  type: 'SubscriptionCheckoutCancelled.v1';
  data: { object: SubscriptionCheckoutObject; cancelledBy: 'merchant' | 'customer' };
};

export type SubscriptionCheckoutExpired = {
  type: 'SubscriptionCheckoutExpired.v1';
  data: { object: SubscriptionCheckoutObject };
};

/**
 * Recorded by the on-chain subscribe flow (a later issue) once the subscribe transaction and first charge
 * confirm. May follow cancelled or expired: on-chain truth wins (SPEC States > Subscription checkout).
 */
export type SubscriptionCheckoutCompleted = {
  type: 'SubscriptionCheckoutCompleted.v1';
  data: { object: SubscriptionCheckoutObject; chain: string; asset: string; txHash: string | null };
};

export type SubscriptionCheckoutEvent =
  | SubscriptionCheckoutCreated
  | SubscriptionCheckoutCancelled
  | SubscriptionCheckoutExpired
  | SubscriptionCheckoutCompleted;

export const SUBSCRIPTION_CHECKOUT_CATEGORY = 'subscriptionCheckout';
export const subscriptionCheckoutStreamId = (id: string): string => `${SUBSCRIPTION_CHECKOUT_CATEGORY}-${id}`;

/** Stored event type -> webhook event type (SPEC Events > Subscription checkout events). */
export const WEBHOOK_TYPE_BY_EVENT: Readonly<Record<SubscriptionCheckoutEvent['type'], string>> = {
  'SubscriptionCheckoutCreated.v1': 'subscription_checkout.created',
  'SubscriptionCheckoutCancelled.v1': 'subscription_checkout.cancelled',
  'SubscriptionCheckoutExpired.v1': 'subscription_checkout.expired',
  'SubscriptionCheckoutCompleted.v1': 'subscription_checkout.completed',
};
