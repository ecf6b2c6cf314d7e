import { Inject, Injectable, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { Counter, register } from 'prom-client';
import { DataSource, type EntityManager } from 'typeorm';
import { Projections } from '@stablepay/aggregate';
import {
  type BusMessage,
  givenHistory,
  type ProjectionRunner,
  type StreamHistory,
} from '@stablepay/event-bus';
import { PAYMENT_CATEGORY } from '@stablepay/payments-domain';
import { PaymentChanges } from './changes';
import { KNOWN_PAYMENT_EVENTS, PAYMENT_TOPIC, paymentObjectsAsOf } from './payment-webhook';
import { STABLECOIN_PEGS } from './stablecoins';

export const PAYMENT_PROJECTION = 'payments.payment-projection';

const EXPOSED = 'PaymentSettlementExposed.v1';
type ExposureLabels = 'reason' | 'currency';

/**
 * stablepay_payment_settlement_exposures_total: fiat payouts that came to stand for a deposit a reorg took, counted
 * when the projection's transaction that applied the fact commits (a redelivered fact changes no row, so a retry never
 * counts it twice; a rebuilt read model counts its history again). Never a merchant id as a label: GET
 * /admin/settlement-exposures names them.
 */
function settlementExposuresCounter(): Counter<ExposureLabels> {
  const name = 'stablepay_payment_settlement_exposures_total';
  // Get-or-create: tests and the embedded run host several applications on prom-client's one default registry.
  const existing = register.getSingleMetric(name) as Counter<ExposureLabels> | undefined;
  if (existing) return existing;
  const counter = new Counter<ExposureLabels>({
    name,
    help: 'Fiat payouts of payments recorded as exposed (PaymentSettlementExposed.v1), by reason and order currency',
    labelNames: ['reason', 'currency'],
  });
  // Every known series from 0: increase() cannot see the first exposure of a series that appears at 1.
  for (const currency of new Set(Object.values(STABLECOIN_PEGS)))
    counter.inc({ reason: 'deposit_lost_to_reorg', currency }, 0);
  return counter;
}

/**
 * payment-<id> events -> one `checkouts` row and one `payments` row, in the batch's transaction. Events are
 * facts, so each row's object is the projection of the state the stream folds to up to the event (the chain facts
 * other use cases append show up here without this code changing). Idempotent by stream revision: a row stores
 * the revision it reflects and an event at or below it changes nothing, so redelivery is harmless.
 */
@Injectable()
export class PaymentProjection implements OnApplicationBootstrap, OnApplicationShutdown {
  private runner?: ProjectionRunner;
  private readonly exposures = settlementExposuresCounter();
  /** The labels of exposure facts applied in the open transaction, counted once it commits (by message id). */
  private readonly exposuresApplied = new Map<string, Record<ExposureLabels, string>>();

  constructor(
    @Inject(DataSource) private readonly dataSource: DataSource,
    @Inject(Projections) private readonly projections: Projections,
    @Inject(PaymentChanges) private readonly changes: PaymentChanges,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    this.runner = await this.projections.start({
      name: PAYMENT_PROJECTION,
      topics: [PAYMENT_TOPIC],
      needsHistory: true,
      apply: (em, message, history) => this.applyIn(em, message, history),
      onCommitted: (changed) => {
        for (const message of changed) {
          this.emitChange(message);
          this.countExposure(message);
        }
      },
    });
  }

  /**
   * The last hook, so the timers (onModuleDestroy) and workers (beforeApplicationShutdown) that wait for this read
   * model's rows finish their pass first: stopped with them, a wait in flight timed out as read_model_lagging.
   */
  async onApplicationShutdown(): Promise<void> {
    await this.projections.stop(this.runner);
  }

  /** Resolves once every event stored before the call is projected (tests and tools). */
  async caughtUp(): Promise<void> {
    await this.runner?.caughtUp();
  }

  private emitChange(message: BusMessage): void {
    // The stream id is `payment-<pay_id>`.
    this.changes.emit(message.key.slice(PAYMENT_CATEGORY.length + 1), message.revision);
  }

  private countExposure(message: BusMessage): void {
    const labels = this.exposuresApplied.get(message.id);
    if (!labels) return;
    this.exposuresApplied.delete(message.id);
    this.exposures.inc(labels);
  }

  private async applyIn(em: EntityManager, message: BusMessage, given?: StreamHistory): Promise<boolean> {
    if (!KNOWN_PAYMENT_EVENTS.has(message.type)) return false; // a type this release does not know: skipped
    const {
      payment: p,
      checkout: c,
      settlementCheckAt,
      settlementStartedAt,
    } = paymentObjectsAsOf(givenHistory(message, given));
    const checkAt = settlementCheckAt?.toISOString() ?? null;
    if (message.revision === 0) {
      const merchantId = message.metadata.merchantId;
      const mode = message.metadata.mode;
      if (typeof merchantId !== 'string' || (mode !== 'test' && mode !== 'live')) {
        throw new Error(`event ${message.id} of ${message.key} has no merchantId/mode metadata`);
      }
      const inserted: unknown[] = await em.query(
        `INSERT INTO payments (id, checkout_id, merchant_id, mode, status, method, deposit_address, detected_chain, created_at, expires_at, updated_at, object, revision)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12::jsonb, $13) ON CONFLICT (id) DO NOTHING RETURNING id`,
        [
          p.id,
          p.checkout_id,
          merchantId,
          mode,
          p.status,
          p.method,
          p.deposit_address.toLowerCase(),
          p.detected_chain,
          p.created_at,
          p.expires_at,
          p.updated_at,
          JSON.stringify(p),
          message.revision,
        ],
      );
      if (inserted.length === 0) return false;
      await em.query(
        `INSERT INTO checkouts (id, payment_id, merchant_id, mode, status, created_at, expires_at, updated_at, object, revision)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb, $10) ON CONFLICT (id) DO NOTHING`,
        [
          c.id,
          c.payment_id,
          merchantId,
          mode,
          c.status,
          c.created_at,
          c.expires_at,
          c.updated_at,
          JSON.stringify(c),
          message.revision,
        ],
      );
      return true;
    }
    const updated: unknown = await em.query(
      `UPDATE payments SET status = $2, detected_chain = $3, updated_at = $4, object = $5::jsonb, revision = $6,
         settlement_check_at = $7, settlement_started_at = $8
       WHERE id = $1 AND revision < $6`,
      [
        p.id,
        p.status,
        p.detected_chain,
        p.updated_at,
        JSON.stringify(p),
        message.revision,
        checkAt,
        settlementStartedAt,
      ],
    );
    // TypeORM returns [rows, rowCount] for UPDATE on Postgres.
    const changed = Array.isArray(updated) && typeof updated[1] === 'number' && updated[1] > 0;
    if (changed && message.type === EXPOSED && p.settlement_exposure)
      this.exposuresApplied.set(message.id, { reason: p.settlement_exposure.reason, currency: p.currency });
    if (changed) {
      await em.query(
        `UPDATE checkouts SET status = $2, updated_at = $3, object = $4::jsonb, revision = $5 WHERE id = $1`,
        [c.id, c.status, c.updated_at, JSON.stringify(c), message.revision],
      );
    }
    return changed;
  }
}
