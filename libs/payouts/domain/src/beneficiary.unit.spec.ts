import { DomainError } from '@stablepay/util';
import {
  abaRoutingValid,
  beneficiaryDecider,
  beneficiaryObject,
  BENEFICIARY_UPCASTERS,
  type CreateBeneficiaryInput,
  ibanChecksumValid,
} from './beneficiary';

const now = new Date('2026-06-01T10:00:00.000Z');
const decide = (input: CreateBeneficiaryInput) =>
  beneficiaryDecider.decide(
    { type: 'CreateBeneficiary', id: 'bnf_1', input, accountFingerprint: 'fp_1', now },
    beneficiaryDecider.initialState(),
  );
const objectOf = (input: CreateBeneficiaryInput) =>
  beneficiaryObject(decide(input).reduce(beneficiaryDecider.evolve, beneficiaryDecider.initialState()));
const paramOf = (input: CreateBeneficiaryInput): string | undefined => {
  try {
    decide(input);
  } catch (e) {
    if (e instanceof DomainError && e.status === 400) return e.param;
  }
  throw new Error('expected a 400');
};

const IBAN = {
  holder_name: 'Ada Lovelace',
  country: 'DE',
  currency: 'EUR',
  iban: 'DE89 3704 0044 0532 0130 00',
};
const US = {
  holder_name: 'Ada Lovelace',
  country: 'US',
  currency: 'USD',
  account_number: '000123456789',
  routing_number: '110000000',
};

describe('Beneficiary aggregate', () => {
  it('an IBAN beneficiary shows only the last four characters of the IBAN', () => {
    const object = objectOf(IBAN);
    expect(object.bank_account).toEqual({ type: 'iban', last4: '3000', bic: null });
    expect(JSON.stringify(object)).not.toContain('370400440532013000');
  });

  it('a US account shows its last four digits and the routing number', () => {
    expect(objectOf(US).bank_account).toEqual({
      type: 'us_account',
      last4: '6789',
      routing_number: '110000000',
    });
  });

  it.each([
    [IBAN, '370400440532013000'],
    [US, '000123456789'],
  ])('the creation fact of %j keeps last4 and the fingerprint, never the account number', (input, number) => {
    const [event] = decide(input);
    expect(event?.type).toBe('BeneficiaryCreated.v2');
    expect(event?.data.account).toMatchObject({ last4: number.slice(-4), fingerprint: 'fp_1' });
    expect(JSON.stringify(event)).not.toContain(number);
  });

  it('upcaster BeneficiaryCreated.v1 -> v2: the old clear shape (IBAN) is read without the IBAN', () => {
    const v1 = Object.freeze({
      beneficiaryId: 'bnf_1',
      holderName: 'Ada Lovelace',
      country: 'DE',
      currency: 'EUR',
      account: Object.freeze({ kind: 'iban', iban: 'DE89370400440532013000', bic: 'COBADEFFXXX' }),
      metadata: {},
      createdAt: now.toISOString(),
    });
    const [upcaster] = BENEFICIARY_UPCASTERS;
    const v2 = upcaster.upcast(v1);
    expect([upcaster.from, upcaster.to]).toEqual(['BeneficiaryCreated.v1', 'BeneficiaryCreated.v2']);
    expect(v2).toEqual({
      ...v1,
      account: { kind: 'iban', last4: '3000', fingerprint: null, bic: 'COBADEFFXXX' },
    });
    expect(JSON.stringify(v2)).not.toContain('370400440532013000');
  });

  it('upcaster BeneficiaryCreated.v1 -> v2: the old clear shape (US account) is read without the number', () => {
    const v1 = Object.freeze({
      beneficiaryId: 'bnf_2',
      holderName: 'Ada Lovelace',
      country: 'US',
      currency: 'USD',
      account: Object.freeze({
        kind: 'us_account',
        accountNumber: '000123456789',
        routingNumber: '110000000',
      }),
      metadata: {},
      createdAt: now.toISOString(),
    });
    const v2 = BENEFICIARY_UPCASTERS[0].upcast(v1) as { account: unknown };
    expect(v2.account).toEqual({
      kind: 'us_account',
      last4: '6789',
      fingerprint: null,
      routingNumber: '110000000',
    });
    expect(JSON.stringify(v2)).not.toContain('000123456789');
  });

  it.each([
    [{ ...IBAN, iban: 'DE89370400440532013001' }, 'iban'],
    [{ ...IBAN, country: 'FR' }, 'country'],
    [{ ...IBAN, currency: 'USD' }, 'currency'],
    [{ ...IBAN, bic: 'nope' }, 'bic'],
    [{ ...US, routing_number: '110000001' }, 'routing_number'],
    [{ ...US, routing_number: '000000000' }, 'routing_number'],
    [{ ...US, account_number: '12ab' }, 'account_number'],
    [{ ...US, country: 'CA' }, 'country'],
    [{ holder_name: 'A', country: 'US', currency: 'USD' }, 'iban'],
    [{ ...US, iban: IBAN.iban }, 'account_number'],
    [{ ...US, holder_name: '' }, 'holder_name'],
    // One line of visible text, as merchant names: a bank matches it against the account.
    [{ ...US, holder_name: '\u200b' }, 'holder_name'],
    [{ ...US, holder_name: '\u202eevil' }, 'holder_name'],
    [{ ...US, holder_name: 'A\nB' }, 'holder_name'],
    [{ ...US, holder_name: 'A\u0007B' }, 'holder_name'],
    [{ ...US, holder_name: 'A\u2028B' }, 'holder_name'],
  ])('%j is refused naming %s', (input, param) => {
    expect(paramOf(input)).toBe(param);
  });

  it('checks IBAN and ABA check digits', () => {
    expect(ibanChecksumValid('GB82WEST12345698765432')).toBe(true);
    expect(ibanChecksumValid('GB82WEST12345698765433')).toBe(false);
    expect(abaRoutingValid('021000021')).toBe(true);
    expect(abaRoutingValid('021000022')).toBe(false);
  });

  it.each([
    '000000000',
    '130000006',
    '200000004',
    '330000000',
    '400000008',
    '600000002',
    '730000008',
    '810000009',
    '990000000',
  ])(
    'an ABA routing number %s whose first two digits are no Federal Reserve prefix is refused, even with a valid check digit',
    (routing) => {
      const digits = [...routing].map(Number);
      expect(digits.reduce((acc, d, i) => acc + d * ([3, 7, 1][i % 3] ?? 0), 0) % 10).toBe(0);
      expect(abaRoutingValid(routing)).toBe(false);
    },
  );

  it.each([
    '010000003',
    '120000003',
    '210000007',
    '320000007',
    '610000005',
    '720000005',
    '800000006',
    '021000021',
  ])(
    'an ABA routing number %s with a Federal Reserve prefix (01-12, 21-32, 61-72, 80) and its check digit passes',
    (routing) => {
      expect(abaRoutingValid(routing)).toBe(true);
    },
  );
});
