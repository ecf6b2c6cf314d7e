import { MAX_UINT256, tooLargeFault } from './request-fields';

describe('tooLargeFault: an integer above its maximum is told it is too large, not that it is not an integer', () => {
  const uint256 = `deadline must be at most 2^256 - 1 (${MAX_UINT256}), the largest uint256.`;

  it.each([
    ['a 79-digit string', '9'.repeat(79)],
    ['2^256 exactly', (MAX_UINT256 + 1n).toString()],
    ['a 100-digit string', '1'.repeat(100)],
    ['a number JSON carried as 1e80', 1e80],
  ])('names the uint256 limit for %s', (_, value) => {
    expect(tooLargeFault('deadline', value)).toBe(uint256);
  });

  it('names a smaller limit as a number', () => {
    expect(tooLargeFault('deadline', '123', 99n)).toBe('deadline must be at most 99.');
  });

  it.each([
    ['the limit itself', MAX_UINT256.toString()],
    ['leading zeros before a small value', `${'0'.repeat(100)}7`],
    ['not digits', '1e80'],
    ['a negative number', -1],
    ['a fraction', 1.5],
    ['absent', undefined],
  ])('is null for %s (another fault, or none)', (_, value) => {
    expect(tooLargeFault('deadline', value)).toBeNull();
  });
});
