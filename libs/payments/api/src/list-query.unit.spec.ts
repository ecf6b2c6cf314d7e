import { DomainError } from '@stablepay/util';
import { parseCheckoutListQuery, parsePaymentListQuery } from './list-query';

const refusal = (fn: () => unknown): { param?: string; type: string } => {
  try {
    fn();
  } catch (error) {
    if (error instanceof DomainError)
      return { type: error.type, ...(error.param ? { param: error.param } : {}) };
    throw error;
  }
  throw new Error('expected a refusal');
};

describe('list queries of checkouts and payments', () => {
  it('reads paging and every documented filter', () => {
    expect(
      parsePaymentListQuery({
        limit: '5',
        status: 'settled',
        method: 'TWO_STEP',
        checkout_id: 'chk_0123456789abcdefghjkmnpqrs',
        deposit_address: '0xabCDeF0123456789AbcdEf0123456789aBCDEF01',
        detected_chain: 'eip155:8453',
        'created[gte]': '2026-06-01',
        'created[lt]': '1780000000',
      }),
    ).toEqual({
      list: { limit: 5 },
      filters: {
        status: 'settled',
        method: 'TWO_STEP',
        checkoutId: 'chk_0123456789abcdefghjkmnpqrs',
        depositAddress: '0xabcdef0123456789abcdef0123456789abcdef01',
        detectedChain: 'eip155:8453',
        createdGte: new Date('2026-06-01T00:00:00Z'),
        createdLt: new Date(1_780_000_000_000),
      },
    });
    expect(parseCheckoutListQuery({ status: 'paid' }).filters).toEqual({ status: 'paid' });
  });

  it.each([
    [{ status: 'settled' }, 'status'],
    [{ payment_id: 'pay_short' }, 'payment_id'],
    [{ status: ['pending', 'paid'] }, 'status'],
    [{ 'created[gt]': 'soon' }, 'created[gt]'],
    // Year 0 reached PostgreSQL and came back 500; impossible dates were rolled over to March.
    [{ 'created[gte]': '0000-01-01T00:00:00Z' }, 'created[gte]'],
    [{ 'created[lte]': '0001-01-01T00:00:00+01:00' }, 'created[lte]'],
    [{ 'created[lt]': '2026-02-29T00:00:00Z' }, 'created[lt]'],
    [{ 'created[gt]': '2026-02-30' }, 'created[gt]'],
  ])('refuses a bad checkout list parameter %j naming %s', (query, param) => {
    expect(refusal(() => parseCheckoutListQuery(query))).toEqual({ type: 'validation_error', param });
  });

  it.each([
    [{ status: 'paid' }, 'status'],
    [{ method: 'direct' }, 'method'],
    [{ deposit_address: '0x12' }, 'deposit_address'],
    // A typo in a checksummed address listed nothing (200, empty) instead of saying so.
    [{ deposit_address: '0xABCDEF0123456789abcdef0123456789ABCDEF01' }, 'deposit_address'],
    [{ detected_chain: 'solana:1' }, 'detected_chain'],
    [{ checkout_id: 'pay_0123456789abcdefghjkmnpqrs' }, 'checkout_id'],
    [{ 'created[gte]': '0000-01-01T00:00:00Z' }, 'created[gte]'],
    [{ 'created[lt]': '2026-02-29T00:00:00Z' }, 'created[lt]'],
  ])('refuses a bad payment list parameter %j naming %s', (query, param) => {
    expect(refusal(() => parsePaymentListQuery(query))).toEqual({ type: 'validation_error', param });
  });
});
