import {
  type BeforeApplicationShutdown,
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
} from '@nestjs/common';
import {
  type BusMessage,
  type BusSubscription,
  chainObservationIsolationKey,
  EVENT_BUS,
  type EventBus,
  topicForCategory,
} from '@stablepay/event-bus';
import { ChainObservationLog, type ManagerLog, SubscriptionChainFacts } from './chain-facts';

/** The indexer's observation topic (docs/asyncapi.yaml); its types are read structurally (no indexer import). */
export const CHAIN_OBSERVATION_TOPIC = topicForCategory('chain');
export const CHAIN_OBSERVATIONS_GROUP = 'subscriptions.chain-observations';
const MANAGER_EVENT_OBSERVED = 'SubscriptionManagerEventObserved.v1';
const OBSERVATION_RETRACTED = 'ObservationRetracted.v1';

interface ManagerEventObserved {
  readonly chain: string;
  readonly blockNumber: string;
  readonly blockHash?: string;
  readonly blockTime: string;
  readonly txHash: string;
  readonly logIndex: number;
  readonly contract: string;
  readonly event: string;
  readonly args: Readonly<Record<string, string>>;
}

/**
 * SubscriptionManagerEventObserved (every log of a watched manager, in block order per chain) -> Subscription facts
 * (the indexer write path). A redelivered observation appends nothing (its id is the idempotency key).
 */
@Injectable()
export class ChainObservationsConsumer implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('subscriptions.chain-observations');
  private subscription: BusSubscription | undefined;

  constructor(
    @Inject(EVENT_BUS) private readonly bus: EventBus,
    @Inject(SubscriptionChainFacts) private readonly facts: SubscriptionChainFacts,
    @Inject(ChainObservationLog) private readonly observations: ChainObservationLog,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    this.subscription = await this.bus.consume({
      group: CHAIN_OBSERVATIONS_GROUP,
      topics: [CHAIN_OBSERVATION_TOPIC],
      // Per manager, not per chain: order within a manager matters (a charge after its subscription's creation).
      isolationKey: chainObservationIsolationKey,
      handler: (message) => this.handle(message),
      onError: (error, message) =>
        this.logger.error({
          msg: 'recording a chain observation failed, will retry',
          messageId: message.id,
          error: String(error),
        }),
    });
  }

  async beforeApplicationShutdown(): Promise<void> {
    await this.subscription?.stop();
  }

  async caughtUp(): Promise<void> {
    await this.subscription?.caughtUp();
  }

  async handle(message: BusMessage): Promise<void> {
    if (message.type === OBSERVATION_RETRACTED) {
      // A reorg orphaned the block of an observation: undo the fact it reported (whichever write path recorded it
      // first; the receipt the API path read came from the same orphaned block). The re-included log, if any, is a
      // new observation that follows and records the fact again.
      const d = message.data as { observationId: string };
      const observed = await this.observations.find(d.observationId);
      if (!observed || observed.retracted_at !== null) return;
      await this.facts.retract(observed, `retract:${message.id}`);
      await this.observations.markRetracted(d.observationId);
      this.logger.warn({
        msg: 'subscription fact retracted by a reorg',
        event: observed.event,
        subscriptionId: observed.subscription_id,
        txHash: observed.tx_hash,
      });
      return;
    }
    if (message.type !== MANAGER_EVENT_OBSERVED) return;
    const d = message.data as ManagerEventObserved;
    const log: ManagerLog = {
      chain: d.chain,
      contract: d.contract,
      event: d.event,
      args: d.args,
      txHash: d.txHash,
      blockNumber: d.blockNumber,
      ...(d.blockHash ? { blockHash: d.blockHash } : {}),
      blockTime: d.blockTime,
    };
    // Kept before the fact is recorded: a retraction that follows finds what to undo even after a crash in between.
    await this.observations.remember(message.id, log);
    await this.facts.record(log, 'indexer', `obs:${message.id}`);
  }
}
