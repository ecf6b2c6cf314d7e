/**
 * Events of the `subscriptionCheckout-<schk_id>` stream (topic `subscriptions.subscription-checkout.v1`).
 *
 * Events record facts: what was decided and when, the minimum that rebuilds the aggregate's state. The API
 * object (and a webhook's `data.object`) is a projection of that state (subscriptionCheckoutObject), never
 * stored in an event. Types are past tense with an explicit version; a changed shape becomes a new version plus
 * an upcaster (subscription-checkout.upcasters.ts) that reads the old one as the new, so every reader, the bus
 * included, only sees the newest version.
 */
import type { SubscriptionChargeSucceededData, SubscriptionCreatedData } from './subscription.events';

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

/** Who cancelled: the merchant (PATCH .../cancel) or the customer (the hosted page's dismiss). */
export type CancelledBy = 'merchant' | 'customer';

/**
 * The decided inputs of a creation (defaults applied, values normalised) and what the service derived for it
 * (ids, urls, the expiry instant). Amounts are integer strings in minor units of `priceCurrency`.
 */
export interface SubscriptionCheckoutCreatedData {
  readonly id: string;
  readonly onchainId: string;
  /** The merchant's business name when the intent was created (the object keeps showing that name). */
  readonly businessName: string;
  readonly checkoutUrl: string;
  readonly price: string;
  readonly priceCurrency: string | null;
  readonly cap: string;
  readonly budget: string;
  readonly periodDuration: number;
  readonly supportedChains: readonly string[];
  readonly metadata: Readonly<Record<string, string>>;
  readonly externalCustomerId: string | null;
  readonly successUrl: string | null;
  readonly cancelUrl: string | null;
  readonly returnUrl: string | null;
  readonly expiresAt: string;
  readonly createdAt: string;
}

export type SubscriptionCheckoutCreated = {
  type: 'SubscriptionCheckoutCreated.v2';
  data: SubscriptionCheckoutCreatedData;
};

export type SubscriptionCheckoutCancelled = {
  type: 'SubscriptionCheckoutCancelled.v2';
  data: { by: CancelledBy; cancelledAt: string };
};

export type SubscriptionCheckoutExpired = {
  type: 'SubscriptionCheckoutExpired.v2';
  data: { expiredAt: string };
};

/** The v2 completion (stored by earlier releases; read as v3 through the upcaster, without the chain facts). */
export type SubscriptionCheckoutCompletedV2 = {
  type: 'SubscriptionCheckoutCompleted.v2';
  data: { subscriber: string; chain: string; asset: string; txHash: string | null; completedAt: string };
};

/**
 * Recorded by the on-chain subscribe flow once the subscribe transaction and its first charge are recorded on the
 * subscription. May follow cancelled or expired: on-chain truth wins (SPEC States > Subscription checkout). v3 adds
 * the chain facts the completion rests on (the subscription's creation and first charge, as the Subscription
 * aggregate recorded them), from which `data.subscription` and `data.first_charge` of the webhook are projected.
 */
export type SubscriptionCheckoutCompleted = {
  type: 'SubscriptionCheckoutCompleted.v3';
  data: SubscriptionCheckoutCompletedV2['data'] & {
    readonly subscription: SubscriptionCreatedData | null;
    readonly firstCharge: SubscriptionChargeSucceededData | null;
  };
};

/**
 * A chain reorg took out the subscribe transaction the completion rested on (the indexer retracted its
 * SubscriptionCreated): no subscription and no first charge on chain, so the intent is back in the status it had
 * before that completion (pending, or cancelled/expired for a late completion), as if the subscribe never confirmed
 * (SPEC: "the intent never becomes completed without a confirmed first charge"). The same transaction re-included
 * completes it again (docs/subscription-checkouts.md, Reorgs).
 */
export type SubscriptionCheckoutCompletionRetracted = {
  type: 'SubscriptionCheckoutCompletionRetracted.v1';
  data: { txHash: string; retractedAt: string };
};

export type SubscriptionCheckoutEvent =
  | SubscriptionCheckoutCreated
  | SubscriptionCheckoutCancelled
  | SubscriptionCheckoutExpired
  | SubscriptionCheckoutCompleted
  | SubscriptionCheckoutCompletionRetracted;

export const SUBSCRIPTION_CHECKOUT_CATEGORY = 'subscriptionCheckout';
export const subscriptionCheckoutStreamId = (id: string): string => `${SUBSCRIPTION_CHECKOUT_CATEGORY}-${id}`;

/** Stored event type -> webhook event type (SPEC Events > Subscription checkout events). */
export const WEBHOOK_TYPE_BY_EVENT: Readonly<Record<SubscriptionCheckoutEvent['type'], string>> = {
  'SubscriptionCheckoutCreated.v2': 'subscription_checkout.created',
  'SubscriptionCheckoutCancelled.v2': 'subscription_checkout.cancelled',
  'SubscriptionCheckoutExpired.v2': 'subscription_checkout.expired',
  'SubscriptionCheckoutCompleted.v3': 'subscription_checkout.completed',
  // Ours, like subscription.reorged: the completion announced earlier is undone.
  'SubscriptionCheckoutCompletionRetracted.v1': 'subscription_checkout.reorged',
};
