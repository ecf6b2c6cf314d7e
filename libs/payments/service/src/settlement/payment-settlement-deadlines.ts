import { Inject, Injectable, Logger } from '@nestjs/common';
import { type DueRow, ReadModelTimer } from '@stablepay/runtime';
import { PaymentCommands } from '../payments/payment.commands';
import { PaymentReader, type PaymentOwner } from '../payments/payment.reader';

/** How often (real time) due settlement deadlines are looked for; the deadlines themselves are by the clock. */
const POLL_INTERVAL_MS = 30_000;

type DueSettlement = PaymentOwner & DueRow;

/**
 * The durable timer of SPEC's settlement deadlines for payments (six hours: payment.settlement_delayed; 72 hours:
 * payment.settlement_failed), the same mechanism as the charge ledger's SettlementDeadlines: the payments row keeps
 * when its open settlement must next be checked (`settlement_check_at`, from paymentSettlementCheckAt), and each due
 * row gets `CheckSettlementDeadlines` by the injected clock; the aggregate decides again from its stream. Event ids
 * derive from the payment and its due time, so two replicas firing the same check append once.
 */
@Injectable()
export class PaymentSettlementDeadlines extends ReadModelTimer<DueSettlement> {
  protected readonly logger = new Logger('payments.settlement-deadlines');

  constructor(
    @Inject(PaymentReader) private readonly reader: PaymentReader,
    @Inject(PaymentCommands) private readonly commands: PaymentCommands,
  ) {
    super(() => POLL_INTERVAL_MS);
  }

  protected now(): Date {
    return this.commands.now();
  }

  protected async due(now: Date, limit: number, after?: DueRow): Promise<DueSettlement[]> {
    const rows = await this.reader.dueForSettlementCheck(now, limit, after);
    return rows.map((r) => ({
      id: r.id,
      merchant_id: r.merchant_id,
      mode: r.mode,
      dueAt: new Date(r.settlement_check_at),
    }));
  }

  protected async fire(row: DueSettlement): Promise<boolean> {
    const { changed } = await this.commands.run(
      row,
      { type: 'CheckSettlementDeadlines' },
      `settlement-deadline:${row.id}:${row.dueAt.toISOString()}`,
    );
    return changed;
  }
}
