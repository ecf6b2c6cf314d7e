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
});
