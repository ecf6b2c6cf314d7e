import { Inject, Injectable, type OnApplicationBootstrap } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { EVENT_STORE } from '@stablepay/aggregate';
import type { EventStore } from '@stablepay/event-store';
import { paymentStreamId } from '@stablepay/payments-domain';
import { JsonLogger, runStartupRepair } from '@stablepay/util';
import { paymentObjectsAsOf } from './payment-webhook';

/**
 * Checkouts whose payment a reorg failed but whose row does not say `failed`: the projection before 8729b6b wrote
 * such a checkout `paid` (its status did not know the reorg failure), and a failed payment's stream rarely gets
 * another event, so the row stayed `paid` and GET /checkouts?status=failed missed it. The payment row's
 * `failure_reason` finds them (the payment may read `failed` or `recoverable`).
 */
const STALE_CHECKOUTS = `
  SELECT c.payment_id FROM checkouts c JOIN payments p ON p.id = c.payment_id
   WHERE p.object->>'failure_reason' = 'deposit_lost_to_reorg' AND c.status <> 'failed'`;

/**
 * At start, writes each such checkout row again from its payment stream, as the projection writes it now
 * (paymentObjectsAsOf). Re-runnable and safe beside other replicas and the projection: a row is written only at the
 * revision it was read at (the projection of a later event writes the same status itself), so a second run finds
 * nothing to do. A reinstated payment has no failure_reason and is not touched.
 */
@Injectable()
export class CheckoutStatusRepair implements OnApplicationBootstrap {
  private readonly logger = new JsonLogger('checkout-status-repair');

  constructor(
    @Inject(DataSource) private readonly dataSource: DataSource,
    @Inject(EVENT_STORE) private readonly store: EventStore,
  ) {}

  /** A failure (the event store unreachable) is logged and the process starts anyway: it runs again next start. */
  async onApplicationBootstrap(): Promise<void> {
    await runStartupRepair(this.logger, () => this.repairAll(), {
      repaired: 'checkouts of reorg-failed payments rewritten as failed',
      failed: 'checkout status repair failed; it runs again at the next start',
    });
  }

  /** Rewrites every stale checkout row; answers the payments whose checkout was rewritten. */
  async repairAll(): Promise<string[]> {
    const stale: Array<{ payment_id: string }> = await this.dataSource.query(STALE_CHECKOUTS);
    const repaired: string[] = [];
    for (const { payment_id } of stale) if (await this.repair(payment_id)) repaired.push(payment_id);
    return repaired;
  }

  private async repair(paymentId: string): Promise<boolean> {
    const events = await this.store.readStream(paymentStreamId(paymentId));
    const revision = events.at(-1)?.revision;
    if (revision === undefined) return false;
    const { checkout: c } = paymentObjectsAsOf(events);
    const updated: unknown = await this.dataSource.query(
      `UPDATE checkouts SET status = $2, updated_at = $3, object = $4::jsonb
        WHERE payment_id = $1 AND revision = $5 AND status <> $2`,
      [paymentId, c.status, c.updated_at, JSON.stringify(c), revision],
    );
    // TypeORM returns [rows, rowCount] for UPDATE on Postgres.
    return Array.isArray(updated) && typeof updated[1] === 'number' && updated[1] > 0;
  }
}
