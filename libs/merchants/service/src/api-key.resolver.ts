import { Inject, Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { ApiKeyResolver, AuthenticatedMerchant } from '@stablepay/http';

/** API keys by SHA-256 hash, from the api_keys read model. */
@Injectable()
export class MerchantApiKeyResolver implements ApiKeyResolver {
  constructor(@Inject(DataSource) private readonly dataSource: DataSource) {}

  async resolve(keyHash: string): Promise<(AuthenticatedMerchant & { keyHash: string }) | null> {
    const rows: Array<{ merchant_id: string; mode: 'test' | 'live'; key_hash: string }> =
      await this.dataSource.query('SELECT merchant_id, mode, key_hash FROM api_keys WHERE key_hash = $1', [
        keyHash,
      ]);
    const row = rows[0];
    return row ? { merchantId: row.merchant_id, mode: row.mode, keyHash: row.key_hash } : null;
  }
}
