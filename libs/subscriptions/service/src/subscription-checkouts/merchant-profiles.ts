import { Inject, Injectable } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { fiatSettlementStatus, SettingsReader } from '@stablepay/merchants-service';
import type { SettlementContext } from '@stablepay/subscriptions-domain';

/** What a subscription checkout needs to know about its merchant, read from the merchants scope's settings. */
export interface MerchantProfile {
  readonly businessName: string;
  readonly backgroundColor: string | null;
  readonly primaryColor: string | null;
  readonly settlement: SettlementContext;
}

/**
 * Reads merchant settings through the merchants scope's read-side export (SettingsReader), wherever the process
 * registered it: the gateway hosts the merchants module, and the subscription checkout routes run there.
 */
@Injectable()
export class MerchantProfiles {
  private reader?: SettingsReader;

  constructor(@Inject(ModuleRef) private readonly moduleRef: ModuleRef) {}

  async get(merchantId: string): Promise<MerchantProfile> {
    this.reader ??= this.moduleRef.get(SettingsReader, { strict: false });
    const row = await this.reader.get(merchantId);
    const fiat = fiatSettlementStatus(row);
    return {
      businessName: row.display_name,
      backgroundColor: row.background_color,
      primaryColor: row.primary_color,
      settlement:
        row.settlement_mode === 'fiat'
          ? { mode: 'fiat', currency: fiat.currency, complete: fiat.complete }
          : { mode: 'crypto' },
    };
  }
}
