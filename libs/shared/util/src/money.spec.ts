import { divCeil, isAmountString, toAmount } from './money';

describe('amount strings (SPEC: integers, no decimal point, no separator)', () => {
  it.each([
    '0',
    '1',
    '1000000',
    '115792089237316195423570985008687907853269984665640564039457584007913129639935',
  ])('accepts %s', (v) => expect(isAmountString(v)).toBe(true));
  it.each(['', '-1', '+1', '1.0', '1,000', '01', ' 1', '1e6', '0x10'])('rejects %j', (v) =>
    expect(isAmountString(v)).toBe(false),
  );
  it('rejects non-strings', () => {
    expect(isAmountString(1)).toBe(false);
    expect(isAmountString(null)).toBe(false);
  });
  it('parses to bigint without precision loss', () => {
    expect(toAmount('9007199254740993')).toBe(9007199254740993n);
    expect(() => toAmount('1.5')).toThrow(RangeError);
  });
  it('divides rounding up', () => {
    expect(divCeil(10n, 3n)).toBe(4n);
    expect(divCeil(9n, 3n)).toBe(3n);
    expect(divCeil(0n, 3n)).toBe(0n);
  });
});
