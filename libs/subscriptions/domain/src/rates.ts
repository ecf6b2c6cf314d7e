import { DomainError, divCeil } from '@stablepay/util';

/**
 * Rates, and conversion from a fiat price to token smallest units.
 *
 * Representation: a rate is quoted per (currency, token) as the price of ONE WHOLE TOKEN in MAJOR units of the
 * currency, written as a plain decimal string (`"1185.50"` means 1 USDC = 1,185.50 ARS), with the time it was
 * observed. It is parsed exactly into a rational `num / den` of bigints (`"1185.50"` -> 118550 / 100); no float
 * ever touches money.
 *
 * Conversion (SPEC Rules 4, "at one rate, rounding up"):
 *
 *   token_units = ceil( minor * 10^decimals * den / (10^exponent * num) )
 *
 * where `minor` is the fiat amount in minor units (hundredths: exponent 2 for every currency accepted today) and
 * `decimals` the token's. Rounding up means the merchant never receives less than the fiat price at that rate.
 */
export interface Rate {
  /** ISO-4217 code, upper case. */
  readonly currency: string;
  /** Token symbol the rate applies to on every chain (USDC, USDT, ...). */
  readonly tokenSymbol: string;
  /** Currency major units per one whole token, as a decimal string (see above). */
  readonly value: string;
  /** ISO time the rate was observed at the source. */
  readonly asOf: string;
  readonly source: string;
}

/** The rates port. Adapters: the sandbox table (embedded, tests); a market-data provider plugs in behind it. */
export interface RateSource {
  /** Every rate the source has for `currency` (one per token symbol); empty when it cannot quote the currency. */
  quote(currency: string): Promise<readonly Rate[]>;
}

/** The source did not answer: nothing can be priced right now (503, retry). */
export function rateSourceUnavailable(detail: string): DomainError {
  return new DomainError({
    type: 'api_error',
    status: 503,
    code: 'rate_source_unavailable',
    message: `The rate source is unavailable (${detail}); retry shortly.`,
  });
}

export interface RationalRate {
  readonly num: bigint;
  readonly den: bigint;
}

const DECIMAL = /^(0|[1-9][0-9]{0,29})(?:\.([0-9]{1,18}))?$/;

/**
 * 10^k for the exponents conversions use (token decimals, currency exponents, rate fractions up to 18 digits):
 * bigint exponentiation allocates on every call, and a create converts price, cap and budget for every option.
 */
const POWERS_OF_TEN = Array.from({ length: 40 }, (_, k) => 10n ** BigInt(k));
const pow10 = (k: number): bigint => POWERS_OF_TEN[k] ?? 10n ** BigInt(k);

/** True for a positive plain decimal with at most 30 integer and 18 fractional digits. */
export function isRateValue(value: string): boolean {
  const m = DECIMAL.exec(value);
  return m !== null && /[1-9]/.test(value);
}

/** `"1185.50"` -> { num: 118550n, den: 100n }. Throws RangeError on anything but a positive plain decimal. */
export function parseRateValue(value: string): RationalRate {
  const m = DECIMAL.exec(value);
  if (!m || !isRateValue(value))
    throw new RangeError(`not a positive decimal rate: ${JSON.stringify(value)}`);
  const fraction = m[2] ?? '';
  return { num: BigInt(`${m[1] ?? '0'}${fraction}`), den: pow10(fraction.length) };
}

/** Minor-unit exponent per currency. SPEC: every currency accepted today has two decimals. */
export function currencyExponent(_currency: string): number {
  return 2;
}

/** Fiat minor units -> token smallest units at one rate, rounded up (exact bigint arithmetic). */
export function toTokenUnits(minor: bigint, rate: RationalRate, tokenDecimals: number, exponent = 2): bigint {
  if (minor < 0n) throw new RangeError('amount must be non-negative');
  if (!Number.isInteger(tokenDecimals) || tokenDecimals < 0)
    throw new RangeError('token decimals must be a non-negative integer');
  return divCeil(minor * pow10(tokenDecimals) * rate.den, pow10(exponent) * rate.num);
}

/** `1265289n`, 6 -> `"1.265289"` (for display only; trailing zeros trimmed). */
export function formatUnits(units: bigint, decimals: number): string {
  const negative = units < 0n;
  const digits = (negative ? -units : units).toString().padStart(decimals + 1, '0');
  const whole = digits.slice(0, digits.length - decimals);
  const fraction = decimals > 0 ? digits.slice(digits.length - decimals).replace(/0+$/, '') : '';
  return `${negative ? '-' : ''}${whole}${fraction ? `.${fraction}` : ''}`;
}
