import { requireDisplayText, requireNoControlCharacters, validationError } from '@stablepay/util';

/**
 * A required text field of a customer or beneficiary: shown to people (the merchant's dashboard, the KYC provider, a
 * bank that matches the holder name against the account), so one line of visible text, as merchant names are
 * (merchants requireName). 400 validation_error naming `param`.
 */
export function requiredText(value: unknown, param: string, max: number, what: string): string {
  if (value === undefined || value === null) throw validationError(param, `${param} is required: ${what}.`);
  if (typeof value !== 'string' || value.trim().length === 0 || [...value].length > max)
    throw validationError(param, `${param} must be ${what} (1 to ${max} characters).`);
  return requireDisplayText(param, requireNoControlCharacters(param, value).trim());
}
