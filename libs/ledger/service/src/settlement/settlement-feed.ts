import {
  SandboxSettlementFeedOf,
  type SettlementFeedOf,
  type SettlementReportOf,
} from '@stablepay/fiat-settlement';

/**
 * One report of the settlement provider about the payout of a fiat-settled charge (the provider knows the charge by
 * our `subc_` id, the reference it was given with the swept crypto and the price lock).
 */
export interface SettlementReport extends SettlementReportOf {
  readonly chargeId: string;
}

/** The settlement provider's feed of charge payouts (the shared port, @stablepay/fiat-settlement). */
export type SettlementFeed = SettlementFeedOf<SettlementReport>;

export const SETTLEMENT_FEED = Symbol('SETTLEMENT_FEED');

/**
 * The sandbox provider feed: `deliver` plays the provider sending one report (SandboxPayouts sends them on its own for
 * test-mode charges, by the magic fiat amounts; tests send them directly). It resolves once the ledger recorded the
 * report and rejects with the ledger's refusal (an unknown charge, a charge with no fiat settlement), as a provider's
 * delivery would fail and be retried.
 */
export class SandboxSettlementFeed extends SandboxSettlementFeedOf<SettlementReport> {}
