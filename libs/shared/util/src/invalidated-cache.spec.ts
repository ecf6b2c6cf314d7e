import { InvalidatedCache } from './invalidated-cache';

describe('InvalidatedCache', () => {
  let now = 0;
  const cache = () => new InvalidatedCache<string>({ ttlMs: 1_000, maxEntries: 2, now: () => now });

  it('serves a hit until its time to live runs out, and never stores a miss', async () => {
    const c = cache();
    let loads = 0;
    const load = async () => ({ value: `v${++loads}`, group: 'mer_1' });
    expect(await c.get('k', load)).toBe('v1');
    expect(await c.get('k', load)).toBe('v1');
    now += 1_001;
    expect(await c.get('k', load)).toBe('v2');
    expect(await c.get('missing', async () => undefined)).toBeUndefined();
    expect(await c.get('missing', async () => ({ value: 'now there', group: 'mer_1' }))).toBe('now there');
  });

  it('drops a group at once, and does not store a load that overlapped an invalidation of its group', async () => {
    const c = cache();
    expect(await c.get('a', async () => ({ value: 'old', group: 'mer_1' }))).toBe('old');
    expect(await c.get('b', async () => ({ value: 'other', group: 'mer_2' }))).toBe('other');
    c.invalidate('mer_1');
    expect(await c.get('a', async () => ({ value: 'new', group: 'mer_1' }))).toBe('new');
    expect(await c.get('b', async () => ({ value: 'reloaded', group: 'mer_2' }))).toBe('other');

    const overlapping = await c.get('c', async () => {
      c.invalidate('mer_3'); // the projection changed the row while this load was reading it
      return { value: 'stale', group: 'mer_3' };
    });
    expect(overlapping).toBe('stale');
    expect(await c.get('c', async () => ({ value: 'fresh', group: 'mer_3' }))).toBe('fresh');
  });
});
