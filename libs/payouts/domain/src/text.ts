import { requireDisplayText, validationError } from '@stablepay/util';

// C0 and C1 control characters (NUL included), as merchant names (merchants rules.ts CONTROL).
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/**
 * A required text field of a customer or beneficiary: shown to people (the merchant's dashboard, the KYC provider, a
 * bank that matches the holder name against the account), so one line of visible text, as merchant names are
 * (merchants requireName). 400 validation_error naming `param`.
 */
export function requiredText(value: unknown, param: string, max: number, what: string): string {
  if (value === undefined || value === null) throw validationError(param, `${param} is required: ${what}.`);
  if (typeof value !== 'string' || value.trim().length === 0 || [...value].length > max)
    throw validationError(param, `${param} must be ${what} (1 to ${max} characters).`);
  if (CONTROL.test(value))
    throw validationError(param, `${param} must not contain control characters (tab, line break, NUL, ...).`);
  return requireDisplayText(param, value.trim());
}
