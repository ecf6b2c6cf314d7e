import { Inject, Injectable, Logger } from '@nestjs/common';
import { CLOCK } from '@stablepay/aggregate';
import { ReadModelTimer, type DueRow } from '@stablepay/runtime';
import type { Clock } from '@stablepay/util';
import { SUBSCRIPTIONS_CONFIG, type SubscriptionsConfig } from '../subscriptions.config';
import { SubscriptionCheckoutCommands } from './subscription-checkout.commands';
import { SubscriptionCheckoutReader, type SubscriptionCheckoutRow } from './subscription-checkout.reader';

type DueIntent = Pick<SubscriptionCheckoutRow, 'id' | 'merchant_id' | 'mode'> & DueRow;

/**
 * The durable expiry timer (SPEC States: pending -> expired when expires_at elapses, with no request needed). Its
 * queue is the subscription checkouts read model; each due intent gets ExpireSubscriptionCheckout through the
 * aggregate, which decides again from the stream: an intent cancelled or completed meanwhile, or expired by another
 * replica, appends nothing (idempotent, and safe with several replicas).
 */
@Injectable()
export class SubscriptionCheckoutExpiryTimer extends ReadModelTimer<DueIntent> {
  protected readonly logger = new Logger('subscription-checkout-expiry');

  constructor(
    @Inject(SubscriptionCheckoutReader) private readonly reader: SubscriptionCheckoutReader,
    @Inject(SubscriptionCheckoutCommands) private readonly commands: SubscriptionCheckoutCommands,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(SUBSCRIPTIONS_CONFIG) config: SubscriptionsConfig,
  ) {
    super(() => config.expiryPollIntervalMs);
  }

  protected now(): Date {
    return this.clock.now();
  }

  protected async due(now: Date, limit: number, after?: DueRow): Promise<DueIntent[]> {
    const rows = await this.reader.dueForExpiry(now, limit, after);
    return rows.map((row) => ({ ...row, dueAt: new Date(row.expires_at) }));
  }

  protected async fire(row: DueIntent): Promise<boolean> {
    const { changed } = await this.commands.expire(row);
    return changed;
  }
}
