import { type ListQuery, PAGINATION_PARAMETERS, parseListQuery } from '@stablepay/http';
import type { SubscriptionCheckoutStatus } from '@stablepay/subscriptions-domain';
import {
  CREATED_PARAMETERS,
  parseCreatedBounds,
  requireNoControlCharacters,
  singleParameter,
  validationError,
} from '@stablepay/util';
import type { SubscriptionCheckoutListFilters } from './subscription-checkouts.port';

const STATUSES: readonly SubscriptionCheckoutStatus[] = ['pending', 'completed', 'cancelled', 'expired'];
/** GET /subscription-checkouts's query parameters (any other is refused: QueryParameters). */
export const SUBSCRIPTION_CHECKOUT_LIST_PARAMETERS = [
  ...PAGINATION_PARAMETERS,
  'status',
  'external_customer_id',
  ...CREATED_PARAMETERS,
];

/**
 * GET /subscription-checkouts: SPEC pagination (`limit`, `starting_after`, `ending_before`) plus the filters
 * `status`, `external_customer_id` and `created[gte|gt|lte|lt]`.
 */
export function parseSubscriptionCheckoutListQuery(query: Record<string, unknown>): {
  list: ListQuery;
  filters: SubscriptionCheckoutListFilters;
} {
  const list = parseListQuery(query);
  const filters: {
    -readonly [K in keyof SubscriptionCheckoutListFilters]: SubscriptionCheckoutListFilters[K];
  } = {};
  const status = singleParameter(query, 'status');
  if (status !== undefined) {
    if (!(STATUSES as readonly string[]).includes(status))
      throw validationError('status', `status must be one of ${STATUSES.join(', ')}.`);
    filters.status = status as SubscriptionCheckoutStatus;
  }
  const customer = singleParameter(query, 'external_customer_id');
  if (customer !== undefined) {
    if (customer.length === 0 || customer.length > 255)
      throw validationError('external_customer_id', 'external_customer_id must be 1 to 255 characters.');
    // As the create refuses it: no stored id holds a control character, so such a filter is a mistake, not a miss.
    filters.externalCustomerId = requireNoControlCharacters('external_customer_id', customer);
  }
  Object.assign(filters, parseCreatedBounds(query));
  return { list, filters };
}
