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
  OutageGrace,
} from '@stablepay/event-bus';
import { SANCTIONS_SCREENING, type SanctionsScreening, SCREENING_OUTAGE_GRACE_MS } from '@stablepay/evm';
import { SUBSCRIPTION_TOPIC } from './subscription.projection';
import { SubscriptionCommands } from './subscription.commands';

export const SUBSCRIBER_SCREENING_GROUP = 'subscriptions.subscriber-screening';

/**
 * Compliance screening of subscriber wallets (docs/subscriptions.md, Compliance screening): the subscriber of every
 * SubscriptionCreated.v1 and the new wallet of every SubscriptionMigrated.v1 go through the sanctions screening port
 * (the payments scope's port, shared in @stablepay/evm). A match flags the subscription (`FlagSubscription`:
 * SubscriptionFlagged.v1, webhook `subscription.flagged`, every later charge refused at preflight with
 * `subscription_flagged`); the flag is never lifted. An unreachable provider fails the message: retried in place
 * as an outage for SCREENING_OUTAGE_GRACE_MS, then parked and retried with the bus's back-off. No subscription
 * skips screening.
 */
@Injectable()
export class SubscriberScreeningConsumer implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('subscriptions.subscriber-screening');
  private subscription: BusSubscription | undefined;
  /** SCREENING_OUTAGE_GRACE_MS; a test may shorten it. */
  readonly screeningOutage = new OutageGrace(SCREENING_OUTAGE_GRACE_MS);

  constructor(
    @Inject(EVENT_BUS) private readonly bus: EventBus,
    @Inject(SANCTIONS_SCREENING) private readonly screening: SanctionsScreening,
    @Inject(SubscriptionCommands) private readonly commands: SubscriptionCommands,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    this.subscription = await this.bus.consume({
      group: SUBSCRIBER_SCREENING_GROUP,
      topics: [SUBSCRIPTION_TOPIC],
      handler: (message) => this.handle(message),
      onError: (error, message) =>
        this.logger.error({
          msg: 'screening a subscriber failed, will retry',
          messageId: message.id,
          error: String(error),
        }),
    });
  }

  async beforeApplicationShutdown(): Promise<void> {
    await this.subscription?.stop();
  }

  /** Resolves once every message published before the call has been screened. */
  async caughtUp(): Promise<void> {
    await this.subscription?.caughtUp();
  }

  async handle(message: BusMessage): Promise<void> {
    let wallet: string;
    if (message.type === 'SubscriptionCreated.v1')
      wallet = (message.data as { subscriber: string }).subscriber;
    else if (message.type === 'SubscriptionMigrated.v1')
      wallet = (message.data as { newSubscriber: string }).newSubscriber;
    else return;
    const merchantId = message.metadata.merchantId;
    const mode = message.metadata.mode;
    if (typeof merchantId !== 'string' || (mode !== 'test' && mode !== 'live'))
      throw new Error(`event ${message.id} of ${message.key} has no merchantId/mode metadata`);
    const result = await this.screening.screen([wallet]);
    if (result.kind === 'unreachable')
      throw this.screeningOutage.unavailable(
        message.id,
        `sanctions screening provider unreachable for ${message.key}`,
        this.commands.now(),
      );
    this.screeningOutage.answered(message.id);
    if (result.kind === 'clear') return;
    const subscriptionId = message.key.slice('subscription-'.length);
    await this.commands.run(
      subscriptionId,
      { merchantId, mode },
      { type: 'FlagSubscription', now: this.commands.now() },
      `flag:${message.id}`,
    );
    this.logger.warn({ msg: 'subscription flagged by compliance screening', subscriptionId });
  }
}
