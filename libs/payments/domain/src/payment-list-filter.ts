import { parseAddress, parseChainFilter } from '@stablepay/evm';
import {
  type CreatedBounds,
  CREATED_PARAMETERS,
  matchingParameter,
  oneOfParameter,
  parseCreatedBounds,
  singleParameter,
} from '@stablepay/util';
import type { PaymentStatus } from './payment';

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

/** Which payments a list (GET /payments) or an export (GET /reports/payments/export) covers. */
export interface PaymentListFilters extends CreatedBounds {
  readonly status?: PaymentStatus;
  readonly method?: 'DIRECT' | 'TWO_STEP';
  readonly checkoutId?: string;
  readonly depositAddress?: string;
  readonly detectedChain?: string;
}

/** The filter parameters of GET /payments and GET /reports/payments/export (paging aside). */
export const PAYMENT_FILTER_PARAMETERS: readonly string[] = [
  'status',
  'method',
  'checkout_id',
  'deposit_address',
  'detected_chain',
  ...CREATED_PARAMETERS,
];

/**
 * The payment filters: `status`, `method`, `checkout_id`, `deposit_address`, `detected_chain` and
 * `created[gte|gt|lte|lt]` (the one rule for the list and the export; unknown parameters are the route's concern).
 */
export function parsePaymentListFilters(query: Readonly<Record<string, unknown>>): PaymentListFilters {
  const status = oneOfParameter(query, 'status', PAYMENT_STATUSES);
  const method = oneOfParameter(query, 'method', ['DIRECT', 'TWO_STEP'] as const);
  const checkoutId = matchingParameter(query, 'checkout_id', CHECKOUT_ID, 'a checkout id (chk_...)');
  // A mixed-case address with a bad EIP-55 checksum is a typo (400), not an address with no payments.
  const deposit = singleParameter(query, 'deposit_address');
  const depositAddress =
    deposit === undefined ? undefined : parseAddress(deposit, 'deposit_address').toLowerCase();
  const chain = singleParameter(query, 'detected_chain');
  const detectedChain = chain === undefined ? undefined : parseChainFilter(chain, 'detected_chain');
  return {
    ...parseCreatedBounds(query),
    ...(status ? { status } : {}),
    ...(method ? { method } : {}),
    ...(checkoutId ? { checkoutId } : {}),
    ...(depositAddress ? { depositAddress } : {}),
    ...(detectedChain ? { detectedChain } : {}),
  };
}
