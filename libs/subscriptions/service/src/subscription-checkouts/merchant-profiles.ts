import { Inject, Injectable, type OnModuleInit } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { DataSource } from 'typeorm';
import {
  fiatSettlementStatus,
  merchantSettingsCache,
  type MerchantSettingsRow,
  RegistrationStore,
} from '@stablepay/merchants-service';
import type { SettlementContext } from '@stablepay/subscriptions-domain';
import { type InvalidatedCache, notFound } from '@stablepay/util';

/** What a subscription checkout needs to know about its merchant, read from the merchants scope's settings. */
export interface MerchantProfile {
  readonly businessName: string;
  readonly backgroundColor: string | null;
  readonly primaryColor: string | null;
  readonly settlement: SettlementContext;
  /** Both a signer and a settlement address are in the settings (what subscribe registers on chain). */
  readonly hasSigner: boolean;
  readonly hasPauser: boolean;
}

/**
 * How long a cached profile is trusted. Only used where this process runs the settings projection, which drops a
 * merchant's entry the moment it commits a change (before any read-your-writes wait on it wakes); the bound covers
 * a change projected by another replica of the same process kind.
 */
const PROFILE_TTL_MS = 1_000;

/**
 * Reads the merchants scope's settings read model (`merchant_settings`, one database) directly, so the service
 * and the gateway can run it in any process, with or without the merchants module. Where the settings projection
 * runs in this process (the gateway, the embedded run) profiles are cached: every create read its merchant's row
 * (one statement of about four per create). Elsewhere every call reads, as no change would reach the cache.
 */
@Injectable()
export class MerchantProfiles implements OnModuleInit {
  private cache: InvalidatedCache<MerchantProfile> | undefined;

  constructor(
    @Inject(DataSource) private readonly dataSource: DataSource,
    @Inject(ModuleRef) private readonly moduleRef: ModuleRef,
  ) {}

  onModuleInit(): void {
    this.cache = merchantSettingsCache(this.moduleRef, { ttlMs: PROFILE_TTL_MS, maxEntries: 10_000 });
  }

  async get(merchantId: string): Promise<MerchantProfile> {
    const profile = this.cache
      ? await this.cache.get(merchantId, async () => {
          const value = await this.load(merchantId);
          return value ? { value, group: merchantId } : undefined;
        })
      : await this.load(merchantId);
    if (!profile) throw notFound('merchant', merchantId);
    return profile;
  }

  /**
   * Chains whose registry holds other values than the merchant's settings (the registration worker's rows, not
   * cached: the worker, not a settings change, moves them).
   */
  async changePendingChains(merchantId: string): Promise<string[]> {
    const rows = await new RegistrationStore(this.dataSource).forMerchant(merchantId);
    return rows.filter((r) => r.status === 'change_requires_merchant_signature').map((r) => r.chain);
  }

  private async load(merchantId: string): Promise<MerchantProfile | undefined> {
    const rows: MerchantSettingsRow[] = await this.dataSource.query(
      'SELECT * FROM merchant_settings WHERE merchant_id = $1',
      [merchantId],
    );
    const row = rows[0];
    if (!row) return undefined;
    const fiat = fiatSettlementStatus(row);
    return {
      businessName: row.display_name,
      backgroundColor: row.background_color,
      primaryColor: row.primary_color,
      settlement:
        row.settlement_mode === 'fiat'
          ? { mode: 'fiat', currency: fiat.currency, complete: fiat.complete }
          : { mode: 'crypto' },
      hasSigner: row.merchant_signer !== null && row.settlement_address !== null,
      hasPauser: row.merchant_pauser !== null,
    };
  }
}
