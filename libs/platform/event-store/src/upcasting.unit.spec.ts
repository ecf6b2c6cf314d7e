import { type Upcaster, UpcasterRegistry } from './upcasting';

const v1to2: Upcaster = {
  from: 'NoteTaken.v1',
  to: 'NoteTaken.v2',
  upcast: (data) => ({ text: (data as { note: string }).note }),
};
const v2to3: Upcaster = {
  from: 'NoteTaken.v2',
  to: 'NoteTaken.v3',
  upcast: (data) => ({ ...(data as object), lang: 'en' }),
};

describe('UpcasterRegistry', () => {
  it('chains v1 -> v2 -> v3 and keeps the rest of the event', () => {
    const registry = new UpcasterRegistry([v2to3, v1to2]);
    const stored = Object.freeze({
      id: 'e1',
      revision: 4,
      type: 'NoteTaken.v1',
      data: Object.freeze({ note: 'hi' }),
    });
    expect(registry.upcast(stored)).toEqual({
      id: 'e1',
      revision: 4,
      type: 'NoteTaken.v3',
      data: { text: 'hi', lang: 'en' },
    });
    expect(registry.upcast({ type: 'NoteTaken.v2', data: { text: 'yo' } })).toEqual({
      type: 'NoteTaken.v3',
      data: { text: 'yo', lang: 'en' },
    });
  });

  it('returns an event of the newest (or an unknown) type as it is', () => {
    const registry = new UpcasterRegistry([v1to2, v2to3]);
    const newest = { type: 'NoteTaken.v3', data: { text: 'x', lang: 'en' } };
    expect(registry.upcast(newest)).toBe(newest);
    const other = { type: 'Unrelated.v1', data: {} };
    expect(registry.upcast(other)).toBe(other);
  });

  it('accepts the same upcaster twice but refuses two upcasters of one type, a same-type step and cycles', () => {
    expect(new UpcasterRegistry([v1to2, v1to2]).size).toBe(1);
    expect(() => new UpcasterRegistry([v1to2, { ...v1to2 }])).toThrow(
      "two upcasters read event type 'NoteTaken.v1'",
    );
    expect(() => new UpcasterRegistry([{ from: 'A.v1', to: 'A.v1', upcast: (d) => d }])).toThrow(
      'another type',
    );
    expect(
      () =>
        new UpcasterRegistry([
          { from: 'A.v1', to: 'A.v2', upcast: (d) => d },
          { from: 'A.v2', to: 'A.v1', upcast: (d) => d },
        ]),
    ).toThrow('cycle');
  });
});
