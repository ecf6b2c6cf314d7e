import { parsePositiveAmount } from './rules';

describe('parsePositiveAmount', () => {
  it('tells a 100-digit amount it has too many digits, not that it has a sign or a leading zero', () => {
    expect(() => parsePositiveAmount('9'.repeat(100), 'price')).toThrow(
      expect.objectContaining({ status: 400, param: 'price', message: 'price must have at most 30 digits.' }),
    );
  });

  it('still tells a leading zero it is malformed', () => {
    expect(() => parsePositiveAmount(`0${'9'.repeat(100)}`, 'price')).toThrow(
      expect.objectContaining({ param: 'price', message: expect.stringContaining('leading zero') }),
    );
  });
});
