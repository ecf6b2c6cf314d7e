import { type ListQuery, PAGINATION_PARAMETERS, parseListQuery } from '@stablepay/http';
import type { SubscriptionCheckoutStatus } from '@stablepay/subscriptions-domain';
import { validationError } from '@stablepay/util';
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
const ISO = /^\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:\d{2}))?$/;

function single(query: Record<string, unknown>, name: string): string | undefined {
  const v = query[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'string') throw validationError(name, `${name} must be given once.`);
  return v;
}

/** A created bound: Unix seconds or an ISO 8601 date / date-time (a date alone is midnight UTC). */
export function parseTimestamp(value: string, param: string): Date {
  if (/^[0-9]{1,11}$/.test(value)) return new Date(Number(value) * 1000);
  const ms = ISO.test(value) ? Date.parse(value.length === 10 ? `${value}T00:00:00Z` : value) : NaN;
  if (Number.isNaN(ms))
    throw validationError(
      param,
      `${param} must be Unix seconds or an ISO 8601 timestamp (for example 2026-06-01T00:00:00Z).`,
    );
  return new Date(ms);
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
    if (raw !== undefined) filters[field] = parseTimestamp(raw, param);
  }
  return { list, filters };
}
