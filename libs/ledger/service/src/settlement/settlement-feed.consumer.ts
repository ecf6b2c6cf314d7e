import { Inject, Injectable, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { notFound } from '@stablepay/util';
import { ChargeLedgerCommands } from '../charges/charge-ledger.commands';
import { ChargeLedgerReader } from '../charges/charge-ledger.reader';
import { SETTLEMENT_FEED, type SettlementFeed, type SettlementReport } from './settlement-feed';

/**
 * The provider's reports -> the Charge aggregate (`RecordSettlementReport`): each becomes a ChargeSettlementReported
 * fact of its charge plus the settlement transition it means (settled, delayed, failed), whose webhooks the ledger's
 * source sends. Event ids derive from the report id, so a report delivered twice appends once.
 */
@Injectable()
export class SettlementFeedConsumer implements OnApplicationBootstrap, OnApplicationShutdown {
  constructor(
    @Inject(SETTLEMENT_FEED) private readonly feed: SettlementFeed,
    @Inject(ChargeLedgerCommands) private readonly commands: ChargeLedgerCommands,
    @Inject(ChargeLedgerReader) private readonly reader: ChargeLedgerReader,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    await this.feed.start((report) => this.record(report));
  }

  async onApplicationShutdown(): Promise<void> {
    await this.feed.stop();
  }

  async record(report: SettlementReport): Promise<void> {
    // The owner is the ledger row's; a report about a charge not listed yet fails and comes again.
    const row = await this.reader.find(report.chargeId);
    if (!row) throw notFound('subscription_charge', report.chargeId);
    await this.commands.run(
      report.chargeId,
      { merchantId: row.merchant_id, mode: row.mode },
      {
        type: 'RecordSettlementReport',
        reportId: report.id,
        kind: report.kind,
        reportedAt: report.reportedAt,
        now: this.commands.now(),
      },
      `settlement-report:${report.id}`,
    );
  }
}
