import { type ListQuery, PAGINATION_PARAMETERS, parseListQuery } from '@stablepay/http';
import {
  BENEFICIARY_ID,
  CUSTOMER_ID,
  type CustomerStatus,
  type PayoutStatus,
} from '@stablepay/payouts-domain';
import { validationError } from '@stablepay/util';
import type { CustomerListFilters, PayoutListFilters } from './payouts.port';

const CUSTOMER_STATUSES: readonly CustomerStatus[] = [
  'kyc_pending',
  'action_required',
  'active',
  'kyc_failed',
  'suspended',
];
const PAYOUT_STATUSES: readonly PayoutStatus[] = [
  'awaiting_deposit',
  'deposit_detected',
  'forwarded',
  'completed',
  'failed',
  'refunded',
];

/** GET /customers's query parameters (any other is refused). */
export const CUSTOMER_LIST_PARAMETERS = [...PAGINATION_PARAMETERS, 'status', 'email'];
export const BENEFICIARY_LIST_PARAMETERS = [...PAGINATION_PARAMETERS];
export const PAYOUT_LIST_PARAMETERS = [...PAGINATION_PARAMETERS, 'status', 'customer', 'beneficiary'];

function single(query: Record<string, unknown>, name: string): string | undefined {
  const v = query[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'string') throw validationError(name, `${name} must be given once.`);
  return v;
}

function oneOf<T extends string>(
  value: string | undefined,
  name: string,
  allowed: readonly T[],
): T | undefined {
  if (value === undefined) return undefined;
  if (!(allowed as readonly string[]).includes(value))
    throw validationError(name, `${name} must be one of ${allowed.join(', ')}.`);
  return value as T;
}

/** The payouts lists page like every list (SPEC Pagination) and add their own filters (docs/payouts.md). */
export function parseCustomerListQuery(query: Record<string, unknown>): {
  list: ListQuery;
  filters: CustomerListFilters;
} {
  const status = oneOf(single(query, 'status'), 'status', CUSTOMER_STATUSES);
  const email = single(query, 'email')?.toLowerCase();
  return {
    list: parseListQuery(query),
    filters: { ...(status ? { status } : {}), ...(email !== undefined ? { email } : {}) },
  };
}

export function parsePayoutListQuery(query: Record<string, unknown>): {
  list: ListQuery;
  filters: PayoutListFilters;
} {
  const status = oneOf(single(query, 'status'), 'status', PAYOUT_STATUSES);
  const customer = single(query, 'customer');
  if (customer !== undefined && !CUSTOMER_ID.test(customer))
    throw validationError('customer', 'customer must be a customer id (cus_...).');
  const beneficiary = single(query, 'beneficiary');
  if (beneficiary !== undefined && !BENEFICIARY_ID.test(beneficiary))
    throw validationError('beneficiary', 'beneficiary must be a beneficiary id (bnf_...).');
  return {
    list: parseListQuery(query),
    filters: {
      ...(status ? { status } : {}),
      ...(customer !== undefined ? { customer } : {}),
      ...(beneficiary !== undefined ? { beneficiary } : {}),
    },
  };
}
