import {
  type BeforeApplicationShutdown,
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
} from '@nestjs/common';
import { EVENT_STORE } from '@stablepay/aggregate';
import { type BusMessage, type BusSubscription, EVENT_BUS, type EventBus } from '@stablepay/event-bus';
import type { EventStore } from '@stablepay/event-store';
import type {
  SubscriptionChargeSucceededData,
  SubscriptionCreatedData,
} from '@stablepay/subscriptions-domain';
import { ChainObservationLog } from './chain-facts';
import { SUBSCRIPTION_TOPIC } from './subscription.projection';

export const CHARGE_RECEIPTS_GROUP = 'subscriptions.charge-receipts';

/**
 * The charge call's receipts -> the rows SubscriptionReceiptChecks watches (docs/subscriptions.md, Reorgs). The call
 * records a charge from its receipt at one confirmation and keeps the receipt's block on the fact
 * (`SubscriptionChargeSucceeded.v1` `receipt`); the row is written here, from the fact, off the charge's answer.
 * The call wrote it itself before the fact until 2026-11-24: one more sequential database round trip per charge.
 * The fact is the durable record either way: a crash before its append leaves nothing to check, one after it
 * redelivers the fact here. A row written twice (a redelivery, a row the version before wrote for the same log) is
 * one row. A charge found landed by someone else carries where the log query placed it and is watched alike. Facts
 * without a receipt (the indexer's, the subscribe call's, a landed charge whose node gave no block hash, charges
 * recorded before the field existed) are not the call's receipts: nothing to write.
 */
@Injectable()
export class ChargeReceiptsConsumer implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('subscriptions.charge-receipts');
  private subscription: BusSubscription | undefined;

  constructor(
    @Inject(EVENT_BUS) private readonly bus: EventBus,
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(ChainObservationLog) private readonly observations: ChainObservationLog,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    this.subscription = await this.bus.consume({
      group: CHARGE_RECEIPTS_GROUP,
      topics: [SUBSCRIPTION_TOPIC],
      handler: (message) => this.handle(message),
      onError: (error, message) =>
        this.logger.error({
          msg: "remembering a charge's receipt for its reorg check failed, will retry",
          messageId: message.id,
          error: String(error),
        }),
    });
  }

  async beforeApplicationShutdown(): Promise<void> {
    await this.subscription?.stop();
  }

  /** Resolves once every message published before the call has been handled. */
  async caughtUp(): Promise<void> {
    await this.subscription?.caughtUp();
  }

  async handle(message: BusMessage): Promise<void> {
    if (message.type !== 'SubscriptionChargeSucceeded.v1') return;
    const d = message.data as SubscriptionChargeSucceededData;
    if (d.writtenBy !== 'api' || !d.receipt) return;
    // The chain is the subscription's (its first fact): the charge fact does not repeat it.
    const [first] = await this.store.readStream(message.key, { maxCount: 1 });
    if (first?.type !== 'SubscriptionCreated.v1')
      throw new Error(`stream ${message.key} does not start with SubscriptionCreated.v1`);
    const created = first.data as SubscriptionCreatedData;
    await this.observations.rememberRecordedReceipt(
      {
        chain: created.chain,
        contract: d.receipt.manager,
        event: 'SubscriptionCharged',
        // The log's arguments the fact holds (a retraction reads the nonce).
        args: {
          subscriptionId: created.subscriptionId.toLowerCase(),
          nonce: String(d.nonce),
          amount: d.amount,
          windowIndex: d.windowIndex,
          windowSpent: d.windowSpent,
          quoteHash: d.quoteHash,
        },
        txHash: d.txHash,
        blockNumber: d.blockNumber,
        blockHash: d.receipt.blockHash,
        blockTime: d.chargedAt,
      },
      d.receipt.logIndex,
    );
  }
}
