import { derivedId, newId, pooledRandomBytes, randomHex } from './ids';

describe('newId', () => {
  it('has the prefix and sorts by creation time as a string', () => {
    const a = newId('chk', new Date('2026-01-01T00:00:00Z'));
    const b = newId('chk', new Date('2026-01-01T00:00:00.001Z'));
    expect(a).toMatch(/^chk_[0-9a-z]{26}$/);
    expect(a < b).toBe(true);
  });
  it('differs between two ids made in the same millisecond', () => {
    const at = new Date();
    expect(newId('x', at)).not.toBe(newId('x', at));
  });
});

describe('derivedId', () => {
  it("has newId's shape and is the same for the same seed only", () => {
    const a = derivedId('schk', 'mer_1\u0000test\u0000key-1');
    expect(a).toMatch(/^schk_[0-9a-z]{26}$/);
    expect(derivedId('schk', 'mer_1\u0000test\u0000key-1')).toBe(a);
    expect(derivedId('schk', 'mer_2\u0000test\u0000key-1')).not.toBe(a);
  });
});

describe('pooledRandomBytes', () => {
  it('hands out each byte of the pool once, across refills, and never overwrites a view it returned', () => {
    const first = pooledRandomBytes(32);
    const kept = Buffer.from(first);
    const seen = new Set<string>();
    // 600 x 32 bytes: several 4 KiB pools.
    for (let i = 0; i < 600; i++) {
      const bytes = pooledRandomBytes(32);
      expect(bytes).toHaveLength(32);
      seen.add(bytes.toString('hex'));
    }
    expect(seen.size).toBe(600);
    expect(first.equals(kept)).toBe(true);
    expect(pooledRandomBytes(4096)).toHaveLength(4096);
  });

  it('randomHex: 0x and the bytes in hex', () => {
    expect(randomHex(32)).toMatch(/^0x[0-9a-f]{64}$/);
    expect(randomHex(32)).not.toBe(randomHex(32));
  });
});
