import { Inject, Injectable } from '@nestjs/common';
import { ZeroAddress, getAddress } from 'ethers';
import { formatCaip19, parseCaip2 } from '@stablepay/evm';
import {
  type PaymentState,
  outflowSeenElsewhere,
  paymentAsset,
  timesOutflowUndone,
} from '@stablepay/payments-domain';
import { NATIVE_ASSET } from '../../actions/signed-action-preflight';
import type { OutflowKind } from '../../chain/deposit-chain';
import { PaymentFacts } from '../payment-facts';

/** One movement out of a payment's deposit contract, from its log: what the payment records. */
export interface DepositOutflowLog {
  readonly kind: OutflowKind;
  /** CAIP-2 id of the chain the deposit is on. */
  readonly chain: string;
  readonly txHash: string;
  readonly logIndex: number;
  /** The block the indexer saw the log in (null on a sighting queued before it was kept). */
  readonly blockHash?: string | null;
  /** That block's number (decimal). */
  readonly blockNumber?: string;
  /** Token address; the zero address for the native coin. */
  readonly token: string;
  readonly to: string;
  readonly amount: string;
}

/**
 * The one key of an outflow, whichever path saw it first (the action's own receipt, the indexer's observation of the
 * deposit's log, a reconciliation read): the same log appends one fact.
 */
export const outflowIdempotencyKey = (txHash: string, logIndex: number): string =>
  `outflow:${txHash.toLowerCase()}:${logIndex}`;

/**
 * The key of the next record of an outflow log of `blockHash`: the plain one; where the payment's outflow recorded at
 * this index was last seen at another log (another block, or claimed by another log of this one), the transaction
 * mined again after a reorg put this log at the index (log indexes are per block), so the block's: its record (a
 * claim of one recorded outflow, or a new one) is its own fact, not an answered replay of that outflow's; and after a
 * reorg undid its record (PaymentOutflowRetracted) and the chain mined it again, a key the undone record did not use
 * (the same log seen again by the action's receipt, a reconciliation read or the deposit worker is then one new
 * record, not a replay).
 */
export function outflowRecordKey(
  state: PaymentState,
  txHash: string,
  logIndex: number,
  blockHash?: string | null,
): string {
  const block = blockHash ? blockHash.toLowerCase() : undefined;
  const elsewhere = outflowSeenElsewhere(state, txHash.toLowerCase(), logIndex, block);
  const undone = timesOutflowUndone(state, txHash.toLowerCase(), logIndex);
  return (
    outflowIdempotencyKey(txHash, logIndex) +
    (elsewhere ? `:block:${block}` : '') +
    (undone ? `:redo:${undone}` : '')
  );
}

/** What left the deposit, as the payment names assets: its own asset id for the payment token. */
export function outflowAsset(state: PaymentState, chain: string, token: string): string {
  const address = getAddress(token);
  if (address === ZeroAddress) return NATIVE_ASSET;
  const asset = paymentAsset(state);
  if (asset && asset.toLowerCase().endsWith(`:${address.toLowerCase()}`)) return asset;
  return formatCaip19(parseCaip2(chain).chainId, address);
}

/**
 * A movement out of the payment's deployed deposit seen on chain (a capture relayed by a third party, the payer's
 * reclaim after the authorization expiry, our own action whose answer was lost), once its block has the chain's
 * confirmations: `RecordOutflow` (-> PaymentCaptured.v1, PaymentReclaimed.v1, ...), then `ConfirmOutflow`: every
 * outflow is announced (payment.settled, payment.refunded, payment.recovered, payment.rescued) only from here, also
 * when the action's own receipt recorded it at one confirmation, which a shallow reorg could still take back (a
 * capture, refund or reclaim is then undone: `RetractOutflow`, the deposit flow).
 */
@Injectable()
export class RecordDepositOutflowHandler {
  constructor(@Inject(PaymentFacts) private readonly facts: PaymentFacts) {}

  async handle(paymentId: string, outflow: DepositOutflowLog) {
    const { state } = await this.facts.load(paymentId);
    const txHash = outflow.txHash.toLowerCase();
    const key = outflowRecordKey(state, txHash, outflow.logIndex, outflow.blockHash);
    await this.facts.append(
      paymentId,
      {
        type: 'RecordOutflow',
        kind: outflow.kind,
        txHash,
        logIndex: outflow.logIndex,
        ...(outflow.blockHash ? { blockHash: outflow.blockHash.toLowerCase() } : {}),
        ...(outflow.blockHash && outflow.blockNumber !== undefined
          ? { blockNumber: String(outflow.blockNumber) }
          : {}),
        asset: outflowAsset(state, outflow.chain, outflow.token),
        amount: outflow.amount,
        to: getAddress(outflow.to),
        atConfirmations: true,
      },
      key,
    );
    // Its own key: the record's may be the action's, whose append is answered as a replay.
    return this.facts.append(paymentId, { type: 'ConfirmOutflow', txHash }, `confirmed:${key}`);
  }
}
