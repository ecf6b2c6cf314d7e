import { parseAddress, parseChainFilter } from '@stablepay/evm';
import {
  type CreatedBounds,
  CREATED_PARAMETERS,
  parseCreatedBounds,
  requireNoControlCharacters,
  validationError,
} from '@stablepay/util';
import type { SubscriptionStatus } from './subscription.events';

export const SUBSCRIPTION_STATUSES: readonly SubscriptionStatus[] = ['active', 'cancelling', 'cancelled'];

/**
 * Which subscriptions a list (GET /merchants/:merchantId/subscriptions) or an export
 * (GET /reports/subscriptions/export) covers; combined with AND.
 */
export interface SubscriptionListFilters extends CreatedBounds {
  readonly status?: SubscriptionStatus;
  readonly subscriber?: string;
  readonly chain?: string;
  readonly externalCustomerId?: string;
}

/** The filter parameters of the subscriptions list and export (paging aside). */
export const SUBSCRIPTION_FILTER_PARAMETERS: readonly string[] = [
  'status',
  'subscriber',
  'chain',
  'external_customer_id',
  ...CREATED_PARAMETERS,
];

/** The one rule for the subscription filters; unknown parameters are the route's concern. */
export function parseSubscriptionListFilters(
  query: Readonly<Record<string, unknown>>,
): SubscriptionListFilters {
  const one = (name: string): string | undefined => {
    const v = query[name];
    if (v === undefined) return undefined;
    if (typeof v !== 'string' || v.length === 0 || v.length > 255)
      throw validationError(name, `${name} must be given once, 1 to 255 characters.`);
    return v;
  };
  const filters: { -readonly [K in keyof SubscriptionListFilters]: SubscriptionListFilters[K] } = {
    ...parseCreatedBounds(query),
  };
  const status = one('status');
  if (status !== undefined) {
    if (!(SUBSCRIPTION_STATUSES as readonly string[]).includes(status))
      throw validationError('status', `status must be one of ${SUBSCRIPTION_STATUSES.join(', ')}.`);
    filters.status = status as SubscriptionStatus;
  }
  const subscriber = one('subscriber');
  // A mixed-case address with a bad EIP-55 checksum is a typo (400), not a wallet with no subscriptions.
  if (subscriber !== undefined) filters.subscriber = parseAddress(subscriber, 'subscriber');
  const chain = one('chain');
  if (chain !== undefined) filters.chain = parseChainFilter(chain, 'chain');
  const customer = one('external_customer_id');
  // As the create refuses it: no stored id holds a control character, so such a filter is a mistake, not a miss.
  if (customer !== undefined)
    filters.externalCustomerId = requireNoControlCharacters('external_customer_id', customer);
  return filters;
}
