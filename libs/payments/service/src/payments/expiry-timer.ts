import {
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  type OnModuleDestroy,
} from '@nestjs/common';
import { CLOCK } from '@stablepay/aggregate';
import type { Clock } from '@stablepay/util';
import { PAYMENTS_CONFIG, type PaymentsConfig } from '../payments.config';
import { PaymentCommands } from './payment.commands';
import { PaymentReader } from './payment.reader';

const BATCH = 100;

/**
 * The durable expiry timer (SPEC States > Payment: pending -> expired when expires_at passes with no valid
 * deposit, no request needed).
 *
 * Its queue is the read model: pending payments whose expires_at has passed by the injected clock (a partial
 * index keeps that cheap). Nothing lives in memory, so a restart loses nothing: the first tick after start
 * expires whatever fell due while the service was down. Each due payment gets `Expire` through the aggregate,
 * which decides again from the stream: a payment cancelled or paid meanwhile, or a full deposit mined in time and
 * still confirming, appends nothing (so the tick walks past it with a cursor instead of asking again).
 */
@Injectable()
export class PaymentExpiryTimer implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('payment-expiry');
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private stopped = false;

  constructor(
    @Inject(PaymentReader) private readonly reader: PaymentReader,
    @Inject(PaymentCommands) private readonly commands: PaymentCommands,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(PAYMENTS_CONFIG) private readonly config: PaymentsConfig,
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

  /** Expires every payment due now; returns how many it expired. */
  async tick(): Promise<number> {
    const now = this.clock.now();
    let expired = 0;
    let after: { expiresAt: Date; id: string } | undefined;
    for (;;) {
      const due = await this.reader.dueForExpiry(now, BATCH, after);
      for (const row of due) {
        if (this.stopped) return expired;
        // No idempotency key needed: a second replica racing on the same payment loses the expected-revision
        // check, decides again from the stream and finds nothing to do.
        const { changed } = await this.commands.run(row, { type: 'Expire' });
        if (changed) expired += 1;
        after = { expiresAt: new Date(row.expires_at), id: row.id };
      }
      if (due.length < BATCH) return expired;
    }
  }
}
