import { SUBSCRIPTION_CHECKOUT_UPCASTERS } from '@stablepay/subscriptions-domain';

/** Upcasters of every event this scope stores: any process that reads its streams registers them. */
export const SUBSCRIPTIONS_UPCASTERS = SUBSCRIPTION_CHECKOUT_UPCASTERS;
