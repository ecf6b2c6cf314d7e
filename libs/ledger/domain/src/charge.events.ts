import type { SettlementFailureReason, SettlementReportKind } from '@stablepay/fiat-settlement';

/**
 * Events of the `charge-<subc_ id>` stream (topic `ledger.charge.v1`): one stream per ledger row of SPEC's
 * Subscription charge. Facts only: what a write path reported, the fiat fields it wrote, what the settlement provider
 * reported about a fiat-settled charge's payout, and the settlement transitions decided from those reports and the
 * SPEC deadlines. The `subscription_charge` object is a projection (chargeObject). Amounts are integer
 * strings (token smallest units; fiat in minor units), instants ISO strings.
 */
export type ChargeStatus = 'succeeded' | 'failed';

/** The settlement vocabulary is shared with one-time payments (@stablepay/fiat-settlement). */
export {
  SETTLEMENT_FAILURE_REASONS,
  SETTLEMENT_REPORT_KINDS,
  type SettlementFailureReason,
  type SettlementReportKind,
  type SettlementStatus,
} from '@stablepay/fiat-settlement';

/** Which path wrote the row (SPEC fiat field rule 5): the charge or subscribe call, or the indexer. */
export type LedgerWritePath = 'api' | 'indexer';

/** The charge attempt as the write path saw it. Failed charges: fee "0", block_number "0", charged_at = submission time. */
export interface ChargeFacts {
  readonly chargeId: string;
  readonly subscriptionId: string;
  readonly subscriber: string;
  readonly chain: string;
  readonly nonce: number;
  readonly amount: string;
  readonly fee: string;
  readonly txHash: string | null;
  readonly blockNumber: string;
  readonly chargedAt: string;
  readonly status: ChargeStatus;
  readonly failureReason: string | null;
}

/** SPEC fiat fields: all three set or none (`settlementStatus` null on a crypto-settled business, rule 2). */
export interface FiatFields {
  /** SPEC's `fiat_amount` of the charge: the plan's per-cycle price, also on an ad-hoc charge. */
  readonly fiatAmount: string;
  readonly fiatCurrency: string;
  readonly settlementStatus: 'pending' | null;
  /**
   * What the fiat settlement pays out, in fiatCurrency minor units: the fiat amount the charge's quote converted (an
   * ad-hoc `fiat_amount` of metered usage or an add-on). Absent when it is the plan price (no quote recorded, a
   * crypto-settled business) and on every row recorded before 2026-11-24 21:30: payoutFiatAmount reads fiatAmount.
   */
  readonly payoutFiatAmount?: string;
}

export type ChargeRecorded = {
  type: 'ChargeRecorded.v1';
  data: ChargeFacts & { fiat: FiatFields | null; writtenBy: LedgerWritePath; recordedAt: string };
};
/** SPEC fiat field rule 3: the subscribe call's fiat fields onto the first charge the indexer wrote first. */
export type ChargeFiatBackfilled = {
  type: 'ChargeFiatBackfilled.v1';
  data: { fiat: FiatFields; backfilledAt: string };
};
export type ChargeSettlementDelayed = {
  type: 'ChargeSettlementDelayed.v1';
  data: { reason: SettlementFailureReason | null; delayedAt: string };
};
export type ChargeSettled = { type: 'ChargeSettled.v1'; data: { settledAt: string } };
export type ChargeSettlementFailed = {
  type: 'ChargeSettlementFailed.v1';
  data: { reason: ChargeSettlementFailureReason; failedAt: string };
};

/**
 * Ours, charges only: the charge paid a settlement address the merchant had replaced (the subscription recorded
 * SubscriptionChargePaidReplacedSettlement.v1). The off-ramp credits the address the settings hold, not the one
 * paid, so the payout cannot happen and the settlement fails as soon as that is known, instead of waiting out
 * SPEC's deadlines to end as `deposit_not_credited`. Who acts: the merchant (recover the funds from the address
 * paid, docs/webhooks.md).
 */
export const SETTLEMENT_ADDRESS_REPLACED = 'settlement_address_replaced';
/** SPEC's reasons (the provider's and the deadlines'), and ours of a charge that never reached the off-ramp. */
export type ChargeSettlementFailureReason = SettlementFailureReason | typeof SETTLEMENT_ADDRESS_REPLACED;

/** A settlement provider report, as received (its id deduplicates redeliveries; `reportedAt` is the provider's time). */
export type ChargeSettlementReported = {
  type: 'ChargeSettlementReported.v1';
  data: { reportId: string; kind: SettlementReportKind; reportedAt: string; receivedAt: string };
};

/**
 * A reorg took the succeeded charge's transaction out of the chain (the subscription recorded
 * SubscriptionChargeRetracted.v1): the row shows `failed` with failure_reason `charge_lost_to_reorg`, keeping the
 * orphaned tx_hash (docs/subscriptions.md, Reorgs). A re-included charge is recorded again and shows `succeeded`.
 */
export type ChargeLostToReorg = { type: 'ChargeLostToReorg.v1'; data: { txHash: string; lostAt: string } };

/**
 * The settlement provider paid the merchant out in fiat for a charge a reorg took (charge_lost_to_reorg): paid before
 * the reorg, or reported paid while the charge is lost. Fiat went out for crypto the chain no longer shows: an exposure
 * the operator recovers from the merchant's next settlements (docs/subscriptions.md, Reorgs). Recorded once per loss;
 * a re-inclusion ends it. No webhook of its own (subscription.charge_failed told the merchant of the loss, and
 * subscription.charge_settled of the payout, which did happen); the charge object shows it as `settlement_exposure`.
 */
export type ChargeSettlementExposed = {
  type: 'ChargeSettlementExposed.v1';
  data: { reason: typeof CHARGE_LOST_TO_REORG; at: string };
};

export type ChargeEvent =
  | ChargeRecorded
  | ChargeSettlementExposed
  | ChargeFiatBackfilled
  | ChargeSettlementReported
  | ChargeSettlementDelayed
  | ChargeSettled
  | ChargeSettlementFailed
  | ChargeLostToReorg;

/** failure_reason of a charge lost to a reorg (mirrors payments' deposit_lost_to_reorg). */
export const CHARGE_LOST_TO_REORG = 'charge_lost_to_reorg';

export const CHARGE_CATEGORY = 'charge';
export const chargeStreamId = (id: string): string => `${CHARGE_CATEGORY}-${id}`;

/** Stored event type -> webhook event type of the settlement events (SPEC Events > Subscription events). */
export const CHARGE_SETTLEMENT_WEBHOOK_TYPE_BY_EVENT: Readonly<Partial<Record<ChargeEvent['type'], string>>> =
  {
    'ChargeSettled.v1': 'subscription.charge_settled',
    'ChargeSettlementDelayed.v1': 'subscription.charge_settlement_delayed',
    'ChargeSettlementFailed.v1': 'subscription.charge_settlement_failed',
  };
