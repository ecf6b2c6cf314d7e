import {
  checkoutReorgedWebhookExtras,
  completedCheckoutWebhookExtras,
  foldSubscriptionCheckout,
  type SubscriptionCheckoutCompleted,
  type SubscriptionCheckoutCompletionRetracted,
  SUBSCRIPTION_CHECKOUT_CATEGORY,
  type SubscriptionCheckoutEvent,
  type SubscriptionCheckoutObject,
  subscriptionCheckoutObject,
  WEBHOOK_TYPE_BY_EVENT,
} from '@stablepay/subscriptions-domain';
import { topicForCategory } from '@stablepay/event-bus';
import type { SubscriptionCheckoutRow } from './subscription-checkout.reader';
import { SUBSCRIPTIONS_UPCASTERS } from '../upcasters';

interface StoredEvent {
  readonly type: string;
  readonly data: unknown;
}

/**
 * The subscription checkout object as of the last of `history` (a stream's events from its first up to one
 * event, newest versions): the projection of the state they fold to. The read model and the webhooks both use
 * it, so a webhook's `data.object` is what the API showed right after that event, on every redelivery alike.
 */
export function subscriptionCheckoutObjectAsOf(history: readonly StoredEvent[]): SubscriptionCheckoutObject {
  const { checkout } = foldSubscriptionCheckout(history as readonly SubscriptionCheckoutEvent[]);
  if (!checkout) throw new Error('a subscription checkout stream must start with its creation');
  return subscriptionCheckoutObject(checkout);
}

/**
 * The object of a read-model row (the projection stored subscriptionCheckoutObjectAsOf its revision): every field
 * of the subscription checkout object, metadata echoed, without `subscription_options` (and without the branding
 * colors, which only API responses echo): exactly what a webhook of that revision shows as `data.object`.
 */
export function subscriptionCheckoutWebhookObject(
  row: Pick<SubscriptionCheckoutRow, 'object'>,
): SubscriptionCheckoutObject {
  const o = row.object;
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
 * The webhook a stored subscription checkout event becomes (SPEC Events > Subscription checkout events): its type
 * (`subscription_checkout.created`, ...) and `data.object` as of that event (every field of the object, metadata
 * echoed, no `subscription_options`); null for event types that are not delivered. `history` is the stream up to
 * and including `event`. `completed` also carries `data.subscription` and `data.first_charge`.
 */
export function subscriptionCheckoutWebhook(
  event: StoredEvent,
  history: readonly StoredEvent[],
): { type: string; data: { object: SubscriptionCheckoutObject } & Record<string, unknown> } | null {
  const type = (WEBHOOK_TYPE_BY_EVENT as Record<string, string | undefined>)[event.type];
  if (type === undefined) return null;
  const last = history.at(-1);
  if (last?.type !== event.type)
    throw new Error(`history of ${event.type} must end with that event, not ${last?.type ?? 'nothing'}`);
  const object = subscriptionCheckoutObjectAsOf(history);
  if (event.type === 'SubscriptionCheckoutCompletionRetracted.v1') {
    const d = event.data as SubscriptionCheckoutCompletionRetracted['data'];
    return { type, data: { object, ...checkoutReorgedWebhookExtras(d.txHash) } };
  }
  if (event.type === 'SubscriptionCheckoutCompleted.v3') {
    // The subscription and its first charge as the completion recorded them (absent on v2 completions).
    const d = event.data as SubscriptionCheckoutCompleted['data'];
    if (d.subscription && d.firstCharge)
      return { type, data: { object, ...completedCheckoutWebhookExtras(d.subscription, d.firstCharge) } };
  }
  return { type, data: { object } };
}

/**
 * What the composition roots register with `domainEventSource` (apps/webhook-dispatch, the embedded launcher):
 * the mapping reads the stream up to each event, and the process's store reads v1 events through our upcasters.
 */
export const SUBSCRIPTION_CHECKOUT_WEBHOOK_SOURCE = {
  name: 'subscription-checkouts',
  topic: topicForCategory(SUBSCRIPTION_CHECKOUT_CATEGORY),
  map: subscriptionCheckoutWebhook,
  withHistory: true,
  upcasters: SUBSCRIPTIONS_UPCASTERS,
} as const;
