import { randomBytes } from 'node:crypto';
import { fingerprint, SecretBox, SecretUnreadableError } from './secret-box';

describe('SecretBox', () => {
  const box = new SecretBox(randomBytes(32));
  it('round-trips and never contains the plaintext', () => {
    const sealed = box.seal('whsec_abc123', 'whs_1');
    expect(sealed).not.toContain('whsec_abc123');
    expect(box.open(sealed, 'whs_1')).toBe('whsec_abc123');
  });
  it('digest: the same value and purpose give the same keyed fingerprint; another key or purpose another one', () => {
    const key = randomBytes(32);
    const box = new SecretBox(key);
    const d = box.digest('000123456789', 'account');
    expect(d).toMatch(/^[0-9a-f]{32}$/);
    expect(new SecretBox(key).digest('000123456789', 'account')).toBe(d);
    expect(box.digest('000123456789', 'other')).not.toBe(d);
    expect(new SecretBox(randomBytes(32)).digest('000123456789', 'account')).not.toBe(d);
  });

  it('refuses a ciphertext moved to another row', () => {
    const sealed = box.seal('whsec_abc123', 'whs_1');
    expect(() => box.open(sealed, 'whs_2')).toThrow();
  });
  it('refuses another key', () => {
    const sealed = box.seal('whsec_abc123', 'whs_1');
    expect(() => new SecretBox(randomBytes(32)).open(sealed, 'whs_1')).toThrow();
  });
  it('opens with a previous key what it sealed, seals only with the current key, and re-seals under it', () => {
    const oldKey = randomBytes(32);
    const sealedBefore = new SecretBox(oldKey).seal('whsec_old', 'whs_1');
    const rotated = new SecretBox(randomBytes(32), [oldKey]);
    expect(rotated.open(sealedBefore, 'whs_1')).toBe('whsec_old');
    const { plaintext, resealed } = rotated.openAndReseal(sealedBefore, 'whs_1');
    expect(plaintext).toBe('whsec_old');
    expect(resealed).not.toBeNull();
    expect(() => new SecretBox(oldKey).open(resealed as string, 'whs_1')).toThrow(SecretUnreadableError);
    expect(rotated.openAndReseal(resealed as string, 'whs_1')).toEqual({
      plaintext: 'whsec_old',
      resealed: null,
    });
    expect(() => new SecretBox(oldKey).open(rotated.seal('whsec_new', 'whs_2'), 'whs_2')).toThrow(
      SecretUnreadableError,
    );
  });
  it('names an unreadable secret with its own error when no key opens it', () => {
    const sealed = box.seal('whsec_abc123', 'whs_1');
    expect(() => new SecretBox(randomBytes(32), [randomBytes(32)]).open(sealed, 'whs_1')).toThrow(
      SecretUnreadableError,
    );
    expect(() => box.open('v9.x.y.z', 'whs_1')).toThrow(SecretUnreadableError);
  });
  it('fingerprints are stable and short', () => {
    expect(fingerprint('x')).toBe(fingerprint('x'));
    expect(fingerprint('x')).toHaveLength(16);
  });
});
