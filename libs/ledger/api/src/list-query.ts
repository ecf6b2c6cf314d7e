import { type ListQuery, parseListQuery } from '@stablepay/http';
import { type ChargeListFilter, parseChargeListFilter } from '@stablepay/ledger-domain';
import { validationError } from '@stablepay/util';

const FILTERS = ['subscription_id', 'subscriber', 'status', 'chain', 'charged_from', 'charged_to'] as const;
const KNOWN = new Set<string>(['limit', 'starting_after', 'ending_before', ...FILTERS]);

/**
 * GET /merchants/:merchantId/charges: SPEC pagination plus the ledger's filters (ledger-domain's
 * parseChargeListFilter). Unknown parameters and repeated filters are refused (400 validation_error naming them).
 */
export function parseChargeListQuery(query: Record<string, unknown>): {
  list: ListQuery;
  filter: ChargeListFilter;
} {
  for (const key of Object.keys(query)) {
    if (!KNOWN.has(key)) throw validationError(key, `Received unknown parameter: ${key}`);
  }
  for (const name of FILTERS) {
    const value = query[name];
    if (value !== undefined && typeof value !== 'string')
      throw validationError(name, `${name} must be given once.`);
  }
  return { list: parseListQuery(query), filter: parseChargeListFilter(query) };
}
