import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Mode } from '@stablepay/event-store';

/** `sk_test_` / `sk_live_` + 32 base62 characters (~190 bits). */
const API_KEY = /^sk_(test|live)_[0-9A-Za-z]{24,128}$/;
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

export function generateApiKey(mode: Mode): string {
  const bytes = randomBytes(32);
  let body = '';
  for (const b of bytes) body += BASE62[b % 62];
  return `sk_${mode}_${body}`;
}

export function parseApiKey(key: string): { mode: Mode } | null {
  const m = API_KEY.exec(key);
  return m?.[1] ? { mode: m[1] as Mode } : null;
}

/**
 * Keys are stored as SHA-256 hashes: a leaked table does not leak keys, and because keys carry ~190 bits of
 * randomness a fast hash is enough (no password-style stretching needed).
 */
export function hashApiKey(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}

/** The request property holding the hashes of the keys it presents (decorated by createHttpApp). */
export const API_KEY_HASHES = 'stablepayApiKeyHashes';
type HashingRequest = { [API_KEY_HASHES]?: Array<readonly [key: string, hash: string]> | null };

/**
 * `hashApiKey` of a key this request presents, computed once per request: the rate limits (before routing) and the
 * guard (at authentication) both need it, and a request carries at most two keys.
 */
export function presentedKeyHash(request: object, key: string): string {
  const r = request as HashingRequest;
  const known = r[API_KEY_HASHES]?.find(([k]) => k === key);
  if (known) return known[1];
  const hash = hashApiKey(key);
  (r[API_KEY_HASHES] ??= []).push([key, hash]);
  return hash;
}

/** The bearer token of an `Authorization` value, as the guards read it. */
const bearerToken = (authorization: string): string | undefined =>
  /^Bearer\s+(\S+)$/i.exec(authorization)?.[1];

/**
 * The API keys a request presents: `Authorization: Bearer` (the main surface) and `x-api-key` (the payment-request
 * surface, SPEC Authentication 5), as each guard reads them; one key sent in both headers is one key.
 */
export function presentedApiKeys(headers: Record<string, string | string[] | undefined>): string[] {
  const authorization = headers['authorization'];
  const bearer = typeof authorization === 'string' ? bearerToken(authorization) : undefined;
  const xApiKey = headers['x-api-key'];
  const other = typeof xApiKey === 'string' ? xApiKey.trim() : undefined;
  if (!bearer) return other ? [other] : [];
  return other && other !== bearer ? [bearer, other] : [bearer];
}

/**
 * Why the credentials of a request are ambiguous, or null: an `Authorization` or `x-api-key` header sent more than
 * once, or both headers naming different keys. Node keeps only the first `Authorization` of a request and joins
 * repeated `x-api-key` values, so which key a request meant would depend on header order and proxies; it is
 * refused (401, before any key is looked up) instead of served as whichever key came first. `rawHeaders` holds every
 * header as sent.
 */
export function ambiguousCredentials(raw: { readonly rawHeaders: readonly string[] }): string | null {
  let authorization: string | undefined;
  let xApiKey: string | undefined;
  const headers = raw.rawHeaders;
  for (let i = 0; i + 1 < headers.length; i += 2) {
    const name = (headers[i] as string).toLowerCase();
    const value = headers[i + 1] as string;
    if (name === 'authorization') {
      if (authorization !== undefined)
        return 'The request has more than one Authorization header. Send one API key, once.';
      authorization = value;
    } else if (name === 'x-api-key') {
      if (xApiKey !== undefined)
        return 'The request has more than one x-api-key header. Send one API key, once.';
      xApiKey = value;
    }
  }
  const other = xApiKey?.trim();
  if (authorization?.trim() && other && bearerToken(authorization) !== other)
    return 'The Authorization and x-api-key headers carry different credentials. Send one API key.';
  return null;
}

/** Constant-time comparison of two hex digests. */
export function sameDigest(a: string, b: string): boolean {
  const ab = Buffer.from(a, 'hex');
  const bb = Buffer.from(b, 'hex');
  return ab.length === bb.length && ab.length > 0 && timingSafeEqual(ab, bb);
}

/** The last four characters, for display ("sk_test_...abcd"): never the key itself. */
export function apiKeyHint(key: string): string {
  return `${key.slice(0, 8)}...${key.slice(-4)}`;
}
