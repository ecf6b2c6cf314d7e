import { parseCancelBody, parseSubscribeBody } from './subscriptions.controller';

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

describe('subscribe and cancel bodies: a present but malformed field is told what is wrong, not that it is missing', () => {
  it('tx_hash that is not a 32-byte hash', () => {
    expect(() =>
      parseSubscribeBody({ ...body('0xabcdefabcdefabcdefabcdefabcdefabcdefabcd'), tx_hash: '0x12' }),
    ).toThrow(
      expect.objectContaining({
        param: 'tx_hash',
        message:
          'tx_hash must be a 32-byte transaction hash (0x followed by 64 hex digits); received "0x12".',
      }),
    );
  });

  it('a missing chain is still said to be required', () => {
    expect(() =>
      parseSubscribeBody({ asset: 'a', subscriber: '0xabcdefabcdefabcdefabcdefabcdefabcdefabcd' }),
    ).toThrow(
      expect.objectContaining({ param: 'chain', message: expect.stringMatching(/^chain is required: /) }),
    );
  });

  it('cancel deadline that is not a positive integer', () => {
    expect(() =>
      parseCancelBody({ nonce: 0, deadline: '1790000000', signature: `0x${'ab'.repeat(65)}` }),
    ).toThrow(
      expect.objectContaining({
        param: 'deadline',
        message:
          'deadline must be the Unix seconds the signature names (a positive integer); received "1790000000".',
      }),
    );
    expect(() => parseCancelBody({ nonce: 0, signature: `0x${'ab'.repeat(65)}` })).toThrow(
      expect.objectContaining({
        param: 'deadline',
        message: expect.stringMatching(/^deadline is required: /),
      }),
    );
  });

  it('cancel deadline: the code every signed route gives a malformed deadline (invalid_deadline); too large is told so', () => {
    const signature = `0x${'ab'.repeat(65)}`;
    expect(() => parseCancelBody({ nonce: 0, deadline: 'soon', signature })).toThrow(
      expect.objectContaining({ status: 400, param: 'deadline', code: 'invalid_deadline' }),
    );
    for (const bad of ['0x1234', undefined])
      expect(() => parseCancelBody({ nonce: 0, deadline: 1790000000, signature: bad })).toThrow(
        expect.objectContaining({ status: 400, param: 'signature', code: 'invalid_signature' }),
      );
    expect(() => parseCancelBody({ nonce: 0, deadline: 1e80, signature })).toThrow(
      expect.objectContaining({
        param: 'deadline',
        code: 'invalid_deadline',
        message: `deadline must be at most ${Number.MAX_SAFE_INTEGER}.`,
      }),
    );
  });
});
