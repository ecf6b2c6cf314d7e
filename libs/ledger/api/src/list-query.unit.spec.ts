import { DomainError } from '@stablepay/util';
import { parseChargeListQuery } from './list-query';

const SUB = `0x${'Ab'.repeat(32)}`;

function errorOf(query: Record<string, unknown>): DomainError {
  try {
    parseChargeListQuery(query);
  } catch (error) {
    if (error instanceof DomainError) return error;
    throw error;
  }
  throw new Error('expected a validation error');
}

describe('GET /merchants/:merchantId/charges query', () => {
  it('parses pagination and every filter, ids lower-cased', () => {
    const { list, filter } = parseChargeListQuery({
      limit: '5',
      starting_after: 'subc_x',
      subscription_id: SUB,
      status: 'failed',
      chain: 'eip155:8453',
      charged_from: '2026-06-01T00:00:00Z',
      charged_to: '2026-07-01T00:00:00Z',
    });
    expect(list).toEqual({ limit: 5, startingAfter: 'subc_x' });
    expect(filter).toEqual({
      subscriptionId: SUB.toLowerCase(),
      status: 'failed',
      chain: 'eip155:8453',
      chargedFrom: new Date('2026-06-01T00:00:00Z'),
      chargedTo: new Date('2026-07-01T00:00:00Z'),
    });
  });

  it('refuses a filter given twice', () => {
    expect(errorOf({ status: ['failed', 'succeeded'] })).toMatchObject({ param: 'status' });
  });

  it('refuses both cursors with param ending_before (SPEC Pagination rule 3)', () => {
    expect(errorOf({ starting_after: 'subc_a', ending_before: 'subc_b' })).toMatchObject({
      type: 'validation_error',
      param: 'ending_before',
    });
  });
});
