import { createHash, randomBytes, randomFillSync } from 'node:crypto';

/**
 * Random bytes from the CSPRNG, drawn from a pool filled 4 KiB at a time (as Node's randomUUID does): a
 * synchronous `randomBytes` call per id costs an allocation and a call into OpenSSL, ~1% of the gateway's CPU on
 * a create. Each byte is handed out once; a refill makes a new pool, so a returned view is never overwritten.
 */
const POOL_SIZE = 4096;
let pool = Buffer.alloc(0);
let poolOffset = 0;

export function pooledRandomBytes(length: number): Buffer {
  if (length > POOL_SIZE / 4) return randomBytes(length);
  if (poolOffset + length > pool.length) {
    pool = randomFillSync(Buffer.allocUnsafe(POOL_SIZE));
    poolOffset = 0;
  }
  const bytes = pool.subarray(poolOffset, poolOffset + length);
  poolOffset += length;
  return bytes;
}

/** `0x` and `length` random bytes in hex (an on-chain id, a nonce). */
export function randomHex(length: number): string {
  return `0x${pooledRandomBytes(length).toString('hex')}`;
}

/**
 * Prefixed, time-sortable ids: `<prefix>_` + 10 chars of Crockford base32 milliseconds + 16 random chars.
 * Sorting ids as strings sorts them by creation time, which is what newest-first lists and cursors want.
 */
const ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

function encodeTime(ms: number): string {
  let out = '';
  let rest = ms;
  for (let i = 0; i < 10; i++) {
    out = ALPHABET[rest % 32] + out;
    rest = Math.floor(rest / 32);
  }
  return out;
}

function encodeRandom(length: number): string {
  const bytes = pooledRandomBytes(length);
  let out = '';
  for (const b of bytes) out += ALPHABET[b % 32];
  return out;
}

export function newId(prefix: string, at: Date = new Date()): string {
  return `${prefix}_${encodeTime(at.getTime())}${encodeRandom(16)}`.toLowerCase();
}

/**
 * An id of newId's shape derived from a seed (a command id with what scopes it): the same seed always gives the
 * same id, so a retried create names the aggregate its first attempt created. Not time-sortable; lists order by
 * their own sequence, not by id.
 */
export function derivedId(prefix: string, seed: string): string {
  const digest = createHash('sha256').update(seed).digest();
  let out = '';
  for (let i = 0; i < 26; i++) out += ALPHABET[(digest[i] ?? 0) % 32];
  return `${prefix}_${out}`.toLowerCase();
}

/** A UUID v4-shaped id, for event ids where the store expects a UUID. */
export function newUuid(): string {
  return crypto.randomUUID();
}

/**
 * JSON with object keys sorted: the same parameters in another key order give the same string (a derived id's
 * seed must not depend on how a client ordered its body).
 */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v !== null && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v,
  );
}
