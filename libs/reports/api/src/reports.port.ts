import type { AuthenticatedMerchant } from '@stablepay/http';
import type { ChargeListFilter, SubscriptionChargeObject } from '@stablepay/ledger-domain';
import type { PaymentListFilters, PaymentObject } from '@stablepay/payments-domain';
import type { SubscriptionListFilters, SubscriptionObject } from '@stablepay/subscriptions-domain';

/** A charge as the export shows it: the ledger's row plus the token of its subscription (to read `amount`). */
export interface ChargeReportRow {
  readonly charge: SubscriptionChargeObject;
  /** The subscription's token; null only if the subscription row is missing (never for a ledger row today). */
  readonly asset: string | null;
  readonly token_symbol: string | null;
  readonly token_decimals: number | null;
}

/** An export's rows, oldest first, in batches read as they are taken (never all in memory). */
export interface ReportRows<Row> {
  readonly rows: AsyncIterable<readonly Row[]>;
  /** When the export started (its file name's date). */
  readonly startedAt: Date;
}

/**
 * The inbound port of the reports scope (read-only: no command, no aggregate), implemented by ReportsGateway in
 * @stablepay/reports-service over the read models of the payments, subscriptions and charge-ledger scopes. Every
 * method reads the merchant's own rows of the key's mode only.
 */
export interface ReportsUseCases {
  payments(merchant: AuthenticatedMerchant, filters: PaymentListFilters): ReportRows<PaymentObject>;
  subscriptions(
    merchant: AuthenticatedMerchant,
    filters: SubscriptionListFilters,
  ): ReportRows<SubscriptionObject>;
  subscriptionCharges(merchant: AuthenticatedMerchant, filter: ChargeListFilter): ReportRows<ChargeReportRow>;
}

export const REPORTS_USE_CASES = Symbol('REPORTS_USE_CASES');
/** The per-merchant bound on exports running at once (an ExportSlots of @stablepay/http). */
export const REPORT_EXPORT_SLOTS = Symbol('REPORT_EXPORT_SLOTS');
