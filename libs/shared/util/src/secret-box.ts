import { createCipheriv, createDecipheriv, createHash, createHmac, randomBytes } from 'node:crypto';

/** A sealed secret that none of the configured keys opens (wrong key, tampered or moved ciphertext). */
export class SecretUnreadableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SecretUnreadableError';
  }
}

/**
 * Secrets at rest (webhook signing secrets) are sealed with AES-256-GCM under a key from the environment:
 * a copy of the database alone does not reveal them. The associated data binds a ciphertext to its row id,
 * so swapping ciphertexts between rows fails authentication.
 *
 * Key rotation: new secrets are sealed under the current key; older keys (`previousKeys`) only open what they sealed,
 * so an operator can replace the key without breaking every merchant's deliveries, re-seal (`resealed`), and retire
 * the old key once nothing needs it.
 */
export class SecretBox {
  private readonly key: Buffer;
  private readonly previousKeys: readonly Buffer[];

  constructor(key: Buffer, previousKeys: readonly Buffer[] = []) {
    for (const k of [key, ...previousKeys])
      if (k.length !== 32) throw new RangeError('SecretBox needs 32-byte keys');
    this.key = key;
    this.previousKeys = previousKeys;
  }

  /** Accepts 64 hex characters or base64 of 32 bytes, for the current key and each previous one. */
  static fromEncodedKey(encoded: string, previousEncoded: readonly string[] = []): SecretBox {
    return new SecretBox(decodeKey(encoded), previousEncoded.map(decodeKey));
  }

  seal(plaintext: string, associatedData: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(Buffer.from(associatedData, 'utf8'));
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return [
      'v1',
      iv.toString('base64'),
      cipher.getAuthTag().toString('base64'),
      body.toString('base64'),
    ].join('.');
  }

  /**
   * A keyed fingerprint of a low-entropy secret (a bank account number): the same value gives the same fingerprint
   * under the current key, and without the key a fingerprint cannot be matched against guesses (an unkeyed hash of a
   * 12-digit number can). `purpose` separates the uses of one key.
   */
  digest(value: string, purpose: string): string {
    return createHmac('sha256', this.key)
      .update(`${purpose}\u0000${value}`, 'utf8')
      .digest('hex')
      .slice(0, 32);
  }

  open(sealed: string, associatedData: string): string {
    return this.openWithKeyIndex(sealed, associatedData).plaintext;
  }

  /**
   * Opens a secret and, when an older key opened it, also returns it sealed under the current key (for re-sealing
   * after a key rotation; null when the current key opened it). Throws SecretUnreadableError when no key opens it.
   */
  openAndReseal(sealed: string, associatedData: string): { plaintext: string; resealed: string | null } {
    const { plaintext, keyIndex } = this.openWithKeyIndex(sealed, associatedData);
    return { plaintext, resealed: keyIndex === 0 ? null : this.seal(plaintext, associatedData) };
  }

  private openWithKeyIndex(sealed: string, associatedData: string): { plaintext: string; keyIndex: number } {
    const [version, iv, tag, body] = sealed.split('.');
    if (version !== 'v1' || !iv || !tag || body === undefined)
      throw new SecretUnreadableError('unrecognised sealed secret format');
    const keys = [this.key, ...this.previousKeys];
    for (let keyIndex = 0; keyIndex < keys.length; keyIndex++) {
      const decipher = createDecipheriv('aes-256-gcm', keys[keyIndex] as Buffer, Buffer.from(iv, 'base64'));
      decipher.setAAD(Buffer.from(associatedData, 'utf8'));
      decipher.setAuthTag(Buffer.from(tag, 'base64'));
      try {
        const plaintext = Buffer.concat([
          decipher.update(Buffer.from(body, 'base64')),
          decipher.final(),
        ]).toString('utf8');
        return { plaintext, keyIndex };
      } catch {
        // GCM authentication failed: not this key (or not this row); try the next one.
      }
    }
    throw new SecretUnreadableError(
      `no configured key opens the sealed secret of ${associatedData} (${keys.length} key(s) tried)`,
    );
  }
}

function decodeKey(encoded: string): Buffer {
  return /^[0-9a-fA-F]{64}$/.test(encoded) ? Buffer.from(encoded, 'hex') : Buffer.from(encoded, 'base64');
}

/** A short, non-reversible fingerprint to name a secret in events and logs. */
export function fingerprint(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex').slice(0, 16);
}
