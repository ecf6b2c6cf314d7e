import { formatTokenAmount, orderAmountToTokenUnits, parseOrderAmount } from './rules';

describe('order amount (6-decimal canonical integer) -> token smallest units', () => {
  it('a 6-decimal stablecoin (USDC, USDT) takes the order amount unchanged', () => {
    expect(orderAmountToTokenUnits(12_500_000n, 6)).toBe(12_500_000n);
    expect(orderAmountToTokenUnits(1n, 6)).toBe(1n);
  });

  it('an 18-decimal stablecoin (DAI) scales up exactly by 10^12, in bigint (no float rounding)', () => {
    expect(orderAmountToTokenUnits(12_500_000n, 18)).toBe(12_500_000_000_000_000_000n);
    // 2^53 + 1 order units: a float would round it.
    expect(orderAmountToTokenUnits(9_007_199_254_740_993n, 18)).toBe(9_007_199_254_740_993_000_000_000_000n);
  });

  it('a token with fewer than 6 decimals rounds up, so the merchant never receives less than the order', () => {
    expect(orderAmountToTokenUnits(12_500_001n, 2)).toBe(1_251n);
    expect(orderAmountToTokenUnits(12_500_000n, 2)).toBe(1_250n);
  });

  it('refuses nonsensical decimals', () => {
    expect(() => orderAmountToTokenUnits(1n, -1)).toThrow(RangeError);
    expect(() => orderAmountToTokenUnits(1n, 1.5)).toThrow(RangeError);
  });
});

describe('token_amount_decimal', () => {
  it.each([
    [12_500_000n, 6, '12.5'],
    [10_000_000n, 6, '10'],
    [1n, 6, '0.000001'],
    [12_500_000_000_000_000_000n, 18, '12.5'],
    [0n, 6, '0'],
    [7n, 0, '7'],
  ])('%s units at %s decimals read %s', (units, decimals, text) => {
    expect(formatTokenAmount(units, decimals)).toBe(text);
  });
});

describe('order amount parsing: each refusal says what is wrong', () => {
  const message = (value: unknown): string => {
    try {
      parseOrderAmount(value);
    } catch (error) {
      return (error as Error).message;
    }
    return '';
  };

  it('tells an over-long string of digits its length, at any length (85 digits were told of signs and leading zeros)', () => {
    expect(message('1'.repeat(25))).toBe('amount must have at most 24 digits.');
    expect(message('9'.repeat(85))).toBe('amount must have at most 24 digits.');
  });

  it('tells a malformed one its shape', () => {
    for (const bad of ['0005', '-1', '1.5', '1e6', ' 5', ''])
      expect(message(bad)).toContain('with no sign, decimal point, separator or leading zero');
  });
});
