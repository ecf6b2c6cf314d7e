import { Inject, Injectable } from '@nestjs/common';
import { DomainError } from '@stablepay/util';
import { PayoutsAggregates, type Appended } from '../aggregates';
import { type CustomerRow, PayoutsReader } from '../read-model/payouts.reader';

export interface ObservedDeposit {
  readonly chain: string;
  /** Token symbol. */
  readonly token: string;
  /** Token minor units. */
  readonly amount: string;
  readonly from: string;
  readonly txHash: string;
  readonly logIndex: number;
  /** The block the observation came from: a log re-included in another block after a reorg is a new deposit fact. */
  readonly blockHash?: string;
  /** The test helper's: no transaction behind it (the flow then has nothing to sweep). */
  readonly simulated?: boolean;
}

/**
 * Crypto arrived at a customer's deposit address (the chain's observation, or the test helper): the oldest of the customer's payouts awaiting exactly this deposit (chain, token, amount) takes
 * it (PayoutDepositDetected.v1 -> payout.deposit_detected). A deposit no payout waits for funds nothing and is
 * answered as such (docs/payouts.md, "Deposits").
 */
@Injectable()
export class DepositIntake {
  constructor(
    @Inject(PayoutsAggregates) private readonly aggregates: PayoutsAggregates,
    @Inject(PayoutsReader) private readonly reader: PayoutsReader,
  ) {}

  async record(customer: CustomerRow, deposit: ObservedDeposit): Promise<Appended | null> {
    // A customer no longer active (suspended, ...) funds nothing: the deposit stays at its address, held for
    // compliance. Its row may lag a suspension; the step before the off-ramp rechecks the customer's own stream.
    if (customer.status !== 'active') return null;
    // The read model can lag behind a deposit recorded a moment ago (two deposits in a row): a payout already funded
    // by another deposit refuses this one (409) and the next candidate is offered it.
    for (const payout of await this.reader.payoutsAwaiting(customer.id, deposit)) {
      try {
        return await this.aggregates.payout(
          payout.id,
          { merchantId: payout.merchant_id, mode: payout.mode },
          {
            type: 'RecordDeposit',
            txHash: deposit.txHash,
            from: deposit.from,
            amount: deposit.amount,
            ...(deposit.simulated ? { simulated: true } : {}),
            now: this.aggregates.now(),
          },
          `deposit:${deposit.chain}:${deposit.txHash}:${deposit.logIndex}${deposit.blockHash ? `:${deposit.blockHash}` : ''}`,
        );
      } catch (error) {
        if (error instanceof DomainError && error.code === 'payout_state') continue;
        throw error;
      }
    }
    return null;
  }
}
