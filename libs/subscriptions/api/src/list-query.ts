import { type ListQuery, PAGINATION_PARAMETERS, parseListQuery } from '@stablepay/http';
import type { SubscriptionCheckoutStatus } from '@stablepay/subscriptions-domain';
import { CREATED_BOUND_FORMS, parseTimestampParam, validationError } from '@stablepay/util';
import type { SubscriptionCheckoutListFilters } from './subscription-checkouts.port';

const STATUSES: readonly SubscriptionCheckoutStatus[] = ['pending', 'completed', 'cancelled', 'expired'];
const CREATED = {
  'created[gte]': 'createdGte',
  'created[gt]': 'createdGt',
  'created[lte]': 'createdLte',
  'created[lt]': 'createdLt',
} as const;
/** GET /subscription-checkouts's query parameters (any other is refused: QueryParameters). */
export const SUBSCRIPTION_CHECKOUT_LIST_PARAMETERS = [
  ...PAGINATION_PARAMETERS,
  'status',
  'external_customer_id',
  ...Object.keys(CREATED),
];

function single(query: Record<string, unknown>, name: string): string | undefined {
  const v = query[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'string') throw validationError(name, `${name} must be given once.`);
  return v;
}

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
  const status = single(query, 'status');
  if (status !== undefined) {
    if (!(STATUSES as readonly string[]).includes(status))
      throw validationError('status', `status must be one of ${STATUSES.join(', ')}.`);
    filters.status = status as SubscriptionCheckoutStatus;
  }
  const customer = single(query, 'external_customer_id');
  if (customer !== undefined) {
    if (customer.length === 0 || customer.length > 255)
      throw validationError('external_customer_id', 'external_customer_id must be 1 to 255 characters.');
    filters.externalCustomerId = customer;
  }
  for (const [param, field] of Object.entries(CREATED) as Array<
    [keyof typeof CREATED, (typeof CREATED)[keyof typeof CREATED]]
  >) {
    const raw = single(query, param);
    if (raw !== undefined) filters[field] = parseTimestampParam(raw, param, CREATED_BOUND_FORMS);
  }
  return { list, filters };
}
