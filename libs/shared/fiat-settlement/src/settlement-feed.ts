import { randomUUID } from 'node:crypto';
import type { Clock } from '@stablepay/util';
import type { SettlementReportKind } from './fiat-settlement';

/**
 * One report of the settlement provider about a payout. `R` adds the reference the provider knows the payout by (our
 * id of what was swept to it: a charge's `subc_` id, a payment's `pay_` id), so each owner's feed is typed by its own.
 */
export interface SettlementReportOf {
  /** The provider's id of the report: a report delivered again is recorded once. */
  readonly id: string;
  readonly kind: SettlementReportKind;
  /** When it happened at the provider. */
  readonly reportedAt: Date;
}

/**
 * The settlement provider's feed (port): reports as the provider sends them (a real adapter receives its webhooks or
 * pulls its event API). `handler` resolves once the report is recorded; when it rejects the adapter must deliver the
 * report again later (the provider's own retry), so nothing the provider said is lost.
 */
export interface SettlementFeedOf<R extends SettlementReportOf> {
  start(handler: (report: R) => Promise<void>): Promise<void>;
  stop(): Promise<void>;
}

/** What a sandbox delivery needs: the reference and kind; id and time default to fresh ones. */
export type SandboxDelivery<R extends SettlementReportOf> = Omit<R, 'id' | 'reportedAt'> & {
  readonly id?: string;
  readonly reportedAt?: Date;
};

/**
 * The sandbox provider feed: `deliver` plays the provider sending one report (tests; an owner's sandbox payouts, such
 * as the charge ledger's SandboxPayouts, which pays test-mode charges out on its own). It resolves once the owner recorded the report and rejects with the owner's refusal (an unknown
 * reference, nothing fiat-settled behind it), as a provider's delivery would fail and be retried.
 */
export class SandboxSettlementFeedOf<R extends SettlementReportOf> implements SettlementFeedOf<R> {
  private handler: ((report: R) => Promise<void>) | undefined;

  constructor(private readonly clock: Clock) {}

  async start(handler: (report: R) => Promise<void>): Promise<void> {
    this.handler = handler;
  }

  async stop(): Promise<void> {
    this.handler = undefined;
  }

  async deliver(report: SandboxDelivery<R>): Promise<R> {
    if (!this.handler) throw new Error('the settlement feed is not started');
    const delivered = {
      ...report,
      id: report.id ?? `sbx_${randomUUID()}`,
      reportedAt: report.reportedAt ?? this.clock.now(),
    } as unknown as R;
    await this.handler(delivered);
    return delivered;
  }
}
