import { DomainError } from '@stablepay/util';
import { parseAddress } from './address';
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

describe('parseAddress', () => {
  const checksummed = '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed';

  it('returns the EIP-55 form of an all-lowercase address', () => {
    expect(parseAddress('a', checksummed.toLowerCase())).toBe(checksummed);
  });

  it('refuses mixed case with a wrong checksum, naming the parameter', () => {
    const error = thrown(() => parseAddress('settlement_address', checksummed.replace('a', 'A')));
    expect(error.param).toBe('settlement_address');
    expect(error.message).toContain('checksum');
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
  ])('refuses a made-up or unusable fiat.%s %j (%s)', (field, value, why) => {
    const error = thrown(() => parseSettlementBody({ fiat: { [field]: value } }));
    expect(error).toMatchObject({ status: 400, type: 'validation_error', param: `fiat.${field}` });
    expect(error.message).toContain(why);
  });

  it('accepts ISO codes in any case', () => {
    expect(parseSettlementBody({ fiat: { currency: 'eur', country: 'de' } })).toEqual({
      fiat: { currency: 'EUR', country: 'DE' },
    });
  });

  it('refuses an unknown fiat field with its dotted param', () => {
    expect(thrown(() => parseSettlementBody({ fiat: { iban: 'x' } })).param).toBe('fiat.iban');
  });

  it('refuses an empty body: nothing to change', () => {
    expect(thrown(() => parseSettlementBody({})).type).toBe('invalid_request');
  });
});
