import { Inject, Injectable, Logger } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { type DueRow, ReadModelTimer } from '@stablepay/runtime';
import { ChargeLedgerCommands } from '../charges/charge-ledger.commands';

/** How often (real time) due settlement deadlines are looked for; the deadlines themselves are by the clock. */
const POLL_INTERVAL_MS = 30_000;

interface DueSettlement extends DueRow {
  merchantId: string;
  mode: 'test' | 'live';
}

/**
 * The durable timer of SPEC's settlement deadlines (six hours: delayed; 72 hours: failed): the ledger row keeps when
 * its open settlement must next be checked (`settlement_check_at`, from settlementCheckAt), and each due row gets
 * `CheckSettlementDeadlines` by the injected clock; the aggregate decides again from its stream. Event ids derive
 * from the charge and its due time, so two replicas firing the same check append once.
 */
@Injectable()
export class SettlementDeadlines extends ReadModelTimer<DueSettlement> {
  protected readonly logger = new Logger('charge-ledger.settlement-deadlines');

  constructor(
    @Inject(DataSource) private readonly dataSource: DataSource,
    @Inject(ChargeLedgerCommands) private readonly commands: ChargeLedgerCommands,
  ) {
    super(() => POLL_INTERVAL_MS);
  }

  protected now(): Date {
    return this.commands.now();
  }

  protected async due(now: Date, limit: number, after?: DueRow): Promise<DueSettlement[]> {
    const rows: Array<{ id: string; merchant_id: string; mode: 'test' | 'live'; check_at: Date }> =
      await this.dataSource.query(
        `SELECT id, merchant_id, mode, settlement_check_at AS check_at FROM subscription_charges
         WHERE settlement_check_at <= $1
           AND ($2::timestamptz IS NULL OR (settlement_check_at, id) > ($2::timestamptz, $3::text))
         ORDER BY settlement_check_at, id LIMIT $4`,
        [now.toISOString(), after?.dueAt.toISOString() ?? null, after?.id ?? '', limit],
      );
    return rows.map((r) => ({
      id: r.id,
      merchantId: r.merchant_id,
      mode: r.mode,
      dueAt: new Date(r.check_at),
    }));
  }

  protected async fire(row: DueSettlement): Promise<boolean> {
    const { newEvents } = await this.commands.run(
      row.id,
      { merchantId: row.merchantId, mode: row.mode },
      { type: 'CheckSettlementDeadlines', now: this.commands.now() },
      `settlement-deadline:${row.id}:${row.dueAt.toISOString()}`,
    );
    return newEvents.length > 0;
  }
}
