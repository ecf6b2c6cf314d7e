import { Inject, Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { ApiKeyResolver, AuthenticatedMerchant } from '@stablepay/http';
import { InvalidatedCache } from '@stablepay/util';
import { MerchantSettingsProjection } from './merchant-settings.projection';

type Resolved = AuthenticatedMerchant & { keyHash: string };

/**
 * API keys by SHA-256 hash, from the api_keys read model, cached: every authenticated request used to cost a
 * query. Any change the settings projection applies to a merchant drops that merchant's keys at once in this
 * process (where a key rotation or revocation would be projected); another process trusts an entry for at most
 * 30 s. Unknown keys are asked again every time (a new merchant's key appears once projected).
 */
@Injectable()
export class MerchantApiKeyResolver implements ApiKeyResolver {
  private readonly cache = new InvalidatedCache<Resolved>({ ttlMs: 30_000, maxEntries: 10_000 });

  constructor(
    @Inject(DataSource) private readonly dataSource: DataSource,
    @Inject(MerchantSettingsProjection) projection: MerchantSettingsProjection,
  ) {
    projection.changes.on('changed', (merchantId: string) => this.cache.invalidate(merchantId));
  }

  async resolve(keyHash: string): Promise<Resolved | null> {
    const found = await this.cache.get(keyHash, async () => {
      const rows: Array<{ merchant_id: string; mode: 'test' | 'live'; key_hash: string }> =
        await this.dataSource.query('SELECT merchant_id, mode, key_hash FROM api_keys WHERE key_hash = $1', [
          keyHash,
        ]);
      const row = rows[0];
      return row
        ? {
            value: { merchantId: row.merchant_id, mode: row.mode, keyHash: row.key_hash },
            group: row.merchant_id,
          }
        : undefined;
    });
    return found ?? null;
  }
}
