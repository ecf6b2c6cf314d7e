import { requireNoControlCharacters } from './control-characters';
import { nestedParam, validationError } from './errors';

/**
 * Limits of the free-form fields every create call accepts (subscription checkouts, checkouts). SPEC: metadata
 * values of at most 500 characters; the key count, key length and URL length are ours.
 */
export const REQUEST_FIELD_LIMITS = {
  maxMetadataValueLength: 500,
  maxMetadataKeys: 50,
  maxMetadataKeyLength: 40,
  maxUrlLength: 2048,
} as const;

/** `metadata`: an object of string values within REQUEST_FIELD_LIMITS; absent or null is empty. */
export function parseMetadata(value: unknown): Record<string, string> {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw validationError('metadata', 'metadata must be an object of string values.');
  }
  const entries = Object.entries(value as Record<string, unknown>);
  const limits = REQUEST_FIELD_LIMITS;
  if (entries.length > limits.maxMetadataKeys) {
    throw validationError('metadata', `metadata can have at most ${limits.maxMetadataKeys} keys.`);
  }
  const out: Record<string, string> = {};
  for (const [key, v] of entries) {
    if (key.length === 0 || key.length > limits.maxMetadataKeyLength) {
      throw validationError(
        'metadata',
        `metadata keys must be 1 to ${limits.maxMetadataKeyLength} characters.`,
      );
    }
    // A key is an identifier (it names the value in param paths, exports and webhooks); the key itself is not put in
    // `param`, which would then carry the control character.
    requireNoControlCharacters('metadata', key);
    const param = nestedParam('metadata', key);
    if (typeof v !== 'string') throw validationError(param, `${param} must be a string.`);
    // Characters as a person counts them (code points), so an emoji is one.
    if ([...v].length > limits.maxMetadataValueLength) {
      throw validationError(param, `${param} must be at most ${limits.maxMetadataValueLength} characters.`);
    }
    out[key] = requireNoControlCharacters(param, v, { lineBreaks: true });
  }
  return out;
}

/** A merchant redirect address: an absolute http(s) URL without credentials; absent or null is null. */
export function parseRedirectUrl(value: unknown, param: string): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string' || value.length === 0) {
    throw validationError(param, `${param} must be an absolute http(s) URL.`);
  }
  if (value.length > REQUEST_FIELD_LIMITS.maxUrlLength) {
    throw validationError(param, `${param} must be at most ${REQUEST_FIELD_LIMITS.maxUrlLength} characters.`);
  }
  // The URL parser drops tabs and line breaks without a word, so the stored text would not be the address used.
  requireNoControlCharacters(param, value);
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw validationError(param, `${param} must be an absolute http(s) URL.`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw validationError(param, `${param} must use https (or http).`);
  }
  if (url.username || url.password) throw validationError(param, `${param} must not contain credentials.`);
  return value;
}

// What arrived, short enough for an error message: a string cut to 40 characters, other scalars as JSON, and only
// the kind of an object or array.
function received(value: unknown): string {
  if (typeof value === 'string') {
    const chars = [...value];
    return chars.length > 40
      ? `${JSON.stringify(chars.slice(0, 40).join(''))}... (${chars.length} characters)`
      : JSON.stringify(value);
  }
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object' && value !== null) return 'an object';
  return typeof value === 'bigint' ? String(value) : (JSON.stringify(value) ?? typeof value);
}

/**
 * The message for a field that was absent or malformed, telling the two apart: "x is required: <what>." when absent
 * (undefined or null), "x must be <what>; received <value>." when present (a malformed value was reported as
 * missing before).
 */
export function fieldFault(param: string, value: unknown, what: string): string {
  return value === undefined || value === null
    ? `${param} is required: ${what}.`
    : `${param} must be ${what}; received ${received(value)}.`;
}

/** The largest value a Solidity uint256 holds: what a signed deadline, epoch or token amount can be at most. */
export const MAX_UINT256 = (1n << 256n) - 1n;

/**
 * The message for an integer above `max` (a string of digits, or a JSON number), null for anything else: a value
 * that is a non-negative integer but too large is told so, rather than that it is not a non-negative integer.
 */
export function tooLargeFault(param: string, value: unknown, max: bigint = MAX_UINT256): string | null {
  let digits: string;
  if (typeof value === 'string' && /^[0-9]+$/.test(value)) digits = value.replace(/^0+(?=.)/, '');
  else if (typeof value === 'number' && Number.isInteger(value) && value >= 0)
    digits = BigInt(value).toString();
  else return null;
  // Compared by length first: BigInt of a megabyte of digits would be slow for nothing.
  const limit = max.toString();
  if (digits.length < limit.length || (digits.length === limit.length && BigInt(digits) <= max)) return null;
  return max === MAX_UINT256
    ? `${param} must be at most 2^256 - 1 (${limit}), the largest uint256.`
    : `${param} must be at most ${limit}.`;
}
