import { Controller, Inject } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import {
  CHAIN_OPERATOR_CONFIG,
  type ChainOperatorConfig,
  type DepositRescanAnswer,
  type DepositRescanCommand,
  IndexerWatchClient,
  OperatorRelayers,
  rescanDeposits,
} from '@stablepay/chain-operator';
import { CommandHandler } from '@stablepay/commands';
import { PAYMENT_DEPOSIT_COMMANDS } from '@stablepay/payments-api';
import { notFound } from '@stablepay/util';
import { DepositFlow } from '../../deposits/deposit-flow';
import { PaymentFacts } from '../payment-facts';

/**
 * An operator's re-scan of a payment's deposit address (docs/chain-operator.md, "Re-scanning a deposit address"):
 * a transfer the indexer never published (a payment watched from the indexer's checkpoint before 0fba65e, an
 * indexer outage longer than its window, an RPC that answered incomplete logs) reaches the payment through the
 * usual observation consumer, which takes each transfer once. Movements out of the deposit contract (captures,
 * refunds, reclaims, recovers, rescues, ours or anyone's) the indexer missed are read from the chain here and queued
 * as its sightings are (DepositFlow.rescanOutflows): recorded once, at the chain's confirmations. Another merchant's
 * payment is 404.
 */
@Controller()
export class RescanDepositHandler {
  constructor(
    @Inject(CHAIN_OPERATOR_CONFIG) private readonly config: ChainOperatorConfig,
    @Inject(OperatorRelayers) private readonly relayers: OperatorRelayers,
    @Inject(IndexerWatchClient) private readonly indexer: IndexerWatchClient,
    @Inject(PaymentFacts) private readonly facts: PaymentFacts,
    @Inject(DepositFlow) private readonly deposits: DepositFlow,
  ) {}

  @CommandHandler(PAYMENT_DEPOSIT_COMMANDS.rescan)
  async rescan(@Payload() command: DepositRescanCommand): Promise<DepositRescanAnswer[]> {
    const { state } = await this.facts.load(command.id);
    const created = state.created;
    if (!created || created.merchantId !== command.merchantId) throw notFound('payment', command.id);
    const set = this.relayers.set;
    // The chains the deposit flow watches the address on (DepositFlow.onPaymentEvent).
    const chains = set
      ? [...new Set(created.acceptedAssets.map((a) => a.chain))].filter((c) =>
          this.config.chains.some((k) => k.caip2 === c),
        )
      : [];
    return rescanDeposits(command, {
      addresses: [created.depositAddress],
      chains,
      createdAt: created.createdAt,
      provider: (chain) => {
        if (!set) throw new Error('no chain provider');
        return set.for(chain).provider;
      },
      indexer: this.indexer,
      // The indexer's re-scan covers transfers into the address; what left the deposit is read here.
      outflows: (scan) => this.deposits.rescanOutflows(command.id, scan),
    });
  }
}
