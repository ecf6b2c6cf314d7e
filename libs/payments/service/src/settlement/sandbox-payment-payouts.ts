import { Inject, Injectable, Logger } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { SandboxPayoutSteps } from '@stablepay/fiat-settlement';
import { type DueRow, ReadModelTimer } from '@stablepay/runtime';
import { PAYMENTS_CONFIG, type PaymentsConfig } from '../payments.config';
import { PaymentCommands } from '../payments/payment.commands';
import {
  PAYMENT_SETTLEMENT_FEED,
  type PaymentSettlementFeed,
  SandboxPaymentSettlementFeed,
} from './payment-settlement-feed';

interface OpenPayout extends DueRow {
  /** The order amount in cents (minor units of the order currency), or '' when it has fractions of a cent. */
  readonly cents: string;
}

/** A payment's order amount (6-decimal integer string) in cents, the unit the sandbox's magic amounts are in. */
export function orderAmountInCents(amount: string): string {
  const value = BigInt(amount);
  return value % 10_000n === 0n ? String(value / 10_000n) : '';
}

/**
 * The sandbox provider paying out fiat-settled payments on its own, as the charge ledger's SandboxPayouts does for
 * charges (same scripts and magic amounts, @stablepay/fiat-settlement): every test-mode payment with an open fiat
 * settlement gets the reports of its order amount's script (in cents: 4.02 rejected, 4.04 never credited, 4.08 late;
 * anything else completes), one step per SANDBOX_SETTLEMENT_DELAY_MS of the injected clock after the crypto settled.
 * Reports go through the feed like any provider's, with ids derived from the payment and the step, so a step sent
 * again (another replica, a restart) is recorded once. Live-mode payments are never touched. Off when the delay is
 * `off` or the configured feed is not the sandbox.
 */
@Injectable()
export class SandboxPaymentPayouts extends ReadModelTimer<OpenPayout> {
  protected readonly logger = new Logger('payments.sandbox-payouts');
  /** Steps already sent by this process (a restart sends them again; the report ids make that a no-op). */
  private readonly steps = new SandboxPayoutSteps();

  constructor(
    @Inject(DataSource) private readonly dataSource: DataSource,
    @Inject(PaymentCommands) private readonly commands: PaymentCommands,
    @Inject(PAYMENT_SETTLEMENT_FEED) private readonly feed: PaymentSettlementFeed,
    @Inject(PAYMENTS_CONFIG) private readonly config: PaymentsConfig,
  ) {
    super(() => config.sandboxSettlement.sandboxSettlementPollMs);
  }

  private get delayMs(): number | null {
    return this.feed instanceof SandboxPaymentSettlementFeed
      ? this.config.sandboxSettlement.sandboxSettlementDelayMs
      : null;
  }

  override onApplicationBootstrap(): void {
    if (this.delayMs !== null) super.onApplicationBootstrap();
  }

  protected now(): Date {
    return this.commands.now();
  }

  protected async due(now: Date, limit: number, after?: DueRow): Promise<OpenPayout[]> {
    const delay = this.delayMs;
    if (delay === null) return [];
    // settlement_check_at is set exactly while a settlement is open (its partial index serves the scan).
    const rows: Array<{ id: string; started_at: Date; amount: string }> = await this.dataSource.query(
      `SELECT id, settlement_started_at AS started_at, object->>'amount' AS amount FROM payments
       WHERE settlement_check_at IS NOT NULL AND mode = 'test' AND settlement_started_at <= $1
         AND ($2::timestamptz IS NULL OR (settlement_started_at, id) > ($2::timestamptz, $3::text))
       ORDER BY settlement_started_at, id LIMIT $4`,
      [
        new Date(now.getTime() - delay).toISOString(),
        after?.dueAt.toISOString() ?? null,
        after?.id ?? '',
        limit,
      ],
    );
    return rows.map((r) => ({
      id: r.id,
      dueAt: new Date(r.started_at),
      cents: orderAmountInCents(r.amount),
    }));
  }

  protected async fire(row: OpenPayout): Promise<boolean> {
    const delay = this.delayMs;
    if (delay === null || !(this.feed instanceof SandboxPaymentSettlementFeed)) return false;
    let fired = false;
    for (const step of this.steps.due(row.id, row.dueAt, row.cents, this.now(), delay)) {
      for (const report of step.reports) await this.feed.deliver({ paymentId: row.id, ...report });
      step.sent();
      fired = true;
    }
    return fired;
  }
}
