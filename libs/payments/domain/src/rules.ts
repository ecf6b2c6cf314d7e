import { parseCaip2 } from '@stablepay/evm';
import {
  DomainError,
  HOUR,
  MINUTE,
  DAY,
  cannotProcess,
  parseIsoCurrency,
  REQUEST_FIELD_LIMITS,
  validationError,
} from '@stablepay/util';
import type { AcceptedAsset, PaymentMethod } from './payment.events';

// One rule for every create call's free-form fields (shared with the other scopes).
export { parseMetadata, parseRedirectUrl } from '@stablepay/util';

/** SPEC Limits where they apply, and the limits this service adds where SPEC is silent (docs/payments.md). */
export const CHECKOUT_LIMITS = {
  /** SPEC Conventions: the order `amount` is a canonical 6-decimal integer string. */
  orderAmountDecimals: 6,
  /** Ours: at most 24 digits (10^18 currency units; far beyond any order, far inside uint256 at 18 decimals). */
  maxAmountDigits: 24,
  /** Ours: a checkout lives 1 hour unless told; 5 minutes to 24 hours (a transfer needs time to confirm). */
  defaultExpiresInSeconds: HOUR / 1000,
  minExpiresInSeconds: (5 * MINUTE) / 1000,
  maxExpiresInSeconds: DAY / 1000,
  /** TWO_STEP authorization period: the contract bounds it to 1 hour..30 days; ours defaults to 7 days. */
  defaultAuthorizationSeconds: (7 * DAY) / 1000,
  minAuthorizationSeconds: HOUR / 1000,
  maxAuthorizationSeconds: (30 * DAY) / 1000,
  /**
   * Ours: funding under this share of the order's token amount (basis points; at least one smallest unit) is dust
   * to configure (and to the hosted page, which does not say "confirming" for it). A deposit address is public: one
   * unit sent by anyone froze the merchant's configure until expiry. A share, not a fixed figure: a griefer must lock up (and may lose) a part of every order
   * it blocks, while a payer's real partial payment, wallet-fee underpayment or test transfer of any size worth
   * stopping for is above it.
   */
  dustShareBasisPoints: 100,
  /** SPEC: metadata values at most 500 characters; ours: at most 50 keys of 1-40 characters. */
  maxMetadataValueLength: REQUEST_FIELD_LIMITS.maxMetadataValueLength,
  maxMetadataKeys: REQUEST_FIELD_LIMITS.maxMetadataKeys,
  maxMetadataKeyLength: REQUEST_FIELD_LIMITS.maxMetadataKeyLength,
  maxUrlLength: REQUEST_FIELD_LIMITS.maxUrlLength,
} as const;

/**
 * Order amount (6-decimal units of a currency) -> smallest units of a stablecoin pegged 1:1 to that currency.
 *
 * Integer bigint math only. A token with d >= 6 decimals scales up exactly (USDC/USDT 6: unchanged; DAI 18:
 * times 10^12). A token with fewer decimals rounds UP, so the merchant never receives less than the order.
 */
export function orderAmountToTokenUnits(amount: bigint, tokenDecimals: number): bigint {
  if (!Number.isInteger(tokenDecimals) || tokenDecimals < 0 || tokenDecimals > 36) {
    throw new RangeError(`token decimals out of range: ${tokenDecimals}`);
  }
  if (amount < 0n) throw new RangeError('amount must be non-negative');
  const shift = tokenDecimals - CHECKOUT_LIMITS.orderAmountDecimals;
  if (shift >= 0) return amount * 10n ** BigInt(shift);
  const divisor = 10n ** BigInt(-shift);
  return (amount + divisor - 1n) / divisor;
}

/** Smallest units -> a human-readable decimal string without trailing zeros ("1.5", "10", "0.000001"). */
export function formatTokenAmount(units: bigint, decimals: number): string {
  if (decimals === 0) return units.toString();
  const negative = units < 0n;
  const digits = (negative ? -units : units).toString().padStart(decimals + 1, '0');
  const whole = digits.slice(0, digits.length - decimals);
  const fraction = digits.slice(digits.length - decimals).replace(/0+$/, '');
  return `${negative ? '-' : ''}${whole}${fraction ? `.${fraction}` : ''}`;
}

const CANONICAL_DIGITS = /^(0|[1-9][0-9]*)$/;

export function parseOrderAmount(value: unknown): bigint {
  if (value === undefined || value === null) {
    throw validationError(
      'amount',
      'amount is required: the order value as a 6-decimal integer string ("12500000" for 12.50).',
    );
  }
  // The shape first, then the length: an over-long string of digits is told it is too long, not that it has a
  // sign or a leading zero.
  if (typeof value !== 'string' || !CANONICAL_DIGITS.test(value)) {
    throw validationError(
      'amount',
      'amount must be a string of digits holding the order value with 6 implied decimals ("12500000" for 12.50), with no sign, decimal point, separator or leading zero.',
    );
  }
  if (value.length > CHECKOUT_LIMITS.maxAmountDigits) {
    throw validationError('amount', `amount must have at most ${CHECKOUT_LIMITS.maxAmountDigits} digits.`);
  }
  const amount = BigInt(value);
  if (amount === 0n) throw validationError('amount', 'amount must be greater than 0.');
  return amount;
}

export function parseCurrency(value: unknown): string {
  if (value === undefined || value === null) {
    throw validationError(
      'currency',
      'currency is required: a three-letter ISO-4217 code (for example USD).',
    );
  }
  return parseIsoCurrency(value, 'currency', 'USD');
}

export function parseMethod(value: unknown): PaymentMethod {
  if (value === undefined || value === null) return 'DIRECT';
  if (value !== 'DIRECT' && value !== 'TWO_STEP') {
    throw validationError('method', 'method must be DIRECT or TWO_STEP.');
  }
  return value;
}

export function parseSeconds(
  value: unknown,
  param: string,
  min: number,
  max: number,
  fallback: number,
): number {
  if (value === undefined || value === null) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value)) {
    throw validationError(param, `${param} must be an integer number of seconds.`);
  }
  if (value < min || value > max) {
    throw validationError(param, `${param} must be between ${min} and ${max} seconds.`);
  }
  return value;
}

/** A stablecoin the service supports on a chain, with the fiat currency it is pegged to 1:1. */
export interface SupportedStablecoin {
  readonly asset: string;
  readonly chain: string;
  readonly symbol: string;
  readonly decimals: number;
  readonly pegCurrency: string;
}

/** Optional list of distinct strings; omitted means "all". */
function parseList(value: unknown, param: string, what: string): string[] | null {
  if (value === undefined || value === null) return null;
  if (!Array.isArray(value) || value.some((v) => typeof v !== 'string')) {
    throw validationError(param, `${param} must be an array of ${what}.`);
  }
  if (value.length === 0)
    throw validationError(param, `${param} must name at least one ${what.replace(/s$/, '')}.`);
  const seen = new Set<string>();
  for (const v of value as string[]) {
    if (seen.has(v)) throw validationError(param, `${param}: ${v} is listed twice.`, 'duplicate_value');
    seen.add(v);
  }
  return value as string[];
}

/**
 * accepted_chains (CAIP-2) x accepted_tokens (symbols) over the stablecoins pegged to `currency`. Each named chain
 * and token must be supported; the intersection must not be empty.
 */
export function resolveAcceptedAssets(
  chainsInput: unknown,
  tokensInput: unknown,
  currency: string,
  orderAmount: bigint,
  supported: readonly SupportedStablecoin[],
): AcceptedAsset[] {
  const pegged = supported.filter((s) => s.pegCurrency === currency);
  if (pegged.length === 0) {
    throw cannotProcess(
      'currency_not_supported',
      `No supported stablecoin is pegged to ${currency}; one-time payments accept ${[...new Set(supported.map((s) => s.pegCurrency))].join(', ') || 'no currency'}.`,
      'currency',
    );
  }
  const chains = parseList(chainsInput, 'accepted_chains', 'CAIP-2 chain ids');
  const canonicalChains = chains?.map((c) => {
    try {
      return parseCaip2(c, 'accepted_chains').caip2;
    } catch (error) {
      if (error instanceof DomainError) {
        throw validationError('accepted_chains', `accepted_chains: ${error.message}.`, error.code);
      }
      throw error;
    }
  });
  for (const c of canonicalChains ?? []) {
    if (!pegged.some((s) => s.chain === c)) {
      throw validationError(
        'accepted_chains',
        `accepted_chains: ${c} is not supported for ${currency} (supported: ${[...new Set(pegged.map((s) => s.chain))].join(', ')}).`,
        'unsupported_chain',
      );
    }
  }
  const tokens = parseList(tokensInput, 'accepted_tokens', 'token symbols')?.map((t) => t.toUpperCase());
  for (const t of tokens ?? []) {
    if (!pegged.some((s) => s.symbol === t)) {
      throw validationError(
        'accepted_tokens',
        `accepted_tokens: ${t} is not a supported ${currency} stablecoin (supported: ${[...new Set(pegged.map((s) => s.symbol))].join(', ')}).`,
        'unsupported_token',
      );
    }
  }
  const accepted = pegged.filter(
    (s) => (!canonicalChains || canonicalChains.includes(s.chain)) && (!tokens || tokens.includes(s.symbol)),
  );
  if (accepted.length === 0) {
    throw validationError(
      'accepted_tokens',
      'No accepted token exists on the accepted chains; widen accepted_chains or accepted_tokens.',
      'no_accepted_asset',
    );
  }
  return accepted.map((s) => ({
    asset: s.asset,
    chain: s.chain,
    symbol: s.symbol,
    decimals: s.decimals,
    tokenAmount: orderAmountToTokenUnits(orderAmount, s.decimals).toString(),
  }));
}
