import { parseSubscribeBody } from './subscriptions.controller';

const body = (subscriber: unknown) => ({
  chain: 'eip155:8453',
  asset: 'eip155:8453/erc20:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
  subscriber,
});

describe('parseSubscribeBody', () => {
  it('refuses a mixed-case subscriber with a wrong EIP-55 checksum as a validation error on subscriber (not a 500 later)', () => {
    expect(() => parseSubscribeBody(body('0xABCDEFabcdefABCDEFabcdefABCDEFabcdefABCD'))).toThrow(
      expect.objectContaining({
        status: 400,
        type: 'validation_error',
        param: 'subscriber',
        message: expect.stringContaining('checksum'),
      }),
    );
  });

  it('refuses the zero address as subscriber', () => {
    expect(() => parseSubscribeBody(body(`0x${'0'.repeat(40)}`))).toThrow(
      expect.objectContaining({
        status: 400,
        param: 'subscriber',
        message: expect.stringContaining('zero address'),
      }),
    );
  });

  it('accepts an all-lowercase subscriber and returns it checksummed', () => {
    expect(parseSubscribeBody(body('0xabcdefabcdefabcdefabcdefabcdefabcdefabcd')).subscriber).toBe(
      '0xABcdEFABcdEFabcdEfAbCdefabcdeFABcDEFabCD',
    );
  });
});
