import { orderAmountInCents } from './sandbox-payment-payouts';

describe('the sandbox magic amounts of a payment', () => {
  it('are the order amount in cents; an amount with fractions of a cent matches none', () => {
    expect(orderAmountInCents('4020000')).toBe('402');
    expect(orderAmountInCents('12500000')).toBe('1250');
    expect(orderAmountInCents('4020001')).toBe('');
  });
});
