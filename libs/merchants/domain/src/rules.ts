import { requireDisplayText, requireNoControlCharacters, validationError } from '@stablepay/util';
import type { FiatSettlementDetails } from './merchant.events';

/** SPEC Settings > Branding: exactly `#` and 6 hex digits; shorthand such as `#fff` is rejected. */
const COLOR = /^#[0-9a-fA-F]{6}$/;
export function isBrandingColor(value: string): boolean {
  return COLOR.test(value);
}

/** An EVM address: 20 bytes hex, either all lowercase or correctly EIP-55 checksummed (checked by the caller). */
const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
export function isAddressShape(value: string): boolean {
  return ADDRESS.test(value);
}

export function requireBrandingColor(param: string, value: string | null): string | null {
  if (value === null) return null;
  if (!isBrandingColor(value)) {
    throw validationError(
      param,
      `${param} must be a 6-digit hex color with a leading # (for example #1A2B3C), or null to reset.`,
    );
  }
  return value.toUpperCase();
}

/** The exact text a merchant pauser signs (EIP-191 personal message) to prove control of the address. */
export function pauserDeclarationMessage(merchantId: string, mode: 'test' | 'live'): string {
  return [
    'Stablepay pause authority declaration',
    `Merchant: ${merchantId}`,
    `Mode: ${mode}`,
    "I control this address and accept it as the pauser of this merchant's subscription manager.",
    'The pauser is bound into the manager address and cannot change once the manager is deployed.',
  ].join('\n');
}

export const WEBHOOK_SECRET_GRACE_MS = 24 * 60 * 60 * 1000;

/** The fields a fiat settlement configuration needs before a fiat-settled business can sell (SPEC Rules 8). */
export const FIAT_SETTLEMENT_REQUIRED_FIELDS = [
  'currency',
  'beneficiaryName',
  'accountNumber',
  'country',
] as const;

/** Required fields still unset (empty when complete; every required field when nothing is configured). */
export function missingFiatSettlementFields(
  fiat: FiatSettlementDetails | null,
): Array<(typeof FIAT_SETTLEMENT_REQUIRED_FIELDS)[number]> {
  return FIAT_SETTLEMENT_REQUIRED_FIELDS.filter(
    (field) => !fiat || fiat[field] === null || fiat[field] === '',
  );
}

export function isFiatSettlementComplete(fiat: FiatSettlementDetails | null): boolean {
  return missingFiatSettlementFields(fiat).length === 0;
}

/**
 * Names shown to customers (merchant name, display name): 1 to 100 characters of text, not blank. Characters are
 * Unicode code points, as JSON Schema's maxLength counts them (an emoji is one, not its two UTF-16 units; a family
 * emoji joined from five code points is five: grapheme clusters have no bound in code points, so they cannot bound
 * what is stored).
 */
export const MAX_NAME_LENGTH = 100;
/** Longest webhook URL kept (browsers and proxies handle far less in practice). */
export const MAX_WEBHOOK_URL_LENGTH = 2048;
export const MAX_WEBHOOK_EVENT_TYPES = 100;

export function requireName(param: string, value: unknown): string {
  if (typeof value !== 'string')
    throw validationError(param, `${param} must be a string (text of 1 to ${MAX_NAME_LENGTH} characters).`);
  if (value.trim() === '') throw validationError(param, `${param} must not be empty or blank.`);
  const length = [...value].length;
  if (length > MAX_NAME_LENGTH)
    throw validationError(param, `${param} must be at most ${MAX_NAME_LENGTH} characters (${length} given).`);
  // Nothing a name shown on a page may hold.
  requireNoControlCharacters(param, value);
  // Shown to payers on the hosted pages: a name of invisible characters, or one a bidi override makes read as
  // another, would let a merchant pass for someone else.
  return requireDisplayText(param, value);
}

const ZERO_ADDRESS = /^0x0{40}$/;

/** A 20-byte hex address that can receive or sign: the zero address burns funds and has no key. */
export function requireAddress(param: string, value: unknown): string {
  if (typeof value !== 'string' || !isAddressShape(value))
    throw validationError(param, `${param} must be a 20-byte hex address (0x followed by 40 hex digits).`);
  if (ZERO_ADDRESS.test(value)) throw validationError(param, `${param} must not be the zero address.`);
  return value;
}

/** The fields of a profile update as the read model holds them (the decider's last line of defence). */
export function requireProfileFields(fields: {
  displayName?: unknown;
  webhookUrl?: unknown;
  backgroundColor?: unknown;
  primaryColor?: unknown;
  webhookEventTypes?: unknown;
}): void {
  if (fields.displayName !== undefined) requireName('display_name', fields.displayName);
  const url = fields.webhookUrl;
  if (url !== undefined && url !== null && (typeof url !== 'string' || url.length > MAX_WEBHOOK_URL_LENGTH))
    throw validationError(
      'webhook_url',
      `webhook_url must be a URL of at most ${MAX_WEBHOOK_URL_LENGTH} characters, or null.`,
    );
  for (const [param, value] of [
    ['background_color', fields.backgroundColor],
    ['primary_color', fields.primaryColor],
  ] as const) {
    if (value !== undefined && value !== null && (typeof value !== 'string' || !isBrandingColor(value)))
      requireBrandingColor(param, typeof value === 'string' ? value : '');
  }
  const types = fields.webhookEventTypes;
  if (
    types !== undefined &&
    types !== null &&
    (!Array.isArray(types) ||
      types.length > MAX_WEBHOOK_EVENT_TYPES ||
      types.some((t) => typeof t !== 'string' || t.length === 0 || t.length > 100))
  )
    throw validationError(
      'webhook_event_types',
      `webhook_event_types must be a list of at most ${MAX_WEBHOOK_EVENT_TYPES} event type names, or null.`,
    );
}
