import { conflict, parseMetadata, validationError } from '@stablepay/util';
import { requiredText } from './text';

/**
 * The Beneficiary aggregate of payouts (beta), stream `beneficiary-<bnf_ id>`: a bank account receiving fiat,
 * owned by the merchant and chosen per payout (SPEC: "the beneficiary is chosen per payout, not per customer").
 * Fields are ours (SPEC: "not shown"), docs/payouts.md. Two account kinds: an IBAN (SEPA, EUR) or a US account
 * (ACH, USD: account number and ABA routing number). The full account number (or IBAN) never enters an event
 * (ARCHITECTURE: no secret in clear in an event): the payouts service seals it into its vault before the creation fact
 * is appended, and the fact keeps `last4` and a keyed `fingerprint` (docs/payouts.md, "Beneficiaries"). The API object
 * carries `last4` only.
 */
export const BENEFICIARY_CATEGORY = 'beneficiary';
export const beneficiaryStreamId = (id: string): string => `${BENEFICIARY_CATEGORY}-${id}`;
export const BENEFICIARY_ID = /^bnf_[0-9a-z]{26}$/;

export type BankAccount =
  | { readonly kind: 'iban'; readonly iban: string; readonly bic: string | null }
  | { readonly kind: 'us_account'; readonly accountNumber: string; readonly routingNumber: string };

/**
 * What an event keeps of a bank account: never the number. `fingerprint`: the service's keyed digest of the full
 * number (the same account gives the same fingerprint under one sealing key); null in facts recorded before sealing.
 */
export type RecordedBankAccount =
  | {
      readonly kind: 'iban';
      readonly last4: string;
      readonly fingerprint: string | null;
      readonly bic: string | null;
    }
  | {
      readonly kind: 'us_account';
      readonly last4: string;
      readonly fingerprint: string | null;
      readonly routingNumber: string;
    };

export interface BeneficiaryFacts {
  readonly holderName: string;
  readonly country: string;
  readonly currency: string;
  readonly account: RecordedBankAccount;
  readonly metadata: Record<string, string>;
}

/** POST /beneficiaries validated: the full account, which only the service's vault keeps. */
export type ParsedBeneficiary = Omit<BeneficiaryFacts, 'account'> & { readonly account: BankAccount };

export type BeneficiaryEvent = {
  type: 'BeneficiaryCreated.v2';
  data: BeneficiaryFacts & { beneficiaryId: string; createdAt: string };
};

/** The full account number (or IBAN): what is sealed, fingerprinted and handed to the off-ramp. */
export function accountNumber(account: BankAccount): string {
  return account.kind === 'iban' ? account.iban : account.accountNumber;
}

export function recordedAccount(account: BankAccount, fingerprint: string | null): RecordedBankAccount {
  const last4 = accountNumber(account).slice(-4);
  return account.kind === 'iban'
    ? { kind: 'iban', last4, fingerprint, bic: account.bic }
    : { kind: 'us_account', last4, fingerprint, routingNumber: account.routingNumber };
}

/**
 * `BeneficiaryCreated.v1` (the beta's first hour) held the account number in clear; read as v2 it keeps only what v2
 * keeps (`last4`, no fingerprint: the pure upcaster holds no key). The stored v1 still holds the number: only the
 * store's own retention removes it (docs/payouts.md).
 */
export const BENEFICIARY_UPCASTERS = [
  {
    from: 'BeneficiaryCreated.v1',
    to: 'BeneficiaryCreated.v2',
    upcast: (data: unknown): unknown => {
      const { account, ...rest } = data as Omit<BeneficiaryFacts, 'account'> & { account: BankAccount };
      return { ...rest, account: recordedAccount(account, null) };
    },
  },
] as const;

export interface BeneficiaryState extends BeneficiaryFacts {
  readonly exists: boolean;
  readonly id: string;
  readonly createdAt: string;
}

export const initialBeneficiaryState = (): BeneficiaryState => ({
  exists: false,
  id: '',
  holderName: '',
  country: '',
  currency: '',
  account: { kind: 'iban', last4: '', fingerprint: null, bic: null },
  metadata: {},
  createdAt: '',
});

export function evolveBeneficiary(state: BeneficiaryState, event: BeneficiaryEvent): BeneficiaryState {
  const { beneficiaryId, createdAt, ...facts } = event.data;
  return { ...state, ...facts, exists: true, id: beneficiaryId, createdAt };
}

/** POST /beneficiaries as received. */
export interface CreateBeneficiaryInput {
  readonly holder_name?: unknown;
  readonly country?: unknown;
  readonly currency?: unknown;
  readonly iban?: unknown;
  readonly bic?: unknown;
  readonly account_number?: unknown;
  readonly routing_number?: unknown;
  readonly metadata?: unknown;
}

export type BeneficiaryCommand = {
  type: 'CreateBeneficiary';
  id: string;
  input: CreateBeneficiaryInput;
  /** The service's keyed digest of the full account number (it holds the key; the decider holds none). */
  accountFingerprint: string;
  now: Date;
};

/** ISO 13616 check: move the first four characters to the end, letters to numbers, the whole mod 97 is 1. */
export function ibanChecksumValid(iban: string): boolean {
  const moved = iban.slice(4) + iban.slice(0, 4);
  let remainder = 0;
  for (const ch of moved) {
    const code = ch >= 'A' && ch <= 'Z' ? String(ch.charCodeAt(0) - 55) : ch;
    for (const digit of code) remainder = (remainder * 10 + Number(digit)) % 97;
  }
  return remainder === 1;
}

/**
 * ABA routing number: its first two digits are a Federal Reserve district (01-12), a thrift's (21-32), an electronic
 * one (61-72) or traveler's cheques (80); 00 is the US government's and never a bank's (000000000 passes the check
 * digit trivially). Then the check digit: 3, 7, 1 weights over the nine digits, sum divisible by 10.
 */
export function abaRoutingValid(routing: string): boolean {
  if (!/^(0[1-9]|1[0-2]|2[1-9]|3[0-2]|6[1-9]|7[0-2]|80)[0-9]{7}$/.test(routing)) return false;
  const weights = [3, 7, 1, 3, 7, 1, 3, 7, 1];
  const sum = [...routing].reduce((acc, d, i) => acc + Number(d) * (weights[i] ?? 0), 0);
  return sum % 10 === 0;
}

const text = (value: unknown, param: string, what: string, max = 200): string =>
  requiredText(value, param, max, what);

/** Ours: the currencies the sandbox off-ramp pays out, by account kind (docs/payouts.md). */
export const BENEFICIARY_CURRENCIES = { iban: ['EUR'], us_account: ['USD'] } as const;

export function parseCreateBeneficiary(input: CreateBeneficiaryInput): ParsedBeneficiary {
  const holderName = text(input.holder_name, 'holder_name', 'the account holder name');
  const country = text(input.country, 'country', 'a two-letter ISO 3166 country code', 2).toUpperCase();
  if (!/^[A-Z]{2}$/.test(country))
    throw validationError('country', 'country must be a two-letter ISO 3166 country code such as US or DE.');
  const currency = text(input.currency, 'currency', 'a three-letter ISO 4217 code', 3).toUpperCase();
  const hasIban = input.iban !== undefined && input.iban !== null;
  const hasUs =
    (input.account_number !== undefined && input.account_number !== null) ||
    (input.routing_number !== undefined && input.routing_number !== null);
  if (hasIban === hasUs)
    throw validationError(
      hasIban ? 'account_number' : 'iban',
      'Give either iban (with an optional bic) or account_number with routing_number.',
    );
  let account: BankAccount;
  if (hasIban) {
    const iban = text(input.iban, 'iban', 'an IBAN', 42).replace(/\s+/g, '').toUpperCase();
    if (!/^[A-Z]{2}[0-9]{2}[A-Z0-9]{11,30}$/.test(iban) || !ibanChecksumValid(iban))
      throw validationError('iban', 'iban is not a valid IBAN (its check digits do not match).');
    if (iban.slice(0, 2) !== country)
      throw validationError('country', `country must be the IBAN's country (${iban.slice(0, 2)}).`);
    let bic: string | null = null;
    if (input.bic !== undefined && input.bic !== null) {
      bic = text(input.bic, 'bic', 'a BIC', 11).toUpperCase();
      if (!/^[A-Z]{4}[A-Z]{2}[A-Z0-9]{2}([A-Z0-9]{3})?$/.test(bic))
        throw validationError('bic', 'bic must be an 8 or 11 character BIC (SWIFT code).');
    }
    account = { kind: 'iban', iban, bic };
  } else {
    if (input.bic !== undefined && input.bic !== null)
      throw validationError('bic', 'bic goes with iban; a US account takes routing_number.');
    const accountNumber = text(input.account_number, 'account_number', 'a US bank account number', 17);
    if (!/^[0-9]{4,17}$/.test(accountNumber))
      throw validationError('account_number', 'account_number must be 4 to 17 digits.');
    const routingNumber = text(input.routing_number, 'routing_number', 'a nine-digit ABA routing number', 9);
    if (!abaRoutingValid(routingNumber))
      throw validationError('routing_number', 'routing_number is not a valid ABA routing number.');
    if (country !== 'US')
      throw validationError('country', 'A US account (account_number, routing_number) must have country US.');
    account = { kind: 'us_account', accountNumber, routingNumber };
  }
  const allowed: readonly string[] = BENEFICIARY_CURRENCIES[account.kind];
  if (!allowed.includes(currency))
    throw validationError(
      'currency',
      `currency must be ${allowed.join(' or ')} for ${account.kind === 'iban' ? 'an IBAN' : 'a US account'}.`,
    );
  return { holderName, country, currency, account, metadata: parseMetadata(input.metadata) };
}

export function decideBeneficiary(command: BeneficiaryCommand, state: BeneficiaryState): BeneficiaryEvent[] {
  if (state.exists) throw conflict('resource_exists', `Beneficiary ${command.id} already exists.`);
  const { account, ...facts } = parseCreateBeneficiary(command.input);
  return [
    {
      type: 'BeneficiaryCreated.v2',
      data: {
        beneficiaryId: command.id,
        ...facts,
        account: recordedAccount(account, command.accountFingerprint),
        createdAt: command.now.toISOString(),
      },
    },
  ];
}

export const beneficiaryDecider = {
  initialState: initialBeneficiaryState,
  evolve: evolveBeneficiary,
  decide: decideBeneficiary,
};

export interface BeneficiaryObject {
  readonly id: string;
  readonly object: 'beneficiary';
  readonly holder_name: string;
  readonly country: string;
  readonly currency: string;
  readonly bank_account:
    | { readonly type: 'iban'; readonly last4: string; readonly bic: string | null }
    | { readonly type: 'us_account'; readonly last4: string; readonly routing_number: string };
  readonly metadata: Record<string, string>;
  readonly created_at: string;
}

export function beneficiaryObject(state: BeneficiaryState): BeneficiaryObject {
  const a = state.account;
  return {
    id: state.id,
    object: 'beneficiary',
    holder_name: state.holderName,
    country: state.country,
    currency: state.currency,
    bank_account:
      a.kind === 'iban'
        ? { type: 'iban', last4: a.last4, bic: a.bic }
        : { type: 'us_account', last4: a.last4, routing_number: a.routingNumber },
    metadata: state.metadata,
    created_at: state.createdAt,
  };
}
