import type { Upcaster } from '@stablepay/event-store';

/**
 * Upcasters of every event this scope stores (any process that reads payment streams registers them). Every
 * payment event is still at its first version; a changed shape adds its `{ from, to, upcast }` here, written in
 * libs/payments/domain with a frozen old payload, as the subscriptions scope does.
 */
export const PAYMENTS_UPCASTERS: readonly Upcaster[] = [];
