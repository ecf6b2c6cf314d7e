import { Inject, Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { fiatSettlementStatus, type MerchantSettingsRow } from '@stablepay/merchants-service';
import type { SettlementContext } from '@stablepay/subscriptions-domain';
import { notFound } from '@stablepay/util';

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
 * Reads the merchants scope's settings read model (`merchant_settings`, one database) directly, so the service
 * and the gateway can run it in any process, with or without the merchants module.
 */
@Injectable()
export class MerchantProfiles {
  constructor(@Inject(DataSource) private readonly dataSource: DataSource) {}

  async get(merchantId: string): Promise<MerchantProfile> {
    const rows: MerchantSettingsRow[] = await this.dataSource.query(
      'SELECT * FROM merchant_settings WHERE merchant_id = $1',
      [merchantId],
    );
    const row = rows[0];
    if (!row) throw notFound('merchant', merchantId);
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
