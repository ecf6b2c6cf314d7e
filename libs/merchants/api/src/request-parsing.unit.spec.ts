import { createValidationPipe } from '@stablepay/http';
import { DomainError } from '@stablepay/util';
import { parseDeclaration, parseMerchantChange, parseRevocations } from './settings.controller';
import { CreateMerchantDto, RegisterSignerDto, UpdateProfileDto, UpdateSettlementDto } from './settings.dto';
import { parseSettlementBody } from './settlement.controller';

function thrown(fn: () => unknown): DomainError {
  try {
    fn();
  } catch (error) {
    if (error instanceof DomainError) return error;
    throw error;
  }
  throw new Error('expected a DomainError');
}

describe('addresses in merchant bodies (@stablepay/evm parseAddress)', () => {
  const checksummed = '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed';
  const signature = `0x${'ab'.repeat(65)}`;

  it('a settlement address with a wrong checksum is invalid_address on its param', () => {
    expect(
      thrown(() => parseSettlementBody({ settlement_address: checksummed.replace('a', 'A') })),
    ).toMatchObject({ status: 400, param: 'settlement_address', code: 'invalid_address' });
  });

  it('the zero address is refused as settlement address and as merchant signer before the command runs', () => {
    const zero = `0x${'0'.repeat(40)}`;
    expect(thrown(() => parseSettlementBody({ settlement_address: zero }))).toMatchObject({
      param: 'settlement_address',
      code: 'invalid_address',
    });
    expect(
      thrown(() =>
        parseMerchantChange({ chain: 'eip155:8453', deadline: 1, signature, merchant_signer: zero }),
      ),
    ).toMatchObject({ param: 'merchant_signer', code: 'invalid_address' });
  });

  it('the zero address is refused as merchant pauser when the declaration is parsed (400, not 422 pauser_control_unproven)', () => {
    expect(thrown(() => parseDeclaration({ merchant_pauser: `0x${'0'.repeat(40)}`, signature }))).toEqual(
      expect.objectContaining({
        status: 400,
        type: 'invalid_request',
        param: 'merchant_pauser',
        code: 'invalid_address',
        message:
          'merchant_pauser must not be the zero address (no key signs for it; what it is sent is lost).',
      }),
    );
  });

  it('a malformed pause declaration is 400 invalid_request with a code, as every 400 (SPEC keeps its type)', () => {
    const pauser = '0x70997970C51812dc3A010C7d01b50e0d17dc79C8';
    expect(thrown(() => parseDeclaration({ merchant_pauser: pauser, signature: 'nope' }))).toMatchObject({
      status: 400,
      type: 'invalid_request',
      param: 'signature',
      code: 'parameter_invalid',
    });
    expect(thrown(() => parseDeclaration({ merchant_pauser: pauser }))).toMatchObject({
      param: 'signature',
      code: 'parameter_missing',
    });
    expect(
      thrown(() =>
        parseDeclaration({
          merchant_pauser: pauser,
          signature: `0x${'1'.repeat(130)}`,
          acknowledge_shared_pauser_risk: 'yes',
        }),
      ),
    ).toMatchObject({
      type: 'invalid_request',
      param: 'acknowledge_shared_pauser_risk',
      code: 'parameter_invalid',
    });
  });

  it('an all-lowercase settlement address comes back checksummed', () => {
    expect(parseSettlementBody({ settlement_address: checksummed.toLowerCase() })).toEqual({
      settlementAddress: checksummed,
    });
  });
});

describe('parseSettlementBody', () => {
  it('normalises fiat fields and keeps null as unset', () => {
    expect(parseSettlementBody({ fiat: { currency: 'ars', bank_name: ' Banco ', country: null } })).toEqual({
      fiat: { currency: 'ARS', bankName: 'Banco', country: null },
    });
  });

  it.each([
    ['currency', 'xyz', 'not an ISO-4217 currency'],
    ['currency', 'JPY', 'two decimals'],
    ['currency', 'XDR', 'not an ISO-4217 currency'],
    ['country', 'zz', 'not an assigned ISO-3166-1'],
    ['country', 'UK', 'not an assigned ISO-3166-1'],
  ])('refuses a made-up or unusable fiat[%s] %j (%s)', (field, value, why) => {
    const error = thrown(() => parseSettlementBody({ fiat: { [field]: value } }));
    expect(error).toMatchObject({ status: 400, type: 'validation_error', param: `fiat[${field}]` });
    expect(error.message).toContain(why);
  });

  it('accepts ISO codes in any case', () => {
    expect(parseSettlementBody({ fiat: { currency: 'eur', country: 'de' } })).toEqual({
      fiat: { currency: 'EUR', country: 'DE' },
    });
  });

  it('refuses an unknown fiat field with its bracketed param (fiat[iban]) and code unknown_parameter', () => {
    expect(thrown(() => parseSettlementBody({ fiat: { iban: 'x' } }))).toMatchObject({
      type: 'validation_error',
      param: 'fiat[iban]',
      code: 'unknown_parameter',
    });
  });

  it('refuses an empty body: nothing to change', () => {
    expect(thrown(() => parseSettlementBody({})).type).toBe('invalid_request');
  });
});

describe('signed settings bodies: a present but malformed field is told what is wrong, not that it is missing', () => {
  const signature = `0x${'ab'.repeat(65)}`;

  it('deadline of a merchant change: malformed vs absent', () => {
    const malformed = thrown(() =>
      parseMerchantChange({ chain: 'eip155:8453', deadline: 'soon', signature }),
    );
    expect(malformed).toMatchObject({ param: 'deadline', code: 'invalid_deadline' });
    expect(malformed.message).toMatch(/^deadline must be the Unix time .*; received "soon"\.$/);
    expect(thrown(() => parseMerchantChange({ chain: 'eip155:8453', signature })).message).toMatch(
      /^deadline is required: the Unix time/,
    );
  });

  it('deadline of a revocation names its item and what arrived', () => {
    const error = thrown(() =>
      parseRevocations({ revocations: [{ chain: 'eip155:8453', deadline: -1, signature }] }),
    );
    expect(error.param).toBe('revocations[0][deadline]');
    expect(error.message).toMatch(/^revocations\[0\]\[deadline\] must be .*; received -1\.$/);
  });

  it.each(['9'.repeat(21), '9'.repeat(79), 1e80])(
    'a deadline above the most taken (%s) is told it is too large, with invalid_deadline',
    (deadline) => {
      const max = typeof deadline === 'number' ? String(Number.MAX_SAFE_INTEGER) : '9'.repeat(20);
      const change = thrown(() => parseMerchantChange({ chain: 'eip155:8453', deadline, signature }));
      expect(change).toMatchObject({ param: 'deadline', code: 'invalid_deadline' });
      expect(change.message).toBe(`deadline must be at most ${max}.`);
      const revocation = thrown(() =>
        parseRevocations({ revocations: [{ chain: 'eip155:8453', deadline, signature }] }),
      );
      expect(revocation).toMatchObject({ param: 'revocations[0][deadline]', code: 'invalid_deadline' });
      expect(revocation.message).toBe(`revocations[0][deadline] must be at most ${max}.`);
    },
  );
});

describe('names through the validation pipe (PATCH /settings, POST /admin/merchants)', () => {
  const pipe = createValidationPipe();
  const refusal = async (body: unknown, metatype: new () => object): Promise<DomainError> => {
    try {
      await pipe.transform(body, { type: 'body', metatype });
    } catch (error) {
      if (error instanceof DomainError) return error;
      throw error;
    }
    throw new Error('the body was accepted');
  };

  it('a missing merchant_signer or settlement_address is told it is required and what it holds', async () => {
    const signer = await refusal({ settlement_address: `0x${'be'.repeat(20)}` }, RegisterSignerDto);
    expect(signer).toMatchObject({ param: 'merchant_signer', type: 'validation_error' });
    expect(signer.message).toBe(
      'merchant_signer is required: an EVM address (0x followed by 40 hex digits), your merchant signer.',
    );
    const settlement = await refusal({}, UpdateSettlementDto);
    expect(settlement).toMatchObject({ param: 'settlement_address', type: 'validation_error' });
    expect(settlement.message).toBe(
      'settlement_address is required: an EVM address (0x followed by 40 hex digits).',
    );
    const numeric = await refusal({ merchant_signer: 42 }, RegisterSignerDto);
    expect(numeric.message).toBe(
      'merchant_signer must be an EVM address (0x followed by 40 hex digits), your merchant signer; received 42.',
    );
  });

  it('a numeric display_name is told it must be a string, not given a length rule', async () => {
    const error = await refusal({ display_name: 42 }, UpdateProfileDto);
    expect(error).toMatchObject({ param: 'display_name', type: 'validation_error' });
    expect(error.message).toBe('display_name must be a string of 1 to 100 characters; received 42.');
  });

  it('a missing merchant name is said to be required', async () => {
    const error = await refusal({ mode: 'test' }, CreateMerchantDto);
    expect(error).toMatchObject({ param: 'name' });
    expect(error.message).toBe('name is required: a string of 1 to 100 characters.');
  });

  it.each([
    ['a string', 'payment.settled'],
    ['an object', { 0: 'payment.settled' }],
    ['a boolean', true],
  ])(
    'webhook_event_types given as %s is told it must be an array of event types, not a size or element rule',
    async (_kind, value) => {
      const error = await refusal({ webhook_event_types: value }, UpdateProfileDto);
      expect(error).toMatchObject({ param: 'webhook_event_types', type: 'validation_error' });
      expect(error.message).toMatch(
        /^webhook_event_types must be an array of webhook event type names \(or null for all\); received /,
      );
    },
  );

  it('webhook_event_types with more than 100 entries is told the limit', async () => {
    const error = await refusal(
      { webhook_event_types: Array(101).fill('payment.settled') },
      UpdateProfileDto,
    );
    expect(error).toMatchObject({ param: 'webhook_event_types' });
    expect(error.message).toBe('webhook_event_types must contain no more than 100 elements');
  });

  it('webhook_event_types with an entry that is not a string names the entries', async () => {
    const error = await refusal({ webhook_event_types: ['payment.settled', 1] }, UpdateProfileDto);
    expect(error).toMatchObject({ param: 'webhook_event_types' });
    expect(error.message).toBe('webhook_event_types must contain webhook event type names only (strings).');
  });

  it('100 emoji pass the pipe: the length in characters is the domain rule', async () => {
    await expect(
      pipe.transform({ display_name: '\u{1F600}'.repeat(100) }, { type: 'body', metatype: UpdateProfileDto }),
    ).resolves.toBeDefined();
  });
});
