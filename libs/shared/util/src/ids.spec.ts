import { newId } from './ids';

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
