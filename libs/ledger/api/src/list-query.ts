import { type ListQuery, PAGINATION_PARAMETERS, parseListQuery } from '@stablepay/http';
import {
  CHARGE_FILTER_PARAMETERS,
  type ChargeListFilter,
  parseChargeListFilter,
} from '@stablepay/ledger-domain';

/** GET /merchants/:merchantId/charges's query parameters (any other is refused: QueryParameters). */
export const CHARGE_LIST_PARAMETERS = [...PAGINATION_PARAMETERS, ...CHARGE_FILTER_PARAMETERS];

/**
 * GET /merchants/:merchantId/charges: SPEC pagination plus the ledger's filters (ledger-domain's
 * parseChargeListFilter, which also refuses repeated filters with 400 validation_error naming them).
 */
export function parseChargeListQuery(query: Record<string, unknown>): {
  list: ListQuery;
  filter: ChargeListFilter;
} {
  return { list: parseListQuery(query), filter: parseChargeListFilter(query) };
}
