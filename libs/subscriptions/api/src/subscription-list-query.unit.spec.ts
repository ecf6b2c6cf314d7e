import { parseSubscriptionListQuery } from './subscriptions.controller';

describe('GET /merchants/:merchantId/subscriptions query', () => {
  it('takes a subscriber all lowercase or EIP-55 checksummed', () => {
    expect(
      parseSubscriptionListQuery({ subscriber: '0xabcdefabcdefabcdefabcdefabcdefabcdefabcd' }).filters
        .subscriber,
    ).toBe('0xABcdEFABcdEFabcdEfAbCdefabcdeFABcDEFabCD');
    expect(
      parseSubscriptionListQuery({ subscriber: '0xABcdEFABcdEFabcdEfAbCdefabcdeFABcDEFabCD' }).filters
        .subscriber,
    ).toBe('0xABcdEFABcdEFabcdEfAbCdefabcdeFABcDEFabCD');
  });

  it('refuses a mixed-case subscriber with a wrong EIP-55 checksum (it listed nothing, 200, as if no such wallet)', () => {
    expect(() =>
      parseSubscriptionListQuery({ subscriber: '0xABCDEFabcdefABCDEFabcdefABCDEFabcdefABCD' }),
    ).toThrow(
      expect.objectContaining({
        status: 400,
        type: 'validation_error',
        param: 'subscriber',
        message: expect.stringContaining('checksum'),
      }),
    );
  });

  it('takes created[gte|gt|lte|lt] in the form the other lists take (the export filters on creation too)', () => {
    expect(
      parseSubscriptionListQuery({ 'created[gte]': '2026-03-01', 'created[lt]': '1775000000' }).filters,
    ).toEqual({ createdGte: new Date('2026-03-01T00:00:00Z'), createdLt: new Date(1775000000 * 1000) });
    expect(() => parseSubscriptionListQuery({ 'created[gte]': 'yesterday' })).toThrow(
      expect.objectContaining({ status: 400, type: 'validation_error', param: 'created[gte]' }),
    );
  });
});
