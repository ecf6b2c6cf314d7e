import { Inject, Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { type FiatSettlementDetails, isFiatSettlementComplete } from '@stablepay/merchants-domain';
import { notFound, readAtLeastRevision } from '@stablepay/util';
import { MerchantSettingsProjection } from './merchant-settings.projection';

export interface MerchantSettingsRow {
  merchant_id: string;
  mode: 'test' | 'live';
  name: string;
  display_name: string;
  settlement_mode: 'crypto' | 'fiat';
  settlement_address: string | null;
  merchant_signer: string | null;
  webhook_url: string | null;
  webhook_secret_id: string | null;
  webhook_secret_fingerprint: string | null;
  previous_webhook_secret_id: string | null;
  previous_secret_expires_at: Date | null;
  webhook_event_types: string[] | null;
  background_color: string | null;
  primary_color: string | null;
  merchant_pauser: string | null;
  shared_pauser_risk_acknowledged: boolean;
  subscription_manager_address: string | null;
  fiat_currency: string | null;
  fiat_beneficiary_name: string | null;
  fiat_bank_name: string | null;
  fiat_account_number: string | null;
  /** Beta features the operator enabled (`{ payouts: true }`); `{}` for none. */
  beta_features: Record<string, boolean>;
  fiat_bank_code: string | null;
  fiat_country: string | null;
  fiat_configured_at: Date | null;
  revision: number;
  created_at: Date;
  updated_at: Date;
}

const READ_YOUR_WRITES_TIMEOUT_MS = 10_000;

@Injectable()
export class SettingsReader {
  constructor(
    @Inject(DataSource) private readonly dataSource: DataSource,
    @Inject(MerchantSettingsProjection) private readonly projection: MerchantSettingsProjection,
  ) {}

  async find(merchantId: string): Promise<MerchantSettingsRow | undefined> {
    const rows: MerchantSettingsRow[] = await this.dataSource.query(
      'SELECT * FROM merchant_settings WHERE merchant_id = $1',
      [merchantId],
    );
    return rows[0];
  }

  async get(merchantId: string): Promise<MerchantSettingsRow> {
    const row = await this.find(merchantId);
    if (!row) throw notFound('merchant', merchantId);
    return row;
  }

  /**
   * Read-your-writes: resolves with the row once the projection reflects at least `revision` of the merchant's
   * stream. Woken by the projection in this process; polls as a fallback (projection in another process).
   */
  getAtLeast(merchantId: string, revision: number): Promise<MerchantSettingsRow> {
    return readAtLeastRevision({
      read: () => this.find(merchantId),
      revision,
      changes: this.projection.changes,
      key: merchantId,
      timeoutMs: READ_YOUR_WRITES_TIMEOUT_MS,
    });
  }
}

/** The fiat settlement configuration of a settings row (null when none is set). */
export function fiatSettlementOf(row: MerchantSettingsRow): FiatSettlementDetails | null {
  const fiat: FiatSettlementDetails = {
    currency: row.fiat_currency ?? null,
    beneficiaryName: row.fiat_beneficiary_name ?? null,
    bankName: row.fiat_bank_name ?? null,
    accountNumber: row.fiat_account_number ?? null,
    bankCode: row.fiat_bank_code ?? null,
    country: row.fiat_country ?? null,
  };
  return Object.values(fiat).every((v) => v === null) ? null : fiat;
}

/** SPEC Rules 8: whether a fiat-settled business may price (its configuration is complete), and in which currency. */
export function fiatSettlementStatus(row: MerchantSettingsRow): {
  currency: string | null;
  complete: boolean;
} {
  const fiat = fiatSettlementOf(row);
  return { currency: fiat?.currency ?? null, complete: isFiatSettlementComplete(fiat) };
}
