import { type ListQuery, PAGINATION_PARAMETERS, parseListQuery } from '@stablepay/http';
import {
  type CheckoutStatus,
  PAYMENT_FILTER_PARAMETERS,
  PAYMENT_ID,
  parsePaymentListFilters,
} from '@stablepay/payments-domain';
import { CREATED_PARAMETERS, matchingParameter, oneOfParameter, parseCreatedBounds } from '@stablepay/util';
import type { CheckoutListFilters, PaymentListFilters, SettlementExposureListFilters } from './payments.port';

export { CHECKOUT_ID, PAYMENT_ID, PAYMENT_STATUSES } from '@stablepay/payments-domain';
export const CHECKOUT_STATUSES: readonly CheckoutStatus[] = [
  'pending',
  'paid',
  'cancelled',
  'expired',
  'failed',
];

/** GET /checkouts's query parameters (any other is refused: QueryParameters). */
export const CHECKOUT_LIST_PARAMETERS = [
  ...PAGINATION_PARAMETERS,
  'status',
  'payment_id',
  ...CREATED_PARAMETERS,
];
/** GET /payments's query parameters (any other is refused: QueryParameters). */
export const PAYMENT_LIST_PARAMETERS = [...PAGINATION_PARAMETERS, ...PAYMENT_FILTER_PARAMETERS];

/** GET /checkouts: SPEC pagination plus `status`, `payment_id` and `created[gte|gt|lte|lt]`. */
export function parseCheckoutListQuery(query: Record<string, unknown>): {
  list: ListQuery;
  filters: CheckoutListFilters;
} {
  const list = parseListQuery(query);
  const status = oneOfParameter(query, 'status', CHECKOUT_STATUSES);
  const paymentId = matchingParameter(query, 'payment_id', PAYMENT_ID, 'a payment id (pay_...)');
  return {
    list,
    filters: {
      ...parseCreatedBounds(query),
      ...(status ? { status } : {}),
      ...(paymentId ? { paymentId } : {}),
    },
  };
}

/**
 * GET /payments: SPEC pagination plus `status`, `method`, `checkout_id`, `deposit_address`, `detected_chain` and
 * `created[gte|gt|lte|lt]`.
 */
export function parsePaymentListQuery(query: Record<string, unknown>): {
  list: ListQuery;
  filters: PaymentListFilters;
} {
  const list = parseListQuery(query);
  return { list, filters: parsePaymentListFilters(query) };
}

/** GET /admin/settlement-exposures's query parameters (any other is refused: QueryParameters). */
export const SETTLEMENT_EXPOSURE_LIST_PARAMETERS = [...PAGINATION_PARAMETERS, 'mode'];

/** GET /admin/settlement-exposures: SPEC pagination plus `mode` (test or live). */
export function parseSettlementExposureListQuery(query: Record<string, unknown>): {
  list: ListQuery;
  filters: SettlementExposureListFilters;
} {
  const list = parseListQuery(query);
  const mode = oneOfParameter(query, 'mode', ['test', 'live'] as const);
  return { list, filters: mode ? { mode } : {} };
}
