import {
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  type OnModuleDestroy,
} from '@nestjs/common';
import { CLOCK } from '@stablepay/aggregate';
import type { Clock } from '@stablepay/util';
import { SUBSCRIPTIONS_CONFIG, type SubscriptionsConfig } from '../subscriptions.config';
import { SubscriptionCheckoutCommands } from './subscription-checkout.commands';
import { SubscriptionCheckoutReader } from './subscription-checkout.reader';

const BATCH = 100;

/**
 * The durable expiry timer (SPEC States: pending -> expired when expires_at elapses, with no request needed).
 *
 * Its queue is the read model itself: pending rows whose expires_at has passed by the injected clock (a partial
 * index keeps that cheap). Nothing lives in memory, so a restart loses nothing: the first tick after start
 * expires whatever fell due while the service was down. Each due intent gets ExpireSubscriptionCheckout through
 * the aggregate, which decides again from the stream: an intent cancelled or completed meanwhile, or expired by
 * another replica, appends nothing (idempotent, and safe with several replicas).
 */
@Injectable()
export class SubscriptionCheckoutExpiryTimer implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('subscription-checkout-expiry');
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private stopped = false;

  constructor(
    @Inject(SubscriptionCheckoutReader) private readonly reader: SubscriptionCheckoutReader,
    @Inject(SubscriptionCheckoutCommands) private readonly commands: SubscriptionCheckoutCommands,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(SUBSCRIPTIONS_CONFIG) private readonly config: SubscriptionsConfig,
  ) {}

  onApplicationBootstrap(): void {
    this.schedule(0);
  }

  async onModuleDestroy(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running;
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.tick()
        .then(() => undefined)
        .catch((error: unknown) =>
          this.logger.error({ msg: 'expiry tick failed, will retry', error: String(error) }),
        )
        .finally(() => {
          this.running = undefined;
          this.schedule(this.config.expiryPollIntervalMs);
        });
    }, delayMs);
    this.timer.unref();
  }

  /** Expires every intent due now; returns how many it expired. */
  async tick(): Promise<number> {
    let expired = 0;
    for (;;) {
      const due = await this.reader.dueForExpiry(this.clock.now(), BATCH);
      for (const row of due) {
        if (this.stopped) return expired;
        const { changed } = await this.commands.expire(row);
        if (changed) expired += 1;
      }
      if (due.length < BATCH) return expired;
    }
  }
}
