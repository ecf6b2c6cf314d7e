import { Logger } from '@nestjs/common';
import {
  type PayoutChainConfig,
  PayoutDeposits,
  type PayoutRefundRequest,
  type PayoutRefundOutcome,
} from '@stablepay/chain-operator';
import type { PayoutState, SignedHeldRefund } from '@stablepay/payouts-domain';
import type { RelayerSet } from '@stablepay/relayer';
import { cannotProcess, conflict, DomainError, type DomainError as DomainErrorType } from '@stablepay/util';
import { isRetiredAddress, tokenAddress } from '../../flow/payout-sweep';

export const HELD_REFUNDS = Symbol('HELD_REFUNDS');

/**
 * The chain side of POST /payouts/:id/refund_held (docs/payouts.md, "Held funds"): one operator transaction,
 * `PayoutDepositFactory.refund(..., token, to, amount, payoutId, deadline, signature)`, returning exactly the payout's
 * deposit to the wallet it came from with the merchant's PayoutRefund signature. The deposit refunds a payout once
 * and never one it swept, so a retry after a lost answer (or a concurrent request) is refused on chain
 * (`already_refunded`, nothing sent) and answers this payout's own `PayoutRefunded`, found by its id from the
 * deposit's block. The contract's refusals are the API's errors; nothing moved then.
 */
export class HeldRefunds {
  private readonly logger = new Logger('payouts.refund-held');
  private readonly deposits: PayoutDeposits;

  constructor(
    private readonly relayers: RelayerSet,
    config: PayoutChainConfig,
    /** Most blocks per eth_getLogs window on a chain (CHAIN_LOG_RANGE). */
    logRange?: (chain: string) => number,
  ) {
    this.deposits = new PayoutDeposits(relayers, config, logRange);
  }

  /** The refund's transaction hash (this request's or an earlier attempt's). */
  async refund(
    payout: PayoutState,
    merchantId: string,
    move: { readonly to: string; readonly amount: string },
    signed: SignedHeldRefund,
  ): Promise<string> {
    const deposit = payout.deposit;
    if (!deposit) throw new Error(`payout ${payout.id} has no deposit to refund`);
    // This deployment's factory reaches only its own addresses: an older factory's clone is the operator's.
    if (isRetiredAddress(this.deposits, payout, merchantId))
      throw conflict(
        'deposit_address_retired',
        `Payout ${payout.id}'s funds are at a retired deposit address (${payout.depositAddress}) that this deployment cannot move: the operator returns them.`,
      );
    const request: PayoutRefundRequest = {
      merchantId,
      customerId: payout.customerId,
      chain: payout.token.chain,
      token: tokenAddress(payout.token.asset),
      to: move.to,
      amount: BigInt(move.amount),
      payoutId: payout.id,
      deadline: signed.deadline,
      signature: signed.signature,
    };
    // A reorg may have taken the deposit away before the indexer's retraction reached the payout (as for the sweep,
    // docs/payouts.md "Reorgs"): the address's balance is then other deposits' funds, never this payout's to return.
    const landed = await this.relayers.for(request.chain).provider.getTransactionReceipt(deposit.txHash);
    if (landed?.status !== 1)
      throw conflict(
        'deposit_retracted',
        `Payout ${payout.id}'s deposit transaction ${deposit.txHash} is not on ${request.chain} now (a chain reorg took it away, or the node is behind): nothing is held for it, and nothing was sent.`,
      );
    const outcome = await this.deposits.refund(request);
    if (outcome.kind === 'refunded') {
      this.logger.log({
        msg: 'held payout refunded from its deposit address',
        payout: payout.id,
        txHash: outcome.txHash,
        amount: String(outcome.amount),
      });
      return outcome.txHash;
    }
    if (outcome.kind === 'already_refunded') return this.ownRefund(request, deposit.txHash);
    throw refusal(payout.id, outcome);
  }

  /** This payout's refund, which the chain says is there: from the deposit's block (a refund cannot precede it). */
  private async ownRefund(request: PayoutRefundRequest, depositTx: string): Promise<string> {
    const receipt = await this.relayers.for(request.chain).provider.getTransactionReceipt(depositTx);
    if (!receipt) throw new Error(`deposit transaction ${depositTx} not found on ${request.chain}`);
    const [own] = await this.deposits.refunds({ ...request, fromBlock: receipt.blockNumber });
    // Refused as refunded, so the log exists; not finding it is a lagging or pruned node: the request may be retried.
    if (!own)
      throw unavailable(`payout ${request.payoutId} was refunded but its PayoutRefunded log was not found`);
    return own.txHash;
  }
}

const unavailable = (message: string): DomainError =>
  new DomainError({
    type: 'api_error',
    status: 503,
    code: 'chain_unavailable',
    message: `${message}; retry.`,
  });

/** A refusal of the deposit (in simulation: nothing was sent) or a failed transaction, as the API's error. */
function refusal(
  payoutId: string,
  outcome: Exclude<PayoutRefundOutcome, { kind: 'refunded' | 'already_refunded' }>,
): DomainErrorType {
  switch (outcome.kind) {
    case 'already_swept':
      return conflict(
        'payout_not_refundable',
        `Payout ${payoutId}'s deposit was swept to the off-ramp: nothing of it is held at the deposit address.`,
      );
    case 'insufficient_balance':
      return conflict(
        'held_funds_unavailable',
        `The deposit address holds ${outcome.available} of the token, less than payout ${payoutId}'s deposit ${outcome.amount}: the operator sorts it out.`,
      );
    case 'reverted':
      return new DomainError({
        type: 'api_error',
        status: 502,
        code: 'transaction_reverted',
        message: `The refund transaction ${outcome.txHash} reverted on chain (${outcome.errorName ?? 'unknown error'}); nothing moved.`,
      });
    case 'receipt_timeout':
      return unavailable(
        `The refund transaction ${outcome.txHash} was sent but not mined in time; the same request finds it once it lands`,
      );
    case 'rejected':
      return signatureRefusal(outcome.errorName);
  }
}

function signatureRefusal(errorName: string): DomainErrorType {
  switch (errorName) {
    case 'InvalidSignature':
      return cannotProcess(
        'invalid_signature',
        "The signature is not the merchant signer's PayoutRefund over this payout (chain, deposit address, payout, token, the deposit's sender and amount, the current epoch and the deadline sent).",
        'signature',
      );
    case 'SignatureExpired':
      return cannotProcess(
        'signature_expired',
        "The signature's deadline has passed: sign again.",
        'deadline',
      );
    case 'DeadlineTooFar':
      return cannotProcess(
        'signature_deadline_too_far',
        'The deadline lies more than 7 days after the chain time.',
        'deadline',
      );
    case 'SignatureAlreadyUsed':
      return conflict(
        'signature_already_used',
        'This signature was already used on chain (each merchant signature is single-use).',
        'signature',
      );
    default:
      return cannotProcess('chain_rejected', `The deposit contract refused the refund (${errorName}).`);
  }
}
