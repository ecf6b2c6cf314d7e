import { Inject, Injectable, Logger } from '@nestjs/common';
import { CLOCK } from '@stablepay/aggregate';
import { ReadModelTimer, type DueRow } from '@stablepay/runtime';
import type { Clock } from '@stablepay/util';
import { PAYMENTS_CONFIG, type PaymentsConfig } from '../payments.config';
import { PaymentCommands } from './payment.commands';
import { PaymentReader, type PaymentOwner } from './payment.reader';

type DuePayment = PaymentOwner & DueRow;

/**
 * The durable expiry timer (SPEC States > Payment: pending -> expired when expires_at passes with no valid
 * deposit, no request needed). Its queue is the payments read model; each due payment gets `Expire` through the
 * aggregate, which decides again from the stream: a payment cancelled or paid meanwhile, or a full deposit mined in
 * time and still confirming, appends nothing.
 */
@Injectable()
export class PaymentExpiryTimer extends ReadModelTimer<DuePayment> {
  protected readonly logger = new Logger('payment-expiry');

  constructor(
    @Inject(PaymentReader) private readonly reader: PaymentReader,
    @Inject(PaymentCommands) private readonly commands: PaymentCommands,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(PAYMENTS_CONFIG) config: PaymentsConfig,
  ) {
    super(() => config.expiryPollIntervalMs);
  }

  protected now(): Date {
    return this.clock.now();
  }

  protected async due(now: Date, limit: number, after?: DueRow): Promise<DuePayment[]> {
    const rows = await this.reader.dueForExpiry(now, limit, after);
    return rows.map((row) => ({ ...row, dueAt: new Date(row.expires_at) }));
  }

  protected async fire(row: DuePayment): Promise<boolean> {
    // No idempotency key needed: a second replica racing on the same payment loses the expected-revision check,
    // decides again from the stream and finds nothing to do.
    const { changed } = await this.commands.run(row, { type: 'Expire' });
    return changed;
  }
}
