import { Inject, Injectable, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { notFound } from '@stablepay/util';
import { PaymentCommands } from '../payments/payment.commands';
import { PaymentReader } from '../payments/payment.reader';
import {
  PAYMENT_SETTLEMENT_FEED,
  type PaymentSettlementFeed,
  type PaymentSettlementReport,
} from './payment-settlement-feed';

/**
 * The provider's reports about payment payouts -> the Payment aggregate (`RecordSettlementReport`): each becomes a
 * PaymentSettlementReported fact plus what it means (completed, payment.settlement_delayed, payment.settlement_failed),
 * decided by the shared fiat settlement process. Event ids derive from the report id, so a report delivered twice
 * appends once.
 */
@Injectable()
export class PaymentSettlementFeedConsumer implements OnApplicationBootstrap, OnApplicationShutdown {
  constructor(
    @Inject(PAYMENT_SETTLEMENT_FEED) private readonly feed: PaymentSettlementFeed,
    @Inject(PaymentCommands) private readonly commands: PaymentCommands,
    @Inject(PaymentReader) private readonly reader: PaymentReader,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    await this.feed.start((report) => this.record(report));
  }

  async onApplicationShutdown(): Promise<void> {
    await this.feed.stop();
  }

  async record(report: PaymentSettlementReport): Promise<void> {
    // The owner is the read model's; a report about a payment not listed yet fails and comes again.
    const row = await this.reader.findPayment(report.paymentId);
    if (!row) throw notFound('payment', report.paymentId);
    await this.commands.run(
      row,
      {
        type: 'RecordSettlementReport',
        reportId: report.id,
        kind: report.kind,
        reportedAt: report.reportedAt,
      },
      `settlement-report:${report.id}`,
    );
  }
}
