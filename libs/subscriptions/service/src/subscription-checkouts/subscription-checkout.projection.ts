import { Inject, Injectable, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { DataSource, type EntityManager } from 'typeorm';
import { EVENT_STORE, Projections } from '@stablepay/aggregate';
import {
  type BatchStatement,
  type BusMessage,
  givenHistory,
  type ProjectionRunner,
  topicForCategory,
  type StreamHistory,
} from '@stablepay/event-bus';
import { type EventStore, streamHistoryThrough } from '@stablepay/event-store';
import { SUBSCRIPTION_CHECKOUT_CATEGORY, WEBHOOK_TYPE_BY_EVENT } from '@stablepay/subscriptions-domain';
import { SubscriptionCheckoutChanges } from './changes';
import type { SubscriptionCheckoutRow } from './subscription-checkout.reader';
import { subscriptionCheckoutObjectAsOf } from './webhook-object';

export const SUBSCRIPTION_CHECKOUT_TOPIC = topicForCategory(SUBSCRIPTION_CHECKOUT_CATEGORY);
export const SUBSCRIPTION_CHECKOUT_PROJECTION = 'subscriptions.subscription-checkout-projection';
/** The event types it knows (the newest versions: the store reads older ones through the upcasters). */
const KNOWN = new Set<string>(Object.keys(WEBHOOK_TYPE_BY_EVENT));

/**
 * subscriptionCheckout-<id> events -> subscription_checkouts rows. Events are facts, so the row's object is the
 * projection of the state the stream folds to up to the event (a creation needs nothing else; a later event
 * reads its stream's prefix). Idempotent by stream revision: a row stores the revision it reflects and an event
 * at or below it changes nothing, so redelivery is harmless.
 */
@Injectable()
export class SubscriptionCheckoutProjection implements OnApplicationBootstrap, OnApplicationShutdown {
  private runner?: ProjectionRunner;

  constructor(
    @Inject(DataSource) private readonly dataSource: DataSource,
    @Inject(Projections) private readonly projections: Projections,
    @Inject(SubscriptionCheckoutChanges) private readonly changes: SubscriptionCheckoutChanges,
    @Inject(EVENT_STORE) private readonly store: EventStore,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    // Batches in one transaction each; an event that cannot be applied parks its checkout's stream only.
    this.runner = await this.projections.start({
      name: SUBSCRIPTION_CHECKOUT_PROJECTION,
      topics: [SUBSCRIPTION_CHECKOUT_TOPIC],
      needsHistory: true,
      apply: (em, message, history) => this.applyIn(em, message, history),
      applyBatch: (em, messages, histories) => this.applyBatchIn(em, messages, histories),
      batchStatement: (messages, histories) => this.creationsStatement(messages, histories),
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

  /** Resolves once every event stored before the call is projected (tests and tools). */
  async caughtUp(): Promise<void> {
    await this.runner?.caughtUp();
  }

  /** Applies one message in its own transaction (tests and tools; the runner batches). */
  async apply(message: BusMessage): Promise<void> {
    // Read before the transaction: on PGlite a second connection inside it would wait for it forever.
    const history = await streamHistoryThrough(this.store, { ...message, streamId: message.key });
    const changed = await this.dataSource.transaction((em) => this.applyIn(em, message, history));
    if (changed) this.emitChange(message);
  }

  private emitChange(message: BusMessage): void {
    // The stream id is `subscriptionCheckout-<schk_id>`.
    this.changes.committed(
      message.id,
      message.key.slice(SUBSCRIPTION_CHECKOUT_CATEGORY.length + 1),
      message.revision,
    );
  }

  /** The write and its revision check, inside the caller's transaction; true when a row changed. */
  private async applyIn(em: EntityManager, message: BusMessage, given?: StreamHistory): Promise<boolean> {
    if (!KNOWN.has(message.type)) return false; // a type this release does not know: skipped
    const o = subscriptionCheckoutObjectAsOf(givenHistory(message, given));
    {
      if (message.revision === 0) {
        const merchantId = message.metadata.merchantId;
        const mode = message.metadata.mode;
        if (typeof merchantId !== 'string' || (mode !== 'test' && mode !== 'live')) {
          throw new Error(`event ${message.id} of ${message.key} has no merchantId/mode metadata`);
        }
        const inserted: unknown[] = await em.query(
          `INSERT INTO subscription_checkouts (id, merchant_id, mode, status, external_customer_id, created_at, expires_at, updated_at, object, revision)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb, $10) ON CONFLICT (id) DO NOTHING RETURNING *`,
          [
            o.id,
            merchantId,
            mode,
            o.status,
            o.external_customer_id,
            o.created_at,
            o.expires_at,
            o.updated_at,
            JSON.stringify(o),
            message.revision,
          ],
        );
        return this.wrote(message, inserted[0]);
      }
      const updated: unknown = await em.query(
        `UPDATE subscription_checkouts SET status = $2, updated_at = $3, object = $4::jsonb, revision = $5
         WHERE id = $1 AND revision < $5 RETURNING *`,
        [o.id, o.status, o.updated_at, JSON.stringify(o), message.revision],
      );
      // TypeORM returns [rows, rowCount] for UPDATE on Postgres.
      return Array.isArray(updated) && this.wrote(message, (updated[0] as unknown[] | undefined)?.[0]);
    }
  }

  /**
   * A batch as `applyIn` would apply it message by message, with the creations in ONE multi-row insert (in batch
   * order, so `seq` follows the log) ahead of the updates: a creation is its stream's revision 0, so it precedes
   * every later event of its stream in the batch, and creations of different streams commute with everything else.
   */
  private async applyBatchIn(
    em: EntityManager,
    messages: readonly BusMessage[],
    histories: ReadonlyMap<string, StreamHistory>,
  ): Promise<BusMessage[]> {
    const creations = messages.filter((m) => m.revision === 0 && KNOWN.has(m.type));
    const changed = new Set<string>();
    if (creations.length > 0) {
      const statement = this.insertCreations(creations, histories);
      const rows: unknown[] = await em.query(statement.sql, [...statement.params]);
      for (const message of statement.changed(rows)) changed.add(message.id);
    }
    for (const message of messages) {
      if (message.revision === 0) continue;
      if (await this.applyIn(em, message, histories.get(message.id))) changed.add(message.id);
    }
    return messages.filter((m) => changed.has(m.id));
  }

  /** A batch of creations only (the common case: checkouts are created far more often than changed) in one statement. */
  private creationsStatement(
    messages: readonly BusMessage[],
    histories: ReadonlyMap<string, StreamHistory>,
  ): BatchStatement | undefined {
    if (!messages.every((m) => m.revision === 0 && KNOWN.has(m.type))) return undefined;
    return this.insertCreations(messages, histories);
  }

  /** The creations' multi-row insert; `changed` stages each row it returned (announced once it commits). */
  private insertCreations(
    creations: readonly BusMessage[],
    histories: ReadonlyMap<string, StreamHistory>,
  ): BatchStatement {
    const objects = creations.map((message) => {
      const merchantId = message.metadata.merchantId;
      const mode = message.metadata.mode;
      if (typeof merchantId !== 'string' || (mode !== 'test' && mode !== 'live')) {
        throw new Error(`event ${message.id} of ${message.key} has no merchantId/mode metadata`);
      }
      const o = subscriptionCheckoutObjectAsOf(histories.get(message.id) ?? [message]);
      return { message, merchantId, mode, o };
    });
    return {
      sql: `INSERT INTO subscription_checkouts (id, merchant_id, mode, status, external_customer_id, created_at, expires_at, updated_at, object, revision)
         SELECT t.id, t.merchant_id, t.mode, t.status, t.external_customer_id, t.created_at, t.expires_at, t.updated_at, t.object, 0
           FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::timestamptz[],
                       $8::timestamptz[], $9::jsonb[]) WITH ORDINALITY
                AS t(id, merchant_id, mode, status, external_customer_id, created_at, expires_at, updated_at, object, ord)
          ORDER BY t.ord
         ON CONFLICT (id) DO NOTHING RETURNING *`,
      params: [
        objects.map((c) => c.o.id),
        objects.map((c) => c.merchantId),
        objects.map((c) => c.mode),
        objects.map((c) => c.o.status),
        objects.map((c) => c.o.external_customer_id),
        objects.map((c) => c.o.created_at),
        objects.map((c) => c.o.expires_at),
        objects.map((c) => c.o.updated_at),
        objects.map((c) => JSON.stringify(c.o)),
      ],
      changed: (rows) => {
        const byId = new Map((rows as SubscriptionCheckoutRow[]).map((row) => [row.id, row]));
        return objects.filter(({ message, o }) => this.wrote(message, byId.get(o.id))).map((c) => c.message);
      },
    };
  }

  /** Stages the row a statement returned, announced once the batch commits; true when there was one. */
  private wrote(message: BusMessage, row: unknown): boolean {
    if (row === undefined || row === null) return false;
    this.changes.stage(message.id, row as SubscriptionCheckoutRow);
    return true;
  }
}
