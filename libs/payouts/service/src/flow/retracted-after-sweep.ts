import type { Logger } from '@nestjs/common';
import { Counter, register } from 'prom-client';

const RETRACTED_AFTER_FORWARD = 'stablepay_payout_deposit_retracted_after_forward_total';

export function retractedAfterForward(): Counter<'chain'> {
  // Get-or-create: tests and the embedded run host several applications on prom-client's one default registry.
  return (
    (register.getSingleMetric(RETRACTED_AFTER_FORWARD) as Counter<'chain'> | undefined) ??
    new Counter({
      name: RETRACTED_AFTER_FORWARD,
      help: 'Payout deposits a reorg retracted after the payout was swept to the off-ramp or forwarded (the operator must act)',
      labelNames: ['chain'],
    })
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
