import { Inject, Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import {
  chainRegistrationStatus,
  fiatSettlementStatus,
  type MerchantSettingsRow,
  RegistrationStore,
} from '@stablepay/merchants-service';
import type { MerchantChainStatus } from '@stablepay/payments-domain';
import { notFound } from '@stablepay/util';

/** What a checkout needs to know about its merchant, from the merchants scope's settings read model. */
export interface PaymentMerchantProfile {
  readonly businessName: string;
  readonly backgroundColor: string | null;
  readonly primaryColor: string | null;
  readonly settlementMode: 'crypto' | 'fiat';
  /** Fiat-settled: PUT /payments/settlement holds a complete configuration. */
  readonly fiatSettlementComplete: boolean;
  /** The merchant's own record of what the chain's registry should hold for it (null until registered). */
  readonly merchantSigner: string | null;
  readonly settlementAddress: string | null;
  readonly mode: 'live' | 'test';
}

/** Reads `merchant_settings` (one database) directly, so the service and the gateway run it in any process. */
@Injectable()
export class PaymentMerchantProfiles {
  constructor(@Inject(DataSource) private readonly dataSource: DataSource) {}

  async get(merchantId: string): Promise<PaymentMerchantProfile> {
    const rows: MerchantSettingsRow[] = await this.dataSource.query(
      'SELECT * FROM merchant_settings WHERE merchant_id = $1',
      [merchantId],
    );
    const row = rows[0];
    if (!row) throw notFound('merchant', merchantId);
    return {
      businessName: row.display_name,
      backgroundColor: row.background_color,
      primaryColor: row.primary_color,
      settlementMode: row.settlement_mode,
      fiatSettlementComplete: fiatSettlementStatus(row).complete,
      merchantSigner: row.merchant_signer,
      settlementAddress: row.settlement_address,
      mode: row.mode,
    };
  }

  /**
   * The merchant's registration status on each of `chains` (settings' `chain_registrations`), from the
   * registration worker's table: a projection read, no chain call on the checkout path.
   */
  async chainStatuses(
    profile: Pick<PaymentMerchantProfile, 'merchantSigner' | 'settlementAddress'>,
    merchantId: string,
    chains: readonly string[],
  ): Promise<Record<string, MerchantChainStatus>> {
    if (chains.length === 0) return {};
    const registrations = await new RegistrationStore(this.dataSource).forMerchant(merchantId);
    const settings = {
      merchant_signer: profile.merchantSigner,
      settlement_address: profile.settlementAddress,
    };
    return Object.fromEntries(
      chains.map((chain) => [chain, chainRegistrationStatus(settings, registrations, chain)]),
    );
  }
}
