import { randomUUID } from 'node:crypto';
import type { SettlementReportKind } from '@stablepay/ledger-domain';
import type { Clock } from '@stablepay/util';

/**
 * One report of the settlement provider about the payout of a fiat-settled charge (the provider knows the charge by
 * our `subc_` id, the reference it was given with the swept crypto and the price lock).
 */
export interface SettlementReport {
  /** The provider's id of the report: a report delivered again is recorded once. */
  readonly id: string;
  readonly chargeId: string;
  readonly kind: SettlementReportKind;
  /** When it happened at the provider. */
  readonly reportedAt: Date;
}

/**
 * The settlement provider's feed (port): reports as the provider sends them (a real adapter receives its webhooks or
 * pulls its event API). `handler` resolves once the report is recorded; when it rejects the adapter must deliver the
 * report again later (the provider's own retry), so nothing the provider said is lost.
 */
export interface SettlementFeed {
  start(handler: (report: SettlementReport) => Promise<void>): Promise<void>;
  stop(): Promise<void>;
}

export const SETTLEMENT_FEED = Symbol('SETTLEMENT_FEED');

/**
 * The sandbox provider feed: `deliver` plays the provider sending one report (SandboxPayouts sends them on its own for
 * test-mode charges, by the magic fiat amounts; tests send them directly). It resolves once the ledger recorded the
 * report and rejects with the ledger's refusal (an unknown charge, a charge with no fiat settlement), as a provider's
 * delivery would fail and be retried.
 */
export class SandboxSettlementFeed implements SettlementFeed {
  private handler: ((report: SettlementReport) => Promise<void>) | undefined;

  constructor(private readonly clock: Clock) {}

  async start(handler: (report: SettlementReport) => Promise<void>): Promise<void> {
    this.handler = handler;
  }

  async stop(): Promise<void> {
    this.handler = undefined;
  }

  async deliver(report: {
    readonly chargeId: string;
    readonly kind: SettlementReportKind;
    readonly id?: string;
    readonly reportedAt?: Date;
  }): Promise<SettlementReport> {
    if (!this.handler) throw new Error('the settlement feed is not started');
    const delivered: SettlementReport = {
      id: report.id ?? `sbx_${randomUUID()}`,
      chargeId: report.chargeId,
      kind: report.kind,
      reportedAt: report.reportedAt ?? this.clock.now(),
    };
    await this.handler(delivered);
    return delivered;
  }
}
