import { DomainError } from '@stablepay/util';

/**
 * The answer to the older listing's subscription paths (SPEC: `POST /subscriptions`, `GET /subscriptions[/:id]`,
 * `POST /subscriptions/:id/cancel` under `{payments_base_url}`), which conflict with the current model: a
 * subscription is created only by a customer through a subscription checkout. One answer wherever a client of that
 * listing may call them (the payment-request prefix, the main surface), naming the routes to use instead.
 */
export function subscriptionsUseSubscriptionCheckouts(): DomainError {
  return new DomainError({
    type: 'invalid_request',
    status: 410,
    code: 'subscriptions_use_subscription_checkouts',
    message:
      'Subscriptions are not created or listed on this path. Create a subscription checkout with POST /subscription-checkouts and send the customer to its checkout_url (the subscription is created when the customer subscribes on chain); read a subscription with GET /subscriptions/:id, list them with GET /merchants/:merchantId/subscriptions, cancel with POST /subscriptions/:id/cancel (signed).',
  });
}
