/**
 * SPEC Events > Fiat settlement delay and failure, as one pure process shared by everything a fiat-settled business
 * is paid out for (a subscription charge in the charge ledger, a one-time payment in the payments service): what the
 * settlement provider reported so far, and what its reports and SPEC's deadlines mean for the merchant (delayed,
 * completed, failed). Each owner keeps the process in its own aggregate and turns the outcomes into its own facts;
 * nothing here knows charges or payments, and the clock is the caller's `now`.
 *
 *   pending --late--> delayed (once per distinct reason);  pending|delayed --payout completed--> completed;
 *   pending|delayed --will not complete on its own--> failed
 */

/** SPEC Subscription charge settlement (fiat-settled plans); a payment's settlement goes through the same states. */
export type SettlementStatus = 'pending' | 'delayed' | 'completed' | 'failed';

/** SPEC Events > Fiat settlement delay and failure: the reasons. */
export const SETTLEMENT_FAILURE_REASONS = [
  'deposit_not_credited',
  'rampoff_order_failed',
  'rampoff_withdraw_failed',
  'provider_rejected',
] as const;
export type SettlementFailureReason = (typeof SETTLEMENT_FAILURE_REASONS)[number];

/**
 * What the settlement provider's feed reports about a payout: the swept crypto credited at the provider, a sell
 * order that failed (the provider re-issues it), the bank transfer's first attempt and a failed one, the payout
 * completed, the payout rejected for compliance.
 */
export const SETTLEMENT_REPORT_KINDS = [
  'deposit_credited',
  'sell_order_failed',
  'withdraw_started',
  'withdraw_failed',
  'payout_completed',
  'payout_rejected',
] as const;
export type SettlementReportKind = (typeof SETTLEMENT_REPORT_KINDS)[number];

/** SPEC's deadlines, from the time the crypto settled. */
export const SETTLEMENT_DELAY_AFTER_MS = 6 * 3_600_000;
export const SETTLEMENT_DEADLINE_MS = 72 * 3_600_000;
export const BANK_TRANSFER_DEADLINE_MS = 72 * 3_600_000;
/** The provider re-issues a failed sell order up to six times; the seventh failure ends the settlement. */
export const SELL_ORDER_FAILURES_ALLOWED = 6;

export interface ProviderProgress {
  readonly reportIds: readonly string[];
  readonly credited: boolean;
  readonly sellOrderFailures: number;
  /** The bank transfer's first attempt (provider time): it has 72 hours from then. */
  readonly withdrawStartedAt: string | null;
}

export const initialProviderProgress = (): ProviderProgress => ({
  reportIds: [],
  credited: false,
  sellOrderFailures: 0,
  withdrawStartedAt: null,
});

/** A recorded provider report folded into the progress (the owner's "report recorded" fact). */
export function evolveProviderProgress(
  p: ProviderProgress,
  d: { readonly reportId: string; readonly kind: SettlementReportKind; readonly reportedAt: string },
): ProviderProgress {
  const reportIds = [...p.reportIds, d.reportId];
  switch (d.kind) {
    case 'deposit_credited':
      return { ...p, reportIds, credited: true };
    case 'sell_order_failed':
      return { ...p, reportIds, credited: true, sellOrderFailures: p.sellOrderFailures + 1 };
    case 'withdraw_started':
    case 'withdraw_failed':
      return { ...p, reportIds, credited: true, withdrawStartedAt: p.withdrawStartedAt ?? d.reportedAt };
    default:
      return { ...p, reportIds };
  }
}

/** One open or closed settlement, as its owner's state knows it. */
export interface FiatSettlement {
  readonly status: SettlementStatus;
  /** When the crypto settled (ISO): the six- and 72-hour deadlines count from here. */
  readonly startedAt: string;
  /** Delay reasons already announced (null: announced without a known reason). */
  readonly delayReasons: ReadonlyArray<SettlementFailureReason | null>;
  readonly provider: ProviderProgress;
}

/** What a report or a deadline means for the merchant; the owner records each as its own fact. */
export type SettlementOutcome =
  | { readonly kind: 'delayed'; readonly reason: SettlementFailureReason | null }
  | { readonly kind: 'completed' }
  | { readonly kind: 'failed'; readonly reason: SettlementFailureReason };

export const isSettlementOpen = (s: Pick<FiatSettlement, 'status'>): boolean =>
  s.status === 'pending' || s.status === 'delayed';

const startMs = (s: FiatSettlement) => Date.parse(s.startedAt);

/** The reason a settlement that is not done by now would be late or failed for, from what the provider said. */
function lateReason(p: ProviderProgress): SettlementFailureReason {
  if (p.withdrawStartedAt !== null) return 'rampoff_withdraw_failed';
  return p.credited ? 'rampoff_order_failed' : 'deposit_not_credited';
}

/** When the settlement fails by deadline: 72 hours from the crypto settling, or from the bank transfer's first attempt. */
function failsAtMs(s: FiatSettlement): number {
  const started = s.provider.withdrawStartedAt;
  return started !== null
    ? Date.parse(started) + BANK_TRANSFER_DEADLINE_MS
    : startMs(s) + SETTLEMENT_DEADLINE_MS;
}

/** The six-hour delay (deposit not credited, or a failed sell order) still to announce, if any. */
function sixHourReason(s: FiatSettlement): SettlementFailureReason | null {
  const p = s.provider;
  if (p.withdrawStartedAt !== null) return null;
  const reason = !p.credited
    ? 'deposit_not_credited'
    : p.sellOrderFailures > 0
      ? 'rampoff_order_failed'
      : null;
  return reason !== null && !s.delayReasons.includes(reason) ? reason : null;
}

/**
 * What a provider report means, given the settlement with that report already folded in (`after`): a completed payout
 * completes; a compliance rejection fails (`provider_rejected`); a failed bank transfer is late at once
 * (`rampoff_withdraw_failed`, once); a failed sell order is late once six hours have passed since the crypto settled
 * and ends the settlement at the seventh failure (`rampoff_order_failed`); any report also lets a passed deadline
 * speak. A report after the end means nothing more.
 */
export function settlementReportOutcomes(
  after: FiatSettlement,
  kind: SettlementReportKind,
  now: Date,
): SettlementOutcome[] {
  if (!isSettlementOpen(after)) return [];
  switch (kind) {
    case 'payout_completed':
      return [{ kind: 'completed' }];
    case 'payout_rejected':
      return [{ kind: 'failed', reason: 'provider_rejected' }];
    case 'withdraw_failed':
      return after.delayReasons.includes('rampoff_withdraw_failed')
        ? []
        : [{ kind: 'delayed', reason: 'rampoff_withdraw_failed' }];
    case 'sell_order_failed':
      if (after.provider.sellOrderFailures > SELL_ORDER_FAILURES_ALLOWED)
        return [{ kind: 'failed', reason: 'rampoff_order_failed' }];
      return settlementDeadlineOutcomes(after, now);
    default:
      return settlementDeadlineOutcomes(after, now);
  }
}

/**
 * SPEC's deadlines at `now`: past 72 hours (from the crypto settling, or from the bank transfer's first attempt) the
 * settlement fails with the reason of where it stopped; past six hours a deposit the provider has not credited, or a
 * sell order that failed, is announced as delayed (once per reason).
 */
export function settlementDeadlineOutcomes(s: FiatSettlement, now: Date): SettlementOutcome[] {
  if (!isSettlementOpen(s)) return [];
  if (now.getTime() >= failsAtMs(s)) return [{ kind: 'failed', reason: lateReason(s.provider) }];
  const reason = sixHourReason(s);
  if (reason !== null && now.getTime() >= startMs(s) + SETTLEMENT_DELAY_AFTER_MS)
    return [{ kind: 'delayed', reason }];
  return [];
}

/**
 * When the deadlines must next be checked (a durable timer's due time; null: the settlement is not open): the
 * six-hour announcement still to make, else the failure deadline.
 */
export function settlementDeadlineAt(s: FiatSettlement): Date | null {
  if (!isSettlementOpen(s)) return null;
  const fails = failsAtMs(s);
  const six = sixHourReason(s) !== null ? startMs(s) + SETTLEMENT_DELAY_AFTER_MS : fails;
  return new Date(Math.min(six, fails));
}
