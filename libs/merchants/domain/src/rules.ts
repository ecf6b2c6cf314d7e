import { validationError } from '@stablepay/util';
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
