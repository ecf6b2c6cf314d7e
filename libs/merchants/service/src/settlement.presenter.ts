import { FIAT_FIELDS, type SettlementConfigurationResource, type WireField } from '@stablepay/merchants-api';
import {
  type FiatSettlementDetails,
  FIAT_SETTLEMENT_REQUIRED_FIELDS,
  missingFiatSettlementFields,
} from '@stablepay/merchants-domain';
import { fiatSettlementOf, type MerchantSettingsRow } from './settings.reader';

const WIRE_BY_DOMAIN = Object.fromEntries(
  Object.entries(FIAT_FIELDS).map(([wire, domain]) => [domain, wire]),
) as Record<keyof FiatSettlementDetails, WireField>;

/**
 * The settlement configuration record (SPEC Endpoints > Payments: GET/PUT /payments/settlement; not paginated).
 * It holds the crypto settlement address and, for a fiat-settled business, the fiat configuration: settlement
 * currency and payout bank details. The account number is shown masked (last four) once saved.
 */
export function presentSettlement(row: MerchantSettingsRow): SettlementConfigurationResource {
  const fiat = fiatSettlementOf(row);
  return {
    object: 'settlement_configuration' as const,
    settlement_mode: row.settlement_mode,
    settlement_address: row.settlement_address,
    fiat: fiat
      ? {
          currency: fiat.currency,
          beneficiary_name: fiat.beneficiaryName,
          bank_name: fiat.bankName,
          account_number_last4: fiat.accountNumber ? fiat.accountNumber.slice(-4) : null,
          bank_code: fiat.bankCode,
          country: fiat.country,
          complete: missingFiatSettlementFields(fiat).length === 0,
          missing_fields: missingFiatSettlementFields(fiat).map((f) => WIRE_BY_DOMAIN[f]),
          configured_at: row.fiat_configured_at ? new Date(row.fiat_configured_at).toISOString() : null,
        }
      : null,
    fiat_settlement_required_fields: FIAT_SETTLEMENT_REQUIRED_FIELDS.map((f) => WIRE_BY_DOMAIN[f]),
    updated_at: new Date(row.updated_at).toISOString(),
  };
}
