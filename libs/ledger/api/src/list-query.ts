import { type ListQuery, PAGINATION_PARAMETERS, parseListQuery } from '@stablepay/http';
import { type ChargeListFilter, parseChargeListFilter } from '@stablepay/ledger-domain';
import { validationError } from '@stablepay/util';

const FILTERS = ['subscription_id', 'subscriber', 'status', 'chain', 'charged_from', 'charged_to'] as const;
/** GET /merchants/:merchantId/charges's query parameters (any other is refused: QueryParameters). */
export const CHARGE_LIST_PARAMETERS = [...PAGINATION_PARAMETERS, ...FILTERS];

/**
 * GET /merchants/:merchantId/charges: SPEC pagination plus the ledger's filters (ledger-domain's
 * parseChargeListFilter). Repeated filters are refused (400 validation_error naming them).
 */
export function parseChargeListQuery(query: Record<string, unknown>): {
  list: ListQuery;
  filter: ChargeListFilter;
} {
  for (const name of FILTERS) {
    const value = query[name];
    if (value !== undefined && typeof value !== 'string')
      throw validationError(name, `${name} must be given once.`);
  }
  return { list: parseListQuery(query), filter: parseChargeListFilter(query) };
}
