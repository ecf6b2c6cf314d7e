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
