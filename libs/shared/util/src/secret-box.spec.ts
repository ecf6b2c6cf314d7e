import { randomBytes } from 'node:crypto';
import { fingerprint, SecretBox } from './secret-box';

describe('SecretBox', () => {
  const box = new SecretBox(randomBytes(32));
  it('round-trips and never contains the plaintext', () => {
    const sealed = box.seal('whsec_abc123', 'whs_1');
    expect(sealed).not.toContain('whsec_abc123');
    expect(box.open(sealed, 'whs_1')).toBe('whsec_abc123');
  });
  it('refuses a ciphertext moved to another row', () => {
    const sealed = box.seal('whsec_abc123', 'whs_1');
    expect(() => box.open(sealed, 'whs_2')).toThrow();
  });
  it('refuses another key', () => {
    const sealed = box.seal('whsec_abc123', 'whs_1');
    expect(() => new SecretBox(randomBytes(32)).open(sealed, 'whs_1')).toThrow();
  });
  it('fingerprints are stable and short', () => {
    expect(fingerprint('x')).toBe(fingerprint('x'));
    expect(fingerprint('x')).toHaveLength(16);
  });
});
