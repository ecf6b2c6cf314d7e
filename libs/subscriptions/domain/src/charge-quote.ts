import { cannotProcess, DomainError, validationError } from '@stablepay/util';
import { CHARGE_PREFLIGHT_ERRORS, fiatPayoutRefusal, REFERENCE_QUOTE_TTL_SECONDS } from './charge-preflight';
import { currencyExponent, parseRateValue, type Rate, toTokenUnits } from './rates';
import { parseCurrency } from './rules';

/**
 * SPEC Subscriptions > Quote behavior: `POST /subscriptions/:id/charge-quote`. Pure: the service hands in the plan,
 * the merchant's settlement mode, the live rate (crypto-settled) or the provider's price lock (fiat-settled) and the
 * clock; this decides what is converted and what the merchant signs.
 *
 * - Fiat-priced plan: the plan's fiat price, or an ad-hoc `fiat_amount` of the body (metered usage, add-ons), in the
 *   plan's currency, converted to the subscription's token at the live rate, rounding up (the merchant never receives
 *   less than the fiat amount at that rate).
 * - Token-priced (legacy) plan: the token price itself, or an ad-hoc `fiat_amount` with the `currency` it is in
 *   (crypto-settled only: requireFiatPricedForPriceLock).
 * - Crypto-settled business: a reference quote `refq_...`, valid 120 s, that only proves the charged amount is what
 *   the subscriber was shown. Fiat-settled: the settlement provider's price lock (`price_lock_code`), redeemed at
 *   off-ramp after the charge, valid until the provider's expiry.
 *
 * Either way the merchant signs `quoteHash = keccak256(code)` (signCharge's `quoteCode`), so a signature binds one
 * quote; the charge preflight checks the binding (CHARGE_PREFLIGHT_ERRORS quote_*).
 */
export interface ChargeQuoteRequest {
  /** Ad-hoc fiat amount in minor units (body `fiat_amount`); null: the plan price. */
  readonly fiatAmount: bigint | null;
  /** Body `currency`; required with `fiat_amount` on a token-priced plan, else must be the plan's. */
  readonly currency: string | null;
}

export interface QuotedPlan {
  readonly subscriptionId: string;
  readonly price: string;
  readonly priceCurrency: string | null;
  readonly tokenSymbol: string;
  readonly tokenDecimals: number;
}

/** What to convert: a fiat amount in a currency, or a token amount as is (legacy plan price). */
export type QuoteBasis =
  | { readonly kind: 'fiat'; readonly fiatAmount: bigint; readonly currency: string }
  | { readonly kind: 'token'; readonly tokenAmount: bigint };

export function quoteBasis(plan: QuotedPlan, request: ChargeQuoteRequest): QuoteBasis {
  if (request.fiatAmount !== null && request.fiatAmount <= 0n)
    throw validationError('fiat_amount', 'fiat_amount must be a positive integer string (minor units).');
  const asked = request.currency === null ? null : parseCurrency(request.currency, 'currency');
  if (plan.priceCurrency !== null) {
    if (asked !== null && asked !== plan.priceCurrency)
      throw cannotProcess(
        'currency_mismatch',
        `The plan is priced in ${plan.priceCurrency}; quote an ad-hoc amount in that currency.`,
        'currency',
      );
    return {
      kind: 'fiat',
      fiatAmount: request.fiatAmount ?? BigInt(plan.price),
      currency: plan.priceCurrency,
    };
  }
  if (request.fiatAmount === null) {
    if (asked !== null)
      throw validationError('fiat_amount', 'currency is only meaningful with an ad-hoc fiat_amount.');
    return { kind: 'token', tokenAmount: BigInt(plan.price) };
  }
  if (asked === null)
    throw validationError('currency', 'A token-priced plan needs the currency of an ad-hoc fiat_amount.');
  return { kind: 'fiat', fiatAmount: request.fiatAmount, currency: asked };
}

/** The rate of the subscription's token among what the rates port quoted; 422 when the currency cannot be priced. */
export function rateFor(rates: readonly Rate[], currency: string, tokenSymbol: string): Rate {
  const rate = rates.find((r) => r.tokenSymbol.toUpperCase() === tokenSymbol.toUpperCase());
  if (!rate)
    throw cannotProcess(
      'price_currency_not_quotable',
      `No rate converts ${currency} to ${tokenSymbol} right now.`,
      'currency',
    );
  return rate;
}

/** Token smallest units for a fiat amount at one rate, rounding up (SPEC Rules 4). */
export function convertAtRate(
  fiatAmount: bigint,
  currency: string,
  rate: Rate,
  tokenDecimals: number,
): bigint {
  return toTokenUnits(fiatAmount, parseRateValue(rate.value), tokenDecimals, currencyExponent(currency));
}

/** The largest amount a contract call carries: the charge's `amount` is a uint256. */
export const MAX_TOKEN_AMOUNT = (1n << 256n) - 1n;

/**
 * A converted amount must fit a uint256, or no charge could ever carry it: an ad-hoc `fiat_amount` that large is
 * refused naming it (a 78-digit one answered 500 from the database's overflow; a 77-digit one was issued as a quote
 * no signature could cover).
 */
export function chargeableAmount(amount: bigint, tokenSymbol: string): bigint {
  if (amount > MAX_TOKEN_AMOUNT)
    throw validationError(
      'fiat_amount',
      `fiat_amount is too large: converted to ${tokenSymbol} it exceeds the largest amount a charge can carry (2^256 - 1 smallest units).`,
    );
  return amount;
}

/**
 * SPEC cap and budget rule 1 at quote time: a quote for more than the subscription's cap (as the service knows it)
 * can never be charged (the preflight and the contract refuse it), and for a fiat-settled business it would hold a
 * price lock at the provider for nothing. Refused with the charge's own error (`amount_exceeds_cap`, 422), naming
 * `fiat_amount` when the body gave one (else the plan's price is what exceeds the cap at this rate). The budget is
 * not checked here: the window may roll over before the quote is used.
 */
export function requireQuotableUnderCap(amount: bigint, cap: bigint, fiatAmountGiven: boolean): bigint {
  if (amount <= cap) return amount;
  const { status, type } = CHARGE_PREFLIGHT_ERRORS.amount_exceeds_cap;
  throw new DomainError({
    type,
    status,
    code: 'amount_exceeds_cap',
    message: `The quoted amount ${amount} exceeds cap_amount ${cap}: no charge could carry it.`,
    ...(fiatAmountGiven ? { param: 'fiat_amount' } : {}),
  });
}

/** A reference quote's lifetime (SPEC Limits: 120 seconds). */
export function referenceQuoteExpiry(now: Date): Date {
  return new Date(now.getTime() + REFERENCE_QUOTE_TTL_SECONDS * 1000);
}

/** SPEC: `refq_` prefix for reference quote codes. */
export const REFERENCE_QUOTE_PREFIX = 'refq_';

/** The settlement provider could not lock a price (503: retry). */
export function settlementProviderUnavailable(detail: string): DomainError {
  return new DomainError({
    type: 'api_error',
    status: 503,
    code: 'settlement_provider_unavailable',
    message: `The settlement provider could not lock a price (${detail}); retry shortly.`,
  });
}

/**
 * SPEC Rules 8 held where money is committed, not only at plan creation: a price lock is redeemed at off-ramp into the
 * business's bank account, and the subscribe authorization signs the first charge the provider then pays out. Both
 * read the configuration as it is now, as `PUT /payments/settlement` may have changed it after the plan was created:
 *
 * - removed or emptied: nothing to pay out to, 422 `fiat_settlement_required` (as a checkout of that business is
 *   refused); a charge made anyway would be tracked as a `pending` payout that has no destination;
 * - another currency (e.g. ARS to USD): 422 `currency_mismatch` (SPEC Errors: a fiat-settled business pricing in
 *   another currency). The provider would lock an ARS price for a payout made in USD. The settings change itself
 *   is not refused: SPEC names no such error, and the merchant may move its payouts on purpose (it can switch back,
 *   or sell a plan in the new currency); the plans priced in the old one just stop taking money until then.
 *
 * `param`: the request field that named the currency (an ad-hoc `currency`), none when it is the plan's own.
 */
export function requireFiatPayoutDestination(
  settlement: { readonly complete: boolean; readonly currency: string | null },
  currency: string,
  param?: string,
): void {
  const refusal = fiatPayoutRefusal({ mode: 'fiat', ...settlement }, currency);
  if (refusal)
    throw cannotProcess(
      refusal.code,
      refusal.code === 'fiat_settlement_required'
        ? `${refusal.message}: the business must set it with PUT /payments/settlement first.`
        : `${refusal.message}: nothing is locked or authorized for a payout in another currency than the price (the business can settle in ${currency} again, or offer a plan priced in ${settlement.currency ?? currency}).`,
      refusal.code === 'currency_mismatch' ? param : undefined,
    );
}

/**
 * A fiat-settled business's price lock promises a fiat payout, but only a fiat-priced plan's charges carry fiat fields
 * the ledger settles (SPEC Subscription charges, fiat field rule 1: null on plans that are not fiat-priced). An ad-hoc
 * `fiat_amount` on a token-priced plan would lock a payout that no charge row tracks, no provider is told to pay and
 * no `subscription.charge_settled` announces. Refused before any lock, with SPEC Errors' code for a fiat-settled
 * business pricing in another currency (the plan prices in token units), naming the body's `currency`. A
 * crypto-settled business still gets a reference quote for it: nothing is paid out there.
 */
export function requireFiatPricedForPriceLock(plan: Pick<QuotedPlan, 'priceCurrency' | 'tokenSymbol'>): void {
  if (plan.priceCurrency !== null) return;
  throw cannotProcess(
    'currency_mismatch',
    `The plan is priced in ${plan.tokenSymbol} units, not in the business's settlement currency: its charges are not settled in fiat, so no price lock is taken for an ad-hoc fiat_amount (charge the token amount, or sell a plan priced in the settlement currency).`,
    'currency',
  );
}

/** SPEC Subscriptions > Quote behavior: the response of the charge-quote call (fields ours; docs/openapi.yaml). */
export interface ChargeQuoteObject {
  readonly object: 'subscription_charge_quote';
  /** What the charge call takes as `quote_code` and signCharge as `quoteCode`. */
  readonly quote_code: string;
  readonly kind: 'reference_quote' | 'price_lock';
  /** Fiat-settled only: the provider's price lock (equal to quote_code); null on a reference quote. */
  readonly price_lock_code: string | null;
  readonly subscription_id: string;
  /** Token smallest units to charge (the `amount` to sign). */
  readonly amount: string;
  readonly token_symbol: string;
  readonly token_decimals: number;
  /** The fiat amount converted, minor units; null when a token-priced plan's token price was quoted as is. */
  readonly fiat_amount: string | null;
  readonly fiat_currency: string | null;
  /** Currency major units per whole token used; null without conversion. */
  readonly rate: string | null;
  /** `keccak256(quote_code)`: the quoteHash the signature must carry. */
  readonly quote_hash: string;
  readonly expires_at: string;
  readonly created_at: string;
}
