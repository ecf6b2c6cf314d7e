import { Inject, Injectable, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { Projections } from '@stablepay/aggregate';
import {
  type BusMessage,
  givenHistory,
  type ProjectionRunner,
  type StreamHistory,
} from '@stablepay/event-bus';
import {
  BENEFICIARY_CATEGORY,
  type BeneficiaryObject,
  CUSTOMER_CATEGORY,
  type CustomerObject,
  type PayoutObject,
} from '@stablepay/payouts-domain';
import { BENEFICIARY_TOPIC, CUSTOMER_TOPIC, objectAsOf, PAYOUT_TOPIC } from './objects';
import { PayoutsChanges, type PayoutsRow } from './payouts.reader';

export const PAYOUTS_PROJECTION = 'payouts.read-models';

const categoryOf = (streamId: string): string => streamId.slice(0, streamId.indexOf('-'));

/**
 * customer-, beneficiary- and payout- streams -> payout_customers, payout_beneficiaries, payouts. Each row holds the
 * API object folded from its stream up to the event (events are facts; the object is a projection) and the
 * revision it reflects: one upsert per event that changes nothing at or below that revision, so redelivery is
 * harmless and `seq` (taken by the first insert) never moves.
 */
@Injectable()
export class PayoutsProjection implements OnApplicationBootstrap, OnApplicationShutdown {
  private runner?: ProjectionRunner;

  constructor(
    @Inject(Projections) private readonly projections: Projections,
    @Inject(PayoutsChanges) private readonly changes: PayoutsChanges,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    this.runner = await this.projections.start({
      name: PAYOUTS_PROJECTION,
      topics: [CUSTOMER_TOPIC, BENEFICIARY_TOPIC, PAYOUT_TOPIC],
      needsHistory: true,
      apply: (em, message, history) => this.applyIn(em, message, history),
      onCommitted: (changed) => {
        for (const m of changed)
          this.changes.committed(m.id, m.key.slice(m.key.indexOf('-') + 1), m.revision);
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

  /** Resolves once every event stored before the call is projected (tests and tools). */
  async caughtUp(): Promise<void> {
    await this.runner?.caughtUp();
  }

  private async applyIn(em: EntityManager, message: BusMessage, given?: StreamHistory): Promise<boolean> {
    const merchantId = message.metadata.merchantId;
    const mode = message.metadata.mode;
    if (typeof merchantId !== 'string' || (mode !== 'test' && mode !== 'live'))
      throw new Error(`event ${message.id} of ${message.key} has no merchantId/mode metadata`);
    const category = categoryOf(message.key);
    const object = objectAsOf(category, givenHistory(message, given));
    let rows: unknown[];
    if (category === CUSTOMER_CATEGORY) {
      const o = object as CustomerObject;
      const session = o.kyc_url === null ? null : o.kyc_url.slice(o.kyc_url.lastIndexOf('/') + 1);
      rows = await em.query(
        `INSERT INTO payout_customers (id, merchant_id, mode, status, email, kyc_session_id, deposit_address, object, revision)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9)
         ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status, kyc_session_id = EXCLUDED.kyc_session_id,
           object = EXCLUDED.object, revision = EXCLUDED.revision
         WHERE payout_customers.revision < EXCLUDED.revision RETURNING *`,
        [
          o.id,
          merchantId,
          mode,
          o.status,
          o.email,
          session,
          o.deposit_addresses[0]?.address ?? '',
          JSON.stringify(o),
          message.revision,
        ],
      );
      if (session !== null)
        await em.query(
          'INSERT INTO payout_kyc_sessions (session_id, customer_id) VALUES ($1, $2) ON CONFLICT DO NOTHING',
          [session, o.id],
        );
    } else if (category === BENEFICIARY_CATEGORY) {
      const o = object as BeneficiaryObject;
      rows = await em.query(
        `INSERT INTO payout_beneficiaries (id, merchant_id, mode, currency, object, revision)
         VALUES ($1, $2, $3, $4, $5::jsonb, $6)
         ON CONFLICT (id) DO UPDATE SET object = EXCLUDED.object, revision = EXCLUDED.revision
         WHERE payout_beneficiaries.revision < EXCLUDED.revision RETURNING *`,
        [o.id, merchantId, mode, o.currency, JSON.stringify(o), message.revision],
      );
    } else {
      const o = object as PayoutObject;
      rows = await em.query(
        `INSERT INTO payouts (id, merchant_id, mode, status, customer_id, beneficiary_id, chain, token, amount, object, revision)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::numeric, $10::jsonb, $11)
         ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status, object = EXCLUDED.object, revision = EXCLUDED.revision
         WHERE payouts.revision < EXCLUDED.revision RETURNING *`,
        [
          o.id,
          merchantId,
          mode,
          o.status,
          o.customer,
          o.beneficiary,
          o.chain,
          o.token,
          o.amount,
          JSON.stringify(o),
          message.revision,
        ],
      );
    }
    const row = rows[0] as PayoutsRow | undefined;
    if (!row) return false;
    // numeric comes back as a string; the row is announced as read (GET answers from `object` alone).
    this.changes.stage(message.id, row);
    return true;
  }
}
