import type { PaymentCommandWithoutTime } from '../../payments/payment.commands';

/** A deposit's PayerDisputed / PayerAttested log as the indexer saw it (PaymentDepositEventObserved.v1). */
export interface PayerLogSighting {
  readonly chain: string;
  readonly txHash: string;
  readonly logIndex: number;
  readonly blockNumber: string;
  readonly blockHash: string;
  readonly kind: 'disputed' | 'attested';
  readonly payer: string;
  /** Attested: unix seconds (chain time) when the payer becomes final. */
  readonly finalAt?: bigint;
}

/**
 * The deposit's payer logs (PayerDisputed, PayerAttested) as payment facts, recorded only from the indexer's
 * sightings (at its confirmation depth, retracted by it on a deeper reorg), never from our own receipt at one
 * confirmation, which no retraction would follow (docs/payments.md, "Disputing the payer"). One key per log and
 * block: a redelivery appends nothing, the same log mined again in another block after a reorg is recorded again.
 */
export function payerEventIdempotencyKey(
  s: Pick<PayerLogSighting, 'txHash' | 'logIndex' | 'blockHash'>,
): string {
  return `payer:${s.txHash.toLowerCase()}:${s.logIndex}:${s.blockHash.toLowerCase()}`;
}

export function payerEventCommand(s: PayerLogSighting): PaymentCommandWithoutTime {
  const log = {
    chain: s.chain,
    txHash: s.txHash.toLowerCase(),
    logIndex: s.logIndex,
    blockNumber: s.blockNumber,
    blockHash: s.blockHash.toLowerCase(),
    payer: s.payer,
  };
  return s.kind === 'disputed'
    ? { type: 'RecordPayerDisputed', ...log }
    : { type: 'RecordPayerAttested', ...log, finalAt: new Date(Number(s.finalAt ?? 0n) * 1000) };
}
