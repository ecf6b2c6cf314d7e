import { parseCaip2 } from '@stablepay/evm';
import {
  cannotProcess,
  DomainError,
  HOUR,
  MINUTE,
  REQUEST_FIELD_LIMITS,
  isAmountString,
  nestedParam,
  isIsoCurrency,
  isTwoDecimalIsoCurrency,
  parseMetadata,
  requireDisplayText,
  requireNoControlCharacters,
  validationError,
} from '@stablepay/util';

// One rule for every create call's free-form fields (shared with the other scopes).
export { parseMetadata, parseRedirectUrl } from '@stablepay/util';

/** SPEC Limits, and the limits this service adds where SPEC is silent (documented in docs/subscription-checkouts.md). */
export const SUBSCRIPTION_CHECKOUT_LIMITS = {
  /** SPEC: subscription checkout expiry default 5 minutes. */
  defaultExpiresInSeconds: (5 * MINUTE) / 1000,
  /** SPEC: maximum 24 hours. */
  maxExpiresInSeconds: (24 * HOUR) / 1000,
  /** Ours: an intent that expires sooner could not be opened and signed in time. */
  minExpiresInSeconds: 60,
  /** SPEC: period_duration minimum 1 hour. */
  minPeriodSeconds: 3600,
  /** Ours: ten years; longer periods are almost certainly a unit mistake (milliseconds sent as seconds). */
  maxPeriodSeconds: 10 * 365 * 24 * 3600,
  /** Ours, when period_duration is omitted: 30 days. */
  defaultPeriodSeconds: 30 * 24 * 3600,
  /** SPEC: budget defaults to 10 times price. */
  defaultBudgetMultiplier: 10n,
  /** Ours: amounts of at most 30 digits (far beyond any price; keeps converted figures within uint256). */
  maxAmountDigits: 30,
  /** SPEC: metadata values at most 500 characters. */
  maxMetadataValueLength: REQUEST_FIELD_LIMITS.maxMetadataValueLength,
  /** Ours (as Stripe): at most 50 keys of at most 40 characters. */
  maxMetadataKeys: REQUEST_FIELD_LIMITS.maxMetadataKeys,
  maxMetadataKeyLength: REQUEST_FIELD_LIMITS.maxMetadataKeyLength,
  maxUrlLength: REQUEST_FIELD_LIMITS.maxUrlLength,
  maxExternalCustomerIdLength: 255,
} as const;

/**
 * ISO 4217's code reserved for testing: not money, but the rates sandbox answers it as an outage (503
 * rate_source_unavailable), so a plan or quote may name it to try that path.
 */
export const ISO_TEST_CURRENCY = 'XTS';

/**
 * A currency code: three letters, any case, stored upper case (else 400 on `param`). Three letters that are no ISO-4217
 * currency in use (made up, withdrawn, a unit of account; `XTS` excepted) are 422 `price_currency_not_quotable`: SPEC
 * names that answer for a currency that cannot be quoted, and nothing quotes those; the message says why. So is a
 * currency without hundredths (JPY, KWD): SPEC prices in hundredths, "every currency accepted today has two decimals",
 * and a price in JPY would be read as a hundred times what the merchant meant.
 */
export function parseCurrency(value: unknown, param = 'price_currency'): string {
  if (typeof value !== 'string' || !/^[A-Za-z]{3}$/.test(value))
    throw validationError(param, `${param} must be a three-letter ISO-4217 currency code (for example ARS).`);
  const code = value.toUpperCase();
  if (code === ISO_TEST_CURRENCY || isTwoDecimalIsoCurrency(code)) return code;
  throw cannotProcess(
    'price_currency_not_quotable',
    isIsoCurrency(code)
      ? `${code} has no hundredths: prices are in hundredths of a two-decimal currency, so ${code} cannot be quoted.`
      : `${code} is not an ISO-4217 currency in use, so no rate can quote it (for example ARS).`,
    param,
  );
}

/** SPEC Conventions: an integer string, no sign, decimal point or separator; positive; at most 30 digits. */
export function parsePositiveAmount(value: unknown, param: string): bigint {
  // The length before the shape: a 100-digit amount was told it had a sign or a leading zero.
  if (
    typeof value === 'string' &&
    /^[1-9][0-9]*$/.test(value) &&
    value.length > SUBSCRIPTION_CHECKOUT_LIMITS.maxAmountDigits
  ) {
    throw validationError(
      param,
      `${param} must have at most ${SUBSCRIPTION_CHECKOUT_LIMITS.maxAmountDigits} digits.`,
    );
  }
  if (!isAmountString(value)) {
    throw validationError(
      param,
      `${param} must be a string of digits in minor units of price_currency (for example "150000" for 1,500.00), with no sign, decimal point, separator or leading zero.`,
    );
  }
  const amount = BigInt(value);
  if (amount <= 0n) throw validationError(param, `${param} must be greater than 0.`);
  return amount;
}

export function parseIntegerInRange(
  value: unknown,
  param: string,
  min: number,
  max: number,
  unit: string,
): number {
  if (typeof value !== 'number' || !Number.isInteger(value)) {
    throw validationError(param, `${param} must be an integer number of ${unit}.`);
  }
  if (value < min || value > max) {
    throw validationError(param, `${param} must be between ${min} and ${max} ${unit}.`);
  }
  return value;
}

export function parseExternalCustomerId(value: unknown): string | null {
  if (value === undefined || value === null) return null;
  const max = SUBSCRIPTION_CHECKOUT_LIMITS.maxExternalCustomerIdLength;
  if (typeof value !== 'string' || value.length === 0 || value.length > max) {
    throw validationError(
      'external_customer_id',
      `external_customer_id must be a string of 1 to ${max} characters.`,
    );
  }
  // The merchant's reference for a person, read back in dashboards, exports and support: an identifier, so no control
  // character, and held to the display-text rule.
  return requireDisplayText(
    'external_customer_id',
    requireNoControlCharacters('external_customer_id', value),
  );
}

/** SPEC Subscription checkouts 6: the metadata keys the hosted subscribe page renders to the payer. */
export const RENDERED_METADATA_KEYS = ['plan_name', 'plan_description'] as const;

/** `parseMetadata`, with the values the hosted subscribe page renders held to the display-text rule. */
export function parseSubscriptionCheckoutMetadata(value: unknown): Record<string, string> {
  const metadata = parseMetadata(value);
  for (const key of RENDERED_METADATA_KEYS) {
    const text = metadata[key];
    if (text !== undefined) requireDisplayText(nestedParam('metadata', key), text);
  }
  return metadata;
}

/**
 * CAIP-2 ids, `eip155:` only, each one the service supports; no duplicates; at least one. Omitted: every
 * supported chain. Errors name `supported_chains` with a code (invalid_caip2, unsupported_chain_namespace,
 * unsupported_chain, duplicate_chain).
 */
export function parseSupportedChains(value: unknown, available: readonly string[]): string[] {
  const param = 'supported_chains';
  if (value === undefined || value === null) return [...available];
  if (!Array.isArray(value))
    throw validationError(param, 'supported_chains must be an array of CAIP-2 chain ids.');
  if (value.length === 0) throw validationError(param, 'supported_chains must name at least one chain.');
  const out: string[] = [];
  for (const item of value as unknown[]) {
    let caip2: string;
    try {
      caip2 = parseCaip2(item, param).caip2;
    } catch (error) {
      if (error instanceof DomainError) {
        throw validationError(param, `supported_chains: ${error.message}.`, error.code);
      }
      throw error;
    }
    if (!available.includes(caip2)) {
      throw validationError(
        param,
        `supported_chains: ${caip2} is not supported (supported: ${available.join(', ') || 'none'}).`,
        'unsupported_chain',
      );
    }
    if (out.includes(caip2))
      throw validationError(param, `supported_chains: ${caip2} is listed twice.`, 'duplicate_chain');
    out.push(caip2);
  }
  return out;
}

/** A 32-byte hex id: `0x` + 64 lower-case hex digits. */
export function isOnchainId(value: string): boolean {
  return /^0x[0-9a-f]{64}$/.test(value);
}
