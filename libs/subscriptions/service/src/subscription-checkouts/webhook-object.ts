import {
  type SubscriptionCheckoutEvent,
  type SubscriptionCheckoutObject,
  WEBHOOK_TYPE_BY_EVENT,
} from '@stablepay/subscriptions-domain';
import type { SubscriptionCheckoutRow } from './subscription-checkout.reader';

/**
 * `data.object` of a `subscription_checkout.*` webhook (SPEC Events > Subscription checkout events): every field
 * of the subscription checkout object, metadata echoed, without `subscription_options` (and without the
 * branding colors, which only API responses echo). Built from a read-model row or from the stored event.
 */
export function subscriptionCheckoutWebhookObject(
  source:
    | Pick<SubscriptionCheckoutRow, 'object'>
    | { readonly data: { readonly object: SubscriptionCheckoutObject } },
): SubscriptionCheckoutObject {
  const o = 'object' in source ? source.object : source.data.object;
  return {
    object: 'subscription_checkout',
    id: o.id,
    status: o.status,
    onchain_id: o.onchain_id,
    business_name: o.business_name,
    subscriber: o.subscriber,
    external_customer_id: o.external_customer_id,
    price: o.price,
    price_currency: o.price_currency,
    period_duration: o.period_duration,
    cap: o.cap,
    budget: o.budget,
    checkout_url: o.checkout_url,
    success_url: o.success_url,
    cancel_url: o.cancel_url,
    return_url: o.return_url,
    metadata: { ...o.metadata },
    supported_chains: [...o.supported_chains],
    expires_at: o.expires_at,
    created_at: o.created_at,
    updated_at: o.updated_at,
    completed_at: o.completed_at,
    cancelled_at: o.cancelled_at,
    expired_at: o.expired_at,
    cancellation_reason: o.cancellation_reason,
  };
}

/**
 * The webhook a stored subscription checkout event becomes: its type (`subscription_checkout.created`, ...) and
 * `data.object`; null for event types that are not delivered. `completed` will also carry `data.subscription`
 * and `data.first_charge` once the subscribe flow records them.
 */
export function subscriptionCheckoutWebhook(event: {
  readonly type: string;
  readonly data: unknown;
}): { type: string; data: { object: SubscriptionCheckoutObject } } | null {
  const type = (WEBHOOK_TYPE_BY_EVENT as Record<string, string | undefined>)[event.type];
  if (type === undefined) return null;
  return { type, data: { object: subscriptionCheckoutWebhookObject(event as SubscriptionCheckoutEvent) } };
}
