import { Body, Controller, Get, Inject, Put } from '@nestjs/common';
import { parseAddress } from '@stablepay/evm';
import { type AuthenticatedMerchant, CurrentMerchant } from '@stablepay/http';
import type { FiatSettlementDetails } from '@stablepay/merchants-domain';
import {
  bodyNotAnObject,
  invalidRequest,
  isIsoCountryCode,
  isTwoDecimalIsoCurrency,
  nestedParam,
  requireDisplayText,
  requireNoControlCharacters,
  takesFields,
  unknownParameter,
  validationError,
} from '@stablepay/util';
import { MERCHANTS_USE_CASES, type MerchantsUseCases, type SettlementInput } from './merchants.port';

/** Wire name -> domain name of each fiat settlement field. */
export const FIAT_FIELDS = {
  currency: 'currency',
  beneficiary_name: 'beneficiaryName',
  bank_name: 'bankName',
  account_number: 'accountNumber',
  bank_code: 'bankCode',
  country: 'country',
} as const satisfies Record<string, keyof FiatSettlementDetails>;
export type WireField = keyof typeof FIAT_FIELDS;

/** 1-140 characters, not only spaces, none of them control characters (letters of any script allowed). */
const PRINTABLE_NAME = /^(?=.*\S)[^\p{Cc}]{1,140}$/u;

const FIELD_RULES: Record<
  WireField,
  {
    pattern: RegExp;
    describe: string;
    normalize?: (v: string) => string;
    /** Read by people (the bank, the merchant): also held to `requireDisplayText`. */
    displayed?: true;
    /** The normalized value must also name something that exists; the message says what was not found. */
    known?: { test: (normalized: string) => boolean; unknown: (normalized: string) => string };
  }
> = {
  currency: {
    pattern: /^[A-Za-z]{3}$/,
    describe: 'a three-letter ISO-4217 code (for example ARS)',
    normalize: (v) => v.toUpperCase(),
    // A made-up code was stored as complete, then every subscription checkout failed 422 price_currency_not_quotable.
    known: {
      test: isTwoDecimalIsoCurrency,
      unknown: (v) =>
        `${v} is not an ISO-4217 currency in use with two decimals (every settlement currency prices in hundredths)`,
    },
  },
  beneficiary_name: {
    pattern: PRINTABLE_NAME,
    describe: 'the account holder name, 1 to 140 printable characters',
    displayed: true,
  },
  bank_name: {
    pattern: PRINTABLE_NAME,
    describe: 'the bank name, 1 to 140 printable characters',
    displayed: true,
  },
  account_number: {
    pattern: /^[A-Za-z0-9]{4,64}$/,
    describe: 'the account number (IBAN, CBU/CVU, CLABE or local), 4 to 64 letters and digits without spaces',
    normalize: (v) => v.toUpperCase(),
  },
  bank_code: {
    pattern: /^[A-Za-z0-9]{1,34}$/,
    describe: 'a routing number, SWIFT/BIC or local bank code, 1 to 34 letters and digits',
    normalize: (v) => v.toUpperCase(),
  },
  country: {
    pattern: /^[A-Za-z]{2}$/,
    describe: 'an ISO-3166 alpha-2 country code (for example AR)',
    normalize: (v) => v.toUpperCase(),
    known: {
      test: isIsoCountryCode,
      unknown: (v) => `${v} is not an assigned ISO-3166-1 alpha-2 country code`,
    },
  },
};

@Controller('payments/settlement')
export class SettlementController {
  constructor(@Inject(MERCHANTS_USE_CASES) private readonly merchants: MerchantsUseCases) {}

  @Get()
  get(@CurrentMerchant() merchant: AuthenticatedMerchant) {
    return this.merchants.settlement(merchant);
  }

  /**
   * Partial update: `settlement_address`, and `fiat` whose fields are merged into the saved configuration
   * (a field set to null is unset; `"fiat": null` removes the configuration).
   */
  @Put()
  put(@CurrentMerchant() merchant: AuthenticatedMerchant, @Body() body: unknown) {
    return this.merchants.configureSettlement(merchant, parseSettlementBody(body));
  }
}

export function parseSettlementBody(body: unknown): SettlementInput {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw bodyNotAnObject();
  const b = body as Record<string, unknown>;
  for (const key of Object.keys(b)) {
    if (key !== 'settlement_address' && key !== 'fiat')
      throw unknownParameter(key, takesFields(['settlement_address', 'fiat']));
  }
  if (b['settlement_address'] === undefined && b['fiat'] === undefined) {
    throw invalidRequest('Send at least one of settlement_address and fiat.', 'parameter_missing');
  }
  const out: { settlementAddress?: string; fiat?: Partial<FiatSettlementDetails> | null } = {};
  const address = b['settlement_address'];
  if (address !== undefined) {
    out.settlementAddress = parseAddress(address, 'settlement_address', { nonZero: true });
  }
  const fiat = b['fiat'];
  if (fiat === null) {
    out.fiat = null;
  } else if (fiat !== undefined) {
    if (typeof fiat !== 'object' || Array.isArray(fiat))
      throw validationError('fiat', 'fiat must be an object (or null to remove the configuration).');
    const patch: { -readonly [K in keyof FiatSettlementDetails]?: FiatSettlementDetails[K] } = {};
    for (const [key, value] of Object.entries(fiat as Record<string, unknown>)) {
      const param = nestedParam('fiat', key);
      if (!(key in FIAT_FIELDS))
        throw unknownParameter(param, `fiat takes ${Object.keys(FIAT_FIELDS).join(', ')}`);
      const wire = key as WireField;
      const rule = FIELD_RULES[wire];
      if (value === null) {
        patch[FIAT_FIELDS[wire]] = null;
        continue;
      }
      // A control character in a name is the answer every field gives it (invalid_string), before the shape's.
      if (typeof value === 'string' && rule.displayed) requireNoControlCharacters(param, value);
      if (typeof value !== 'string' || !rule.pattern.test(value))
        throw validationError(param, `${param} must be ${rule.describe}, or null to unset it.`);
      if (rule.displayed) requireDisplayText(param, value);
      const normalized = rule.normalize ? rule.normalize(value) : value.trim();
      if (rule.known && !rule.known.test(normalized))
        throw validationError(param, `${param} must be ${rule.describe}: ${rule.known.unknown(normalized)}.`);
      patch[FIAT_FIELDS[wire]] = normalized;
    }
    out.fiat = patch;
  }
  return out;
}
