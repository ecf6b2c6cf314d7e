/**
 * Money is integers: strings of digits on the wire, bigint in code, never floats.
 */
const DIGITS = /^(0|[1-9][0-9]*)$/;

/** True for a canonical non-negative integer string: digits only, no sign, point, separator or leading zero. */
export function isAmountString(value: unknown): value is string {
  return typeof value === 'string' && value.length <= 78 && DIGITS.test(value);
}

export function toAmount(value: string): bigint {
  if (!isAmountString(value)) throw new RangeError(`not an integer amount string: ${JSON.stringify(value)}`);
  return BigInt(value);
}

/** Ceiling division of non-negative bigints. */
export function divCeil(numerator: bigint, denominator: bigint): bigint {
  if (denominator <= 0n) throw new RangeError('denominator must be positive');
  if (numerator < 0n) throw new RangeError('numerator must be non-negative');
  return (numerator + denominator - 1n) / denominator;
}
