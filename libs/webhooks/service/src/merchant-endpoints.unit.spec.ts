import { EventEmitter } from 'node:events';
import type { ModuleRef } from '@nestjs/core';
import type { DataSource } from 'typeorm';
import type { MerchantSettingsRow, WebhookSecrets } from '@stablepay/merchants-service';
import { ManualClock } from '@stablepay/util';
import { type MerchantEndpoint, MerchantEndpoints } from './merchant-endpoints';

function endpoint(over: Partial<MerchantSettingsRow> = {}): MerchantEndpoint {
  const row = {
    merchant_id: 'mer_1',
    webhook_url: 'https://hooks.example.com/x',
    webhook_secret_id: 'whs_1',
    previous_webhook_secret_id: null,
    previous_secret_expires_at: null,
    ...over,
  } as MerchantSettingsRow;
  return { merchantId: row.merchant_id, url: row.webhook_url, eventTypes: null, hasSecret: true, row };
}

describe('MerchantEndpoints.activeSecrets', () => {
  const clock = new ManualClock('2026-06-01T10:00:00.000Z');

  function endpoints(active: jest.Mock) {
    return new MerchantEndpoints(
      {} as DataSource,
      { active } as unknown as WebhookSecrets,
      clock,
      {} as ModuleRef,
    );
  }

  it('attempts that start together for one merchant open its secret once (one read and decryption)', async () => {
    let open: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const active = jest.fn(async () => {
      await gate;
      return { current: 'whsec_one' };
    });
    const subject = endpoints(active);
    const together = Array.from({ length: 16 }, () => subject.activeSecrets(endpoint()));
    open();
    expect(await Promise.all(together)).toEqual(Array(16).fill({ current: 'whsec_one' }));
    expect(await subject.activeSecrets(endpoint())).toEqual({ current: 'whsec_one' });
    expect(active).toHaveBeenCalledTimes(1);
  });

  it('a failed open is not kept: the next attempt tries again', async () => {
    const active = jest
      .fn()
      .mockRejectedValueOnce(new Error('database unavailable'))
      .mockResolvedValueOnce({ current: 'whsec_two' });
    const subject = endpoints(active);
    await expect(subject.activeSecrets(endpoint())).rejects.toThrow('database unavailable');
    expect(await subject.activeSecrets(endpoint())).toEqual({ current: 'whsec_two' });
  });

  it('a rotation window is a different key: the previous secret is opened with the current one', async () => {
    const active = jest
      .fn()
      .mockResolvedValueOnce({ current: 'whsec_new' })
      .mockResolvedValueOnce({ current: 'whsec_new', previous: 'whsec_old' });
    const subject = endpoints(active);
    expect(await subject.activeSecrets(endpoint())).toEqual({ current: 'whsec_new' });
    const rotated = endpoint({
      previous_webhook_secret_id: 'whs_0',
      previous_secret_expires_at: new Date(clock.now().getTime() + 60_000),
    });
    expect(await subject.activeSecrets(rotated)).toEqual({ current: 'whsec_new', previous: 'whsec_old' });
    expect(active).toHaveBeenCalledTimes(2);
  });
});

describe("MerchantEndpoints.cachedForMerchants (the claim's and the recorder's settings read)", () => {
  const clock = new ManualClock('2026-06-01T10:00:00.000Z');
  const changes = new EventEmitter();
  const moduleRef = { get: () => ({ changes }) } as unknown as ModuleRef;

  function subject() {
    const query = jest.fn(async (_sql: string, [ids]: [string[]]) =>
      ids.map((merchant_id) => ({ merchant_id, webhook_url: `https://hooks.example.com/${merchant_id}` })),
    );
    const endpoints = new MerchantEndpoints(
      { query } as unknown as DataSource,
      {} as WebhookSecrets,
      clock,
      moduleRef,
    );
    endpoints.onModuleInit();
    return { endpoints, query };
  }

  it('reads every merchant it misses in one statement, then serves them from the cache', async () => {
    const { endpoints, query } = subject();
    const ids = Array.from({ length: 8 }, (_, i) => `mer_${i}`);
    const found = await endpoints.cachedForMerchants([...ids, ...ids]);
    expect([...found.keys()].sort()).toEqual(ids);
    expect(found.get('mer_3')?.url).toBe('https://hooks.example.com/mer_3');
    expect(query).toHaveBeenCalledTimes(1);
    await endpoints.cachedForMerchants(ids);
    expect(query).toHaveBeenCalledTimes(1);
  });

  it('a merchant whose settings changed is read again at its next use', async () => {
    const { endpoints, query } = subject();
    await endpoints.cachedForMerchants(['mer_a', 'mer_b']);
    changes.emit('changed', 'mer_a');
    await endpoints.cachedForMerchants(['mer_a', 'mer_b']);
    expect(query).toHaveBeenCalledTimes(2);
    expect(query.mock.calls[1]?.[1]).toEqual([['mer_a']]);
  });
});
