import { Inject, Injectable, Logger } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { EVENT_STORE } from '@stablepay/aggregate';
import type { EventStore } from '@stablepay/event-store';
import { SandboxPayoutSteps } from '@stablepay/fiat-settlement';
import { chargeStreamId, foldCharge, payoutFiatAmount } from '@stablepay/ledger-domain';
import { type DueRow, ReadModelTimer } from '@stablepay/runtime';
import { ChargeLedgerCommands } from '../charges/charge-ledger.commands';
import { CHARGE_LEDGER_CONFIG, type ChargeLedgerConfig } from '../charge-ledger.config';
import { SandboxSettlementFeed, SETTLEMENT_FEED, type SettlementFeed } from './settlement-feed';

/** The sandbox provider's payout scripts and magic amounts are shared with payments (@stablepay/fiat-settlement). */
export {
  SANDBOX_PAYOUT_LATE,
  SANDBOX_PAYOUT_NEVER_CREDITED,
  SANDBOX_PAYOUT_REJECTED,
  type SandboxPayoutStep,
  sandboxPayoutScript,
} from '@stablepay/fiat-settlement';

/**
 * The sandbox provider paying out on its own (the reachable path of a fiat settlement under `npm start`): every
 * test-mode charge with an open fiat settlement is treated as swept to the provider when its ledger row was written,
 * and the provider reports on it by the script of the fiat amount it pays out (payoutFiatAmount: the amount the
 * charge was quoted at, which is SPEC's `fiat_amount` plan price unless the charge was ad hoc), one step per
 * SANDBOX_SETTLEMENT_DELAY_MS of the injected clock after the row's `created_at`. Reports go through the same feed
 * as any provider's (SettlementFeedConsumer), with ids derived from the charge and the step, so a step sent again
 * (another replica, a restart) is recorded once. Live-mode charges are never touched: a live payout is only what a
 * real provider reports. Off when the delay is unset (`off`) or the configured feed is not the sandbox.
 */
@Injectable()
export class SandboxPayouts extends ReadModelTimer<DueRow> {
  protected readonly logger = new Logger('charge-ledger.sandbox-payouts');
  /** Steps already sent by this process (a restart sends them again; the report ids make that a no-op). */
  private readonly steps = new SandboxPayoutSteps();

  constructor(
    @Inject(DataSource) private readonly dataSource: DataSource,
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(ChargeLedgerCommands) private readonly commands: ChargeLedgerCommands,
    @Inject(SETTLEMENT_FEED) private readonly feed: SettlementFeed,
    @Inject(CHARGE_LEDGER_CONFIG) private readonly config: ChargeLedgerConfig,
  ) {
    super(() => config.sandboxSettlementPollMs);
  }

  private get delayMs(): number | null {
    return this.feed instanceof SandboxSettlementFeed ? this.config.sandboxSettlementDelayMs : null;
  }

  override onApplicationBootstrap(): void {
    if (this.delayMs !== null) super.onApplicationBootstrap();
  }

  protected now(): Date {
    return this.commands.now();
  }

  protected async due(now: Date, limit: number, after?: DueRow): Promise<DueRow[]> {
    const delay = this.delayMs;
    if (delay === null) return [];
    // settlement_check_at is set exactly while a settlement is open (its partial index serves the scan).
    const rows: Array<{ id: string; created_at: Date }> = await this.dataSource.query(
      `SELECT id, created_at FROM subscription_charges
         WHERE settlement_check_at IS NOT NULL AND mode = 'test' AND created_at <= $1
           AND ($2::timestamptz IS NULL OR (created_at, id) > ($2::timestamptz, $3::text))
         ORDER BY created_at, id LIMIT $4`,
      [
        new Date(now.getTime() - delay).toISOString(),
        after?.dueAt.toISOString() ?? null,
        after?.id ?? '',
        limit,
      ],
    );
    return rows.map((r) => ({ id: r.id, dueAt: new Date(r.created_at) }));
  }

  protected async fire(row: DueRow): Promise<boolean> {
    const delay = this.delayMs;
    if (delay === null || !(this.feed instanceof SandboxSettlementFeed)) return false;
    // The payout amount is on the charge's stream, not on the listed row (whose `fiat_amount` is SPEC's plan price).
    const fiat = foldCharge(await this.store.readStream(chargeStreamId(row.id))).fiat;
    const amount = fiat ? payoutFiatAmount(fiat) : '';
    let fired = false;
    for (const step of this.steps.due(row.id, row.dueAt, amount, this.now(), delay)) {
      for (const report of step.reports) await this.feed.deliver({ chargeId: row.id, ...report });
      step.sent();
      fired = true;
    }
    return fired;
  }
}
