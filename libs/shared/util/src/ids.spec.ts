import { derivedId, newId } from './ids';

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
