import type { ModuleRef } from '@nestjs/core';
import { EventEmitter } from 'node:events';
import { merchantSettingsCache, MerchantSettingsProjection } from './merchant-settings.projection';

/** A ModuleRef that finds the given projection (or none, like a process without the merchants module). */
const moduleRefWith = (projection: { changes: EventEmitter } | undefined): ModuleRef =>
  ({
    get: (token: unknown) => {
      if (token !== MerchantSettingsProjection || !projection) throw new Error('not found');
      return projection;
    },
  }) as unknown as ModuleRef;

describe('merchantSettingsCache', () => {
  it("serves a merchant's value from memory until the projection in this process commits a change for that merchant", async () => {
    const projection = { changes: new EventEmitter() };
    const cache = merchantSettingsCache<string>(moduleRefWith(projection), { ttlMs: 60_000, maxEntries: 10 });
    if (!cache) throw new Error('expected a cache where the projection runs');
    let stored = 'Acme';
    let loads = 0;
    const get = (merchantId: string) =>
      cache.get(merchantId, async () => {
        loads++;
        return { value: `${merchantId}:${stored}`, group: merchantId };
      });

    expect(await get('mer_a')).toBe('mer_a:Acme');
    expect(await get('mer_a')).toBe('mer_a:Acme');
    expect(loads).toBe(1);

    // PATCH /settings: the projection commits the new row, then announces it (as emitChange does).
    stored = 'Acme Streaming';
    projection.changes.emit('mer_a', 3);
    projection.changes.emit('changed', 'mer_a');
    expect(await get('mer_a')).toBe('mer_a:Acme Streaming');
    expect(loads).toBe(2);

    // Another merchant's change leaves this one cached.
    projection.changes.emit('changed', 'mer_b');
    expect(await get('mer_a')).toBe('mer_a:Acme Streaming');
    expect(loads).toBe(2);
  });

  it('is not there in a process without the merchants module (no change would reach it: read every time)', () => {
    expect(merchantSettingsCache(moduleRefWith(undefined), { ttlMs: 1_000, maxEntries: 10 })).toBeUndefined();
  });
});
