import type { DepositPayerEvent } from '../../chain/deposit-chain';
import type { PaymentCommandWithoutTime } from '../../payments/payment.commands';

/**
 * The deposit's payer logs (PayerDisputed, PayerAttested) as payment facts. One key per log, whichever path records
 * it first (the dispute's own receipt, the indexer's sighting of the deposit's log, a reconciliation read): the same
 * log appends one fact. The deployment's own PayerAttested is part of the deployment fact and records nothing.
 */
export function payerEventIdempotencyKey(txHash: string, logIndex: number): string {
  return `payer:${txHash.toLowerCase()}:${logIndex}`;
}

/** A deposit's PayerDisputed / PayerAttested log as the payment's command. */
export function payerEventCommand(chain: string, e: DepositPayerEvent): PaymentCommandWithoutTime {
  const log = { chain, txHash: e.txHash.toLowerCase(), logIndex: e.logIndex, payer: e.payer };
  return e.kind === 'disputed'
    ? { type: 'RecordPayerDisputed', ...log }
    : { type: 'RecordPayerAttested', ...log, finalAt: new Date(Number(e.finalAt) * 1000) };
}
