import {
  SandboxSettlementFeedOf,
  type SettlementFeedOf,
  type SettlementReportOf,
} from '@stablepay/fiat-settlement';

/**
 * One report of the settlement provider about the payout of a fiat-settled payment (the provider knows it by our
 * `pay_` id, the reference the swept crypto was sent with).
 */
export interface PaymentSettlementReport extends SettlementReportOf {
  readonly paymentId: string;
}

/** The settlement provider's feed of payment payouts: the port the charge ledger uses too (@stablepay/fiat-settlement). */
export type PaymentSettlementFeed = SettlementFeedOf<PaymentSettlementReport>;

export const PAYMENT_SETTLEMENT_FEED = Symbol('PAYMENT_SETTLEMENT_FEED');

/**
 * The sandbox provider for payments: `deliver` plays the provider sending one report (tests, the embedded demo). It
 * resolves once the payment recorded it and rejects with the payment's refusal (an unknown payment, one with no fiat
 * payout), as a provider's delivery would fail and be retried.
 */
export class SandboxPaymentSettlementFeed extends SandboxSettlementFeedOf<PaymentSettlementReport> {}
