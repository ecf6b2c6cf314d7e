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
  EVENT_BUS,
  type EventBus,
  topicForCategory,
} from '@stablepay/event-bus';
import { type ManagerLog, SubscriptionChainFacts } from './chain-facts';

/** The indexer's observation topic (docs/asyncapi.yaml); its types are read structurally (no indexer import). */
export const CHAIN_OBSERVATION_TOPIC = topicForCategory('chain');
export const CHAIN_OBSERVATIONS_GROUP = 'subscriptions.chain-observations';
const MANAGER_EVENT_OBSERVED = 'SubscriptionManagerEventObserved.v1';
const OBSERVATION_RETRACTED = 'ObservationRetracted.v1';

interface ManagerEventObserved {
  readonly chain: string;
  readonly blockNumber: string;
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
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    this.subscription = await this.bus.consume({
      group: CHAIN_OBSERVATIONS_GROUP,
      topics: [CHAIN_OBSERVATION_TOPIC],
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
      // The aggregate has no retraction yet: a reorg that orphans a recorded charge or cancel is reported for an
      // operator (docs/subscriptions.md, not built yet), and the re-included log is recorded again by transaction.
      const d = message.data as { observationId?: string; txHash?: string; chain?: string };
      this.logger.warn({ msg: 'observation retracted by a reorg', ...d });
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
      blockTime: d.blockTime,
    };
    await this.facts.record(log, 'indexer', `obs:${message.id}`);
  }
}
