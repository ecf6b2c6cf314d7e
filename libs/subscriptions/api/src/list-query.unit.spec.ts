import { parseSubscriptionCheckoutListQuery } from './list-query';

const param = (fn: () => unknown): string | undefined => {
  try {
    fn();
  } catch (e) {
    return (e as { param?: string }).param;
  }
  return undefined;
};

describe('GET /subscription-checkouts query', () => {
  it('parses pagination and every filter', () => {
    expect(
      parseSubscriptionCheckoutListQuery({
        limit: '25',
        starting_after: 'schk_x',
        status: 'pending',
        external_customer_id: 'cus_1',
        'created[gte]': '1780000000',
        'created[lt]': '2026-07-01T00:00:00Z',
      }),
    ).toEqual({
      list: { limit: 25, startingAfter: 'schk_x' },
      filters: {
        status: 'pending',
        externalCustomerId: 'cus_1',
        createdGte: new Date(1780000000 * 1000),
        createdLt: new Date('2026-07-01T00:00:00Z'),
      },
    });
  });
  it('names the offending parameter', () => {
    expect(param(() => parseSubscriptionCheckoutListQuery({ status: 'open' }))).toBe('status');
    expect(param(() => parseSubscriptionCheckoutListQuery({ 'created[gte]': 'soon' }))).toBe('created[gte]');
    expect(param(() => parseSubscriptionCheckoutListQuery({ external_customer_id: '' }))).toBe(
      'external_customer_id',
    );
    expect(param(() => parseSubscriptionCheckoutListQuery({ starting_after: 'a', ending_before: 'b' }))).toBe(
      'ending_before',
    );
  });
  it('reads a date alone as midnight UTC and refuses impossible dates (not rolled over) and out-of-range years', () => {
    expect(parseSubscriptionCheckoutListQuery({ 'created[gte]': '2026-07-01' }).filters.createdGte).toEqual(
      new Date('2026-07-01T00:00:00Z'),
    );
    for (const bad of [
      '2026-02-31T00:00:00Z',
      '2026-02-29T00:00:00Z',
      '2026-02-30',
      '2026-13-01',
      '0000-01-01T00:00:00Z',
    ])
      expect(param(() => parseSubscriptionCheckoutListQuery({ 'created[lt]': bad }))).toBe('created[lt]');
  });
});
