import { Inject, Injectable, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { DataSource, type EntityManager } from 'typeorm';
import { Projections } from '@stablepay/aggregate';
import {
  type BusMessage,
  givenHistory,
  type ProjectionRunner,
  type StreamHistory,
  topicForCategory,
} from '@stablepay/event-bus';
import {
  foldSubscription,
  shownStatus,
  SUBSCRIPTION_CATEGORY,
  SUBSCRIPTION_STORED_EVENT_TYPES,
  type SubscriptionEvent,
  subscriptionObject,
  windowFacts,
} from '@stablepay/subscriptions-domain';
import { SubscriptionChanges } from './changes';
import { SUBSCRIPTION_ROW_COLUMNS, type SubscriptionRow } from './subscription.reader';

export const SUBSCRIPTION_TOPIC = topicForCategory(SUBSCRIPTION_CATEGORY);
export const SUBSCRIPTION_PROJECTION = 'subscriptions.subscription-projection';

const KNOWN = new Set<string>(SUBSCRIPTION_STORED_EVENT_TYPES);

/**
 * subscription-<id> events -> `subscriptions` rows: the object of the state the stream folds to up to the event, and
 * the window facts beside it (the reader brings spent_this_period, remaining_budget and next_charge_at to chain time).
 * Idempotent by stream revision.
 */
@Injectable()
export class SubscriptionProjection implements OnApplicationBootstrap, OnApplicationShutdown {
  private runner?: ProjectionRunner;

  constructor(
    @Inject(DataSource) private readonly dataSource: DataSource,
    @Inject(Projections) private readonly projections: Projections,
    @Inject(SubscriptionChanges) private readonly changes: SubscriptionChanges,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    this.runner = await this.projections.start({
      name: SUBSCRIPTION_PROJECTION,
      topics: [SUBSCRIPTION_TOPIC],
      // The history is read by the runner before the batch transaction (inside it, on PGlite, it would hang).
      needsHistory: true,
      apply: (em, message, history) => this.applyIn(em, message, history),
      onCommitted: (changed) => {
        for (const message of changed) this.emitChange(message);
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

  async caughtUp(): Promise<void> {
    await this.runner?.caughtUp();
  }

  private emitChange(message: BusMessage): void {
    this.changes.committed(message.id, message.key.slice(SUBSCRIPTION_CATEGORY.length + 1), message.revision);
  }

  private async applyIn(em: EntityManager, message: BusMessage, given?: StreamHistory): Promise<boolean> {
    if (!KNOWN.has(message.type)) return false;
    const merchantId = message.metadata.merchantId;
    const mode = message.metadata.mode;
    if (typeof merchantId !== 'string' || (mode !== 'test' && mode !== 'live'))
      throw new Error(`event ${message.id} of ${message.key} has no merchantId/mode metadata`);
    const history = givenHistory(message, given);
    const state = foldSubscription(history as unknown as readonly SubscriptionEvent[]);
    const created = state.created;
    if (!created) throw new Error(`stream ${message.key} does not start with SubscriptionCreated.v1`);
    const facts = windowFacts(state);
    // Stored at the start's chain time; every read brings the window fields to its own chain time.
    const object = subscriptionObject(state, facts.startedAt);
    const rows: SubscriptionRow[] = await em.query(
      `INSERT INTO subscriptions (id, merchant_id, mode, checkout_id, chain, subscriber, status, external_customer_id,
         started_at, period_duration, window_index, window_spent, budget, object, revision, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14::jsonb, $15, $16, $17)
       ON CONFLICT (id) DO UPDATE SET subscriber = EXCLUDED.subscriber, status = EXCLUDED.status,
         window_index = EXCLUDED.window_index, window_spent = EXCLUDED.window_spent, budget = EXCLUDED.budget,
         object = EXCLUDED.object, revision = EXCLUDED.revision, updated_at = EXCLUDED.updated_at
       WHERE subscriptions.revision < EXCLUDED.revision
       RETURNING ${SUBSCRIPTION_ROW_COLUMNS}`,
      [
        created.subscriptionId.toLowerCase(),
        merchantId,
        mode,
        created.checkoutId,
        created.chain,
        state.subscriber.toLowerCase(),
        shownStatus(state),
        created.externalCustomerId,
        facts.startedAt.toString(),
        facts.periodDuration.toString(),
        facts.windowIndex.toString(),
        facts.windowSpent.toString(),
        facts.budget.toString(),
        JSON.stringify(object),
        message.revision,
        created.createdAt,
        message.recordedAt,
      ],
    );
    const row = rows[0];
    // Announced with the row once the batch commits: a waiter for this revision needs no read.
    if (row) this.changes.stage(message.id, row);
    return row !== undefined;
  }
}
