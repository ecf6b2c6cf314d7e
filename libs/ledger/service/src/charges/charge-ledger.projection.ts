import { Inject, Injectable, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { Counter, register } from 'prom-client';
import { DataSource, type EntityManager } from 'typeorm';
import { EVENT_STORE, Projections } from '@stablepay/aggregate';
import {
  type BusMessage,
  givenHistory,
  type ProjectionRunner,
  topicForCategory,
  type StreamHistory,
} from '@stablepay/event-bus';
import { type EventStore, streamHistoryThrough } from '@stablepay/event-store';
import {
  CHARGE_CATEGORY,
  CHARGE_LOST_TO_REORG,
  chargeObject,
  foldCharge,
  KNOWN_CHARGE_EVENTS,
  settlementCheckAt,
} from '@stablepay/ledger-domain';
import { ChargeLedgerChanges } from './changes';
import type { ChargeLedgerRow } from './charge-ledger.reader';

export const CHARGE_TOPIC = topicForCategory(CHARGE_CATEGORY);
export const CHARGE_LEDGER_PROJECTION = 'charge-ledger.charge-projection';

/**
 * stablepay_charge_settlement_exposures_total: fiat payouts of subscription charges that came to stand for a charge a
 * reorg took (ChargeSettlementExposed.v1), counted when the projection's transaction that applied the fact commits (a
 * redelivered fact changes no row, so a retry never counts it twice; a rebuilt read model counts its history again).
 * By reason only: plan currencies are open-ended, and a series that appears at 1 is invisible to increase(), so the
 * one known series starts at 0; GET /admin/charge-settlement-exposures names merchant, amount and currency.
 */
function chargeSettlementExposuresCounter(): Counter<'reason'> {
  const name = 'stablepay_charge_settlement_exposures_total';
  // Get-or-create: tests and the embedded run host several applications on prom-client's one default registry.
  const existing = register.getSingleMetric(name) as Counter<'reason'> | undefined;
  if (existing) return existing;
  const counter = new Counter<'reason'>({
    name,
    help: 'Fiat payouts of subscription charges recorded as exposed (ChargeSettlementExposed.v1), by reason',
    labelNames: ['reason'],
  });
  counter.inc({ reason: CHARGE_LOST_TO_REORG }, 0);
  return counter;
}

/**
 * charge-<subc_ id> events -> subscription_charges rows (the ledger). The row's object is the chargeObject of the
 * stream folded up to the event. The first event inserts the row and takes the next ledger sequence value; later
 * events (fiat backfill, settlement) update it in place and never touch `seq` (SPEC Pagination rule 6). Idempotent
 * by stream revision.
 */
@Injectable()
export class ChargeLedgerProjection implements OnApplicationBootstrap, OnApplicationShutdown {
  private runner?: ProjectionRunner;
  private readonly exposures = chargeSettlementExposuresCounter();
  /** Exposure facts applied in the open transaction (message id -> reason), counted once it commits. */
  private readonly exposuresApplied = new Map<string, string>();

  constructor(
    @Inject(DataSource) private readonly dataSource: DataSource,
    @Inject(Projections) private readonly projections: Projections,
    @Inject(ChargeLedgerChanges) private readonly changes: ChargeLedgerChanges,
    @Inject(EVENT_STORE) private readonly store: EventStore,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    this.runner = await this.projections.start({
      name: CHARGE_LEDGER_PROJECTION,
      topics: [CHARGE_TOPIC],
      needsHistory: true,
      apply: (em, message, history) => this.applyIn(em, message, history),
      onCommitted: (changed) => {
        for (const message of changed) {
          this.emitChange(message);
          this.countExposure(message);
        }
      },
    });
    this.changes.projecting = true;
  }

  /**
   * The last hook, so the timers (onModuleDestroy) and workers (beforeApplicationShutdown) that wait for this read
   * model's rows finish their pass first: stopped with them, a wait in flight timed out as read_model_lagging.
   */
  async onApplicationShutdown(): Promise<void> {
    this.changes.projecting = false;
    await this.projections.stop(this.runner);
  }

  /** Resolves once every charge event stored before the call is projected (tests and tools). */
  async caughtUp(): Promise<void> {
    await this.runner?.caughtUp();
  }

  /** Applies one message in its own transaction (tests; the runner batches). */
  async apply(message: BusMessage): Promise<void> {
    // Read before the transaction: on PGlite a second connection inside it would wait for it forever.
    const history = await streamHistoryThrough(this.store, { ...message, streamId: message.key });
    const changed = await this.dataSource.transaction((em) => this.applyIn(em, message, history));
    if (changed) {
      this.emitChange(message);
      this.countExposure(message);
    }
  }

  private countExposure(message: BusMessage): void {
    const reason = this.exposuresApplied.get(message.id);
    if (reason === undefined) return;
    this.exposuresApplied.delete(message.id);
    this.exposures.inc({ reason });
  }

  private emitChange(message: BusMessage): void {
    this.changes.committed(message.id, message.key.slice(CHARGE_CATEGORY.length + 1), message.revision);
  }

  private async applyIn(em: EntityManager, message: BusMessage, given?: StreamHistory): Promise<boolean> {
    if (!KNOWN_CHARGE_EVENTS.has(message.type)) return false;
    const history = givenHistory(message, given);
    const state = foldCharge(history);
    const o = chargeObject(state);
    const merchantId = message.metadata.merchantId;
    const mode = message.metadata.mode;
    if (typeof merchantId !== 'string' || (mode !== 'test' && mode !== 'live'))
      throw new Error(`event ${message.id} of ${message.key} has no merchantId/mode metadata`);
    const written: ChargeLedgerRow[] = await em.query(
      `INSERT INTO subscription_charges (id, merchant_id, mode, subscription_id, subscriber, chain, status, tx_hash,
         charge_nonce, charged_at, created_at, object, revision, settlement_status, settlement_check_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12::jsonb, $13, $14, $15)
       ON CONFLICT (id) DO UPDATE SET object = EXCLUDED.object, revision = EXCLUDED.revision,
         settlement_status = EXCLUDED.settlement_status, settlement_check_at = EXCLUDED.settlement_check_at,
         status = EXCLUDED.status, tx_hash = EXCLUDED.tx_hash
         WHERE subscription_charges.revision < EXCLUDED.revision
       RETURNING *`,
      [
        o.id,
        merchantId,
        mode,
        o.subscription_id.toLowerCase(),
        o.subscriber.toLowerCase(),
        o.chain,
        o.status,
        o.tx_hash,
        o.charge_nonce,
        o.charged_at,
        o.created_at,
        JSON.stringify(o),
        message.revision,
        o.settlement_status,
        settlementCheckAt(state)?.toISOString() ?? null,
      ],
    );
    const row = written[0];
    // Announced with the row once the batch commits: the charge answer waiting for it needs no read.
    if (row) this.changes.stage(message.id, row);
    if (row && message.type === 'ChargeSettlementExposed.v1' && o.settlement_exposure)
      this.exposuresApplied.set(message.id, o.settlement_exposure.reason);
    return row !== undefined;
  }
}
