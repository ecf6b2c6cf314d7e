import { parseAddress } from '@stablepay/evm';
import { type ListQuery, PAGINATION_PARAMETERS, parseListQuery } from '@stablepay/http';
import type { CheckoutStatus, PaymentStatus } from '@stablepay/payments-domain';
import { CREATED_BOUND_FORMS, parseTimestampParam, validationError } from '@stablepay/util';
import type { CheckoutListFilters, CreatedBounds, PaymentListFilters } from './payments.port';

export const CHECKOUT_STATUSES: readonly CheckoutStatus[] = ['pending', 'paid', 'cancelled', 'expired'];
export const PAYMENT_STATUSES: readonly PaymentStatus[] = [
  'pending',
  'settled',
  'escrow_confirmed',
  'refunded',
  'cancelled',
  'expired',
  'failed',
  'flagged',
  'screening_pending',
  'recoverable',
];
export const CHECKOUT_ID = /^chk_[0-9a-z]{26}$/;
export const PAYMENT_ID = /^pay_[0-9a-z]{26}$/;

const CREATED = {
  'created[gte]': 'createdGte',
  'created[gt]': 'createdGt',
  'created[lte]': 'createdLte',
  'created[lt]': 'createdLt',
} as const;
/** GET /checkouts's query parameters (any other is refused: QueryParameters). */
export const CHECKOUT_LIST_PARAMETERS = [
  ...PAGINATION_PARAMETERS,
  'status',
  'payment_id',
  ...Object.keys(CREATED),
];
/** GET /payments's query parameters (any other is refused: QueryParameters). */
export const PAYMENT_LIST_PARAMETERS = [
  ...PAGINATION_PARAMETERS,
  'status',
  'method',
  'checkout_id',
  'deposit_address',
  'detected_chain',
  ...Object.keys(CREATED),
];

function single(query: Record<string, unknown>, name: string): string | undefined {
  const v = query[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'string') throw validationError(name, `${name} must be given once.`);
  return v;
}

function createdBounds(query: Record<string, unknown>): CreatedBounds {
  const out: { -readonly [K in keyof CreatedBounds]: CreatedBounds[K] } = {};
  for (const [param, field] of Object.entries(CREATED) as Array<
    [keyof typeof CREATED, (typeof CREATED)[keyof typeof CREATED]]
  >) {
    const raw = single(query, param);
    if (raw !== undefined) out[field] = parseTimestampParam(raw, param, CREATED_BOUND_FORMS);
  }
  return out;
}

function oneOf<T extends string>(
  query: Record<string, unknown>,
  name: string,
  values: readonly T[],
): T | undefined {
  const raw = single(query, name);
  if (raw === undefined) return undefined;
  if (!(values as readonly string[]).includes(raw))
    throw validationError(name, `${name} must be one of ${values.join(', ')}.`);
  return raw as T;
}

function matching(
  query: Record<string, unknown>,
  name: string,
  pattern: RegExp,
  what: string,
): string | undefined {
  const raw = single(query, name);
  if (raw === undefined) return undefined;
  if (!pattern.test(raw)) throw validationError(name, `${name} must be ${what}.`);
  return raw;
}

/** GET /checkouts: SPEC pagination plus `status`, `payment_id` and `created[gte|gt|lte|lt]`. */
export function parseCheckoutListQuery(query: Record<string, unknown>): {
  list: ListQuery;
  filters: CheckoutListFilters;
} {
  const list = parseListQuery(query);
  const status = oneOf(query, 'status', CHECKOUT_STATUSES);
  const paymentId = matching(query, 'payment_id', PAYMENT_ID, 'a payment id (pay_...)');
  return {
    list,
    filters: {
      ...createdBounds(query),
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
  const status = oneOf(query, 'status', PAYMENT_STATUSES);
  const method = oneOf(query, 'method', ['DIRECT', 'TWO_STEP'] as const);
  const checkoutId = matching(query, 'checkout_id', CHECKOUT_ID, 'a checkout id (chk_...)');
  // A mixed-case address with a bad EIP-55 checksum is a typo (400), not an address with no payments.
  const deposit = single(query, 'deposit_address');
  const depositAddress =
    deposit === undefined ? undefined : parseAddress(deposit, 'deposit_address').toLowerCase();
  const detectedChain = matching(
    query,
    'detected_chain',
    /^eip155:[1-9][0-9]{0,19}$/,
    'a CAIP-2 chain id such as eip155:8453',
  );
  return {
    list,
    filters: {
      ...createdBounds(query),
      ...(status ? { status } : {}),
      ...(method ? { method } : {}),
      ...(checkoutId ? { checkoutId } : {}),
      ...(depositAddress ? { depositAddress } : {}),
      ...(detectedChain ? { detectedChain } : {}),
    },
  };
}
