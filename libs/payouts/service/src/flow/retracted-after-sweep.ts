import type { Logger } from '@nestjs/common';
import type { PayoutRefundWithheldReason } from '@stablepay/payouts-domain';
import { Counter, register } from 'prom-client';

/** Get-or-create: tests and the embedded run host several applications on prom-client's one default registry. */
export function sharedCounter<L extends string>(name: string, help: string, labelNames: L[]): Counter<L> {
  return (
    (register.getSingleMetric(name) as Counter<L> | undefined) ?? new Counter({ name, help, labelNames })
  );
}

const RETRACTED_AFTER_FORWARD = 'stablepay_payout_deposit_retracted_after_forward_total';

export function retractedAfterForward(): Counter<'chain'> {
  return sharedCounter(
    RETRACTED_AFTER_FORWARD,
    'Payout deposits a reorg retracted after the payout was swept to the off-ramp or forwarded (the operator must act)',
    ['chain'],
  );
}

/**
 * A reorg retracted the deposit of a payout whose funds had already left the address (swept, forwarded, or after):
 * nothing here can undo it, so it is counted (alert StablepayPayoutDepositRetractedAfterForward) and logged as an
 * error for the operator to settle with the off-ramp (docs/payouts.md, "Reorgs").
 */
export function flagRetractedAfterSweep(
  logger: Pick<Logger, 'error'>,
  retraction: { readonly payout: string; readonly status: string; readonly chain: string } & Record<
    string,
    unknown
  >,
): void {
  retractedAfterForward().inc({ chain: retraction.chain });
  logger.error({
    msg: 'a reorg retracted the deposit of a swept payout: operator action needed',
    ...retraction,
  });
}

const SWEEP_UNRESOLVED = 'stablepay_payout_sweep_unresolved_total';

export function sweepUnresolved(): Counter<'chain' | 'reason'> {
  return sharedCounter(
    SWEEP_UNRESOLVED,
    'Payouts whose sweep the flow cannot settle by itself and leaves to the operator (reason: deposit_address_retired)',
    ['chain', 'reason'],
  );
}

/**
 * A payout's sweep that no retry could settle (docs/payouts.md, "Reorgs"): counted (alert
 * StablepayPayoutSweepUnresolved) and logged as an error for the operator, instead of a step retried for ever.
 */
export function flagSweepUnresolved(
  logger: Pick<Logger, 'error'>,
  unresolved: {
    readonly payout: string;
    readonly status: string;
    readonly chain: string;
    readonly reason: 'deposit_address_retired';
  } & Record<string, unknown>,
): void {
  sweepUnresolved().inc({ chain: unresolved.chain, reason: unresolved.reason });
  logger.error({
    msg: "a payout's sweep cannot be settled by the flow: operator action needed",
    ...unresolved,
  });
}

const REFUND_WITHHELD = 'stablepay_payout_refund_withheld_total';

export function refundWithheld(): Counter<'chain' | 'reason'> {
  return sharedCounter(
    REFUND_WITHHELD,
    'Payouts failed at the off-ramp whose refund the flow does not ask for, the funds left with the off-ramp for the operator (reason: deposit_minted)',
    ['chain', 'reason'],
  );
}

/**
 * A payout failed at the off-ramp whose refund is withheld (`refundWithheldReason`): counted (alert
 * StablepayPayoutRefundWithheld) and logged as an error, since only the operator can return those funds.
 */
export function flagRefundWithheld(
  logger: Pick<Logger, 'error'>,
  withheld: {
    readonly payout: string;
    readonly chain: string;
    readonly reason: PayoutRefundWithheldReason;
  } & Record<string, unknown>,
): void {
  refundWithheld().inc({ chain: withheld.chain, reason: withheld.reason });
  logger.error({
    msg: "a failed payout's funds stay with the off-ramp, its refund withheld: operator action needed",
    ...withheld,
  });
}
