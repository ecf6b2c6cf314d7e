import { Inject, Injectable, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { DataSource, type EntityManager } from 'typeorm';
import { Projections } from '@stablepay/aggregate';
import {
  type BatchStatement,
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
      batchStatement: (messages, histories) => this.batchStatement(messages, histories),
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
    const rows: SubscriptionRow[] = await em.query(
      `INSERT INTO subscriptions (${COLUMNS}) VALUES (${COLUMN_TYPES.map((type, i) => `$${i + 1}::${type}`).join(', ')})
       ${UPSERT} RETURNING ${SUBSCRIPTION_ROW_COLUMNS}`,
      rowValues(message, givenHistory(message, given)),
    );
    const row = rows[0];
    // Announced with the row once the batch commits: a waiter for this revision needs no read.
    if (row) this.changes.stage(message.id, row);
    return row !== undefined;
  }

  /**
   * A batch as ONE statement (the runner's fast path: one round trip instead of BEGIN, the insert and COMMIT, on the
   * charge's answer path): one row per stream, the state as of the stream's newest event in the batch, which is what
   * `applyIn` leaves after applying the stream's events in turn (each row replaces the one before). Waiters wait for a
   * revision at least theirs, so announcing the newest row wakes them all. Rows in the order their streams first appear
   * in the batch (`seq` follows the log).
   * A message `applyIn` would refuse (no owner metadata, no creation) leaves the batch to the runner's other paths,
   * which park its stream.
   */
  private batchStatement(
    messages: readonly BusMessage[],
    histories: ReadonlyMap<string, StreamHistory>,
  ): BatchStatement | undefined {
    const newest = new Map<string, BusMessage>();
    for (const message of messages) {
      if (!KNOWN.has(message.type)) continue;
      const before = newest.get(message.key);
      if (!before || before.revision < message.revision) newest.set(message.key, message);
    }
    if (newest.size === 0) return undefined;
    // In the order the streams first appear in the batch: a row created here gets its `seq` where its creation is.
    const chosen = [...newest.values()];
    let values: unknown[][];
    try {
      values = chosen.map((m) => rowValues(m, givenHistory(m, histories.get(m.id))));
    } catch {
      return undefined;
    }
    const columns = COLUMN_TYPES.map((type, i) => `$${i + 1}::${type}[]`).join(', ');
    return {
      sql: `INSERT INTO subscriptions (${COLUMNS})
         SELECT ${COLUMN_NAMES.map((c) => `t.${c}`).join(', ')}
           FROM unnest(${columns}) WITH ORDINALITY AS t(${COLUMNS}, ord)
          ORDER BY t.ord
         ${UPSERT} RETURNING ${SUBSCRIPTION_ROW_COLUMNS}`,
      params: COLUMN_TYPES.map((_, i) => values.map((v) => v[i])),
      changed: (rows) => {
        const byId = new Map((rows as SubscriptionRow[]).map((row) => [row.id, row]));
        return chosen.filter((message, i) => {
          const row = byId.get(values[i]?.[0] as string);
          if (row) this.changes.stage(message.id, row);
          return row !== undefined;
        });
      },
    };
  }
}

/** The row's columns and their types (the batch statement's arrays). */
const COLUMN_TYPES = [
  'text', // id
  'text', // merchant_id
  'text', // mode
  'text', // checkout_id
  'text', // chain
  'text', // subscriber
  'text', // status
  'text', // external_customer_id
  'bigint', // started_at
  'bigint', // period_duration
  'numeric', // window_index
  'numeric', // window_spent
  'numeric', // budget
  'jsonb', // object
  'integer', // revision
  'timestamptz', // created_at
  'timestamptz', // updated_at
] as const;
const COLUMN_NAMES = [
  'id',
  'merchant_id',
  'mode',
  'checkout_id',
  'chain',
  'subscriber',
  'status',
  'external_customer_id',
  'started_at',
  'period_duration',
  'window_index',
  'window_spent',
  'budget',
  'object',
  'revision',
  'created_at',
  'updated_at',
] as const;
const COLUMNS = COLUMN_NAMES.join(', ');
/** Only a newer revision replaces a row: a redelivered event changes nothing. */
const UPSERT = `ON CONFLICT (id) DO UPDATE SET subscriber = EXCLUDED.subscriber, status = EXCLUDED.status,
         window_index = EXCLUDED.window_index, window_spent = EXCLUDED.window_spent, budget = EXCLUDED.budget,
         object = EXCLUDED.object, revision = EXCLUDED.revision, updated_at = EXCLUDED.updated_at
       WHERE subscriptions.revision < EXCLUDED.revision`;

/** The row of the state the stream folds to through `message`, as the values of COLUMN_NAMES. */
function rowValues(message: BusMessage, history: StreamHistory): unknown[] {
  const merchantId = message.metadata.merchantId;
  const mode = message.metadata.mode;
  if (typeof merchantId !== 'string' || (mode !== 'test' && mode !== 'live'))
    throw new Error(`event ${message.id} of ${message.key} has no merchantId/mode metadata`);
  const state = foldSubscription(history as unknown as readonly SubscriptionEvent[]);
  const created = state.created;
  if (!created) throw new Error(`stream ${message.key} does not start with SubscriptionCreated.v1`);
  const facts = windowFacts(state);
  // Stored at the start's chain time; every read brings the window fields to its own chain time.
  const object = subscriptionObject(state, facts.startedAt);
  return [
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
  ];
}
