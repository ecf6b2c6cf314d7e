import { Pool, type PoolClient } from 'pg';
import { systemClock, type Clock } from '@stablepay/util';
import {
  streamCategory,
  type AppendResult,
  type EventStore,
  type ExpectedRevision,
  type NewEvent,
  type ReadAllOptions,
  type ReadStreamOptions,
  type RecordedEvent,
  type StoreSubscription,
  type SubscribeToAllOptions,
} from '../event-store.port';
import {
  startCatchUpSubscription,
  type CatchUpSettings,
  type CheckpointStore,
} from '../catch-up-subscription';
import { assertAppendable, assertReadOptions, checkExpectedRevision } from '../append-rules';
import { migrateEventStore } from './postgres-event-store.schema';

/**
 * Key of the transaction-scoped advisory lock every append takes before it draws a global position.
 * Arbitrary but fixed; no other Stablepay code may use it.
 */
export const EVENT_STORE_APPEND_LOCK_KEY = 7_340_501_236_001n;

/** An event id that already exists somewhere else than the exact place this append would write it. */
export class DuplicateEventIdError extends Error {
  constructor(
    readonly streamId: string,
    readonly eventIds: readonly string[],
  ) {
    super(`stream ${streamId}: event id(s) ${eventIds.join(', ')} already stored elsewhere`);
    this.name = 'DuplicateEventIdError';
  }
}

export type PostgresConnection =
  /** The store opens and owns its pool (closed by close()). */
  | { readonly url: string; readonly poolSize?: number }
  /** A pool owned by the caller (close() leaves it open). */
  | { readonly pool: Pool };

export type PostgresEventStoreOptions = PostgresConnection & {
  /** Reports an idle connection the server closed (the pool replaces it); the default ignores it. */
  readonly onPoolError?: (error: Error) => void;
  /** Stamps `recordedAt`. */
  readonly clock?: Clock;
  /** Tuning and reporting of catch-up subscriptions. */
  readonly subscriptions?: Omit<CatchUpSettings, 'onAppend'>;
};

/**
 * Opens a PostgresEventStore: creates its pool if given a URL and applies the schema migrations first, so a
 * store returned from here is ready to use.
 */
export async function createPostgresEventStore(
  options: PostgresEventStoreOptions,
): Promise<PostgresEventStore> {
  const owned = 'url' in options;
  const pool = owned
    ? new Pool({ connectionString: options.url, max: options.poolSize ?? 10 })
    : options.pool;
  // An idle pooled connection closed by the server (restart, failover, an administrator) emits 'error' on the
  // pool; without a listener that is an uncaught exception that kills the process. pg drops the broken client
  // and the next query opens a new one, so reporting is all there is to do.
  if (owned) pool.on('error', (error) => options.onPoolError?.(error));
  try {
    await migrateEventStore(pool);
  } catch (error) {
    if (owned) await pool.end();
    throw error;
  }
  return new PostgresEventStore(pool, { ...options, ownsPool: owned });
}

interface EventRow {
  global_position: string;
  event_id: string;
  stream_id: string;
  revision: number;
  type: string;
  data: unknown;
  metadata: Record<string, unknown> | null;
  recorded_at: Date;
}

interface ProbeRow {
  current_revision: number | null;
  event_id: string | null;
  stream_id: string | null;
  revision: number | null;
  global_position: string | null;
}

// The position goes out as text (pg would give an int8 as a string anyway, this makes it explicit). Queries
// must ORDER BY the qualified column `e.global_position`: a bare name would sort by this text alias.
const EVENT_COLUMNS =
  'e.global_position::text AS global_position, e.event_id, e.stream_id, e.revision, e.type, e.data, e.metadata, e.recorded_at';

/**
 * EventStore on PostgreSQL: one append-only `events` table, unique (stream_id, revision) and unique event id.
 *
 * Commit order. A bigserial alone does not give positions in commit order: transaction A draws position 10,
 * B draws 11 and commits first, a reader sees 11, stores checkpoint 11, and never reads 10 once A commits.
 * Every append therefore takes one transaction-scoped advisory lock BEFORE it draws its positions and keeps it
 * until commit. PostgreSQL makes a commit visible before it releases the transaction's locks, so the next
 * appender can only draw a higher position after the previous append is visible: positions are strictly
 * increasing in commit order, and any snapshot sees a prefix of the log (plus gaps left by rolled-back appends,
 * which no later commit can fill). A reader may then checkpoint "everything up to P" safely.
 *
 * Why the lock rather than the transaction-id filter (`xid < pg_snapshot_xmin(pg_current_snapshot())`) used
 * by Marten-style stores: that filter keeps appends concurrent but only makes the log gap-free when ordered by
 * (transaction id, position), so a single bigint position would not be strictly increasing in commit order,
 * which the port promises; it also holds back every reader behind any long transaction in the database. The
 * price of the lock: appends are serialised store-wide, each holding it for the probe, the insert and the
 * commit's flush (about 3 ms on this machine's PostgreSQL, so some 300 appends a second, each with any number
 * of events), well above this system's write rate; on PGlite (one backend) appends are serial anyway.
 *
 * Idempotency. An append whose events already sit, with the same ids, at exactly the place it would write them
 * is a retry: it writes nothing and returns the original result. Any other reuse of an id is a
 * DuplicateEventIdError.
 */
export class PostgresEventStore implements EventStore {
  private readonly clock: Clock;
  private readonly ownsPool: boolean;
  private readonly appendListeners = new Set<() => void>();
  private readonly subscriptions = new Set<StoreSubscription>();
  private readonly checkpoints: CheckpointStore;
  private closed = false;

  constructor(
    private readonly pool: Pool,
    private readonly options: {
      readonly clock?: Clock;
      readonly ownsPool?: boolean;
      readonly subscriptions?: Omit<CatchUpSettings, 'onAppend'>;
    } = {},
  ) {
    this.clock = options.clock ?? systemClock;
    this.ownsPool = options.ownsPool ?? false;
    this.checkpoints = new PostgresCheckpointStore(pool);
  }

  async appendToStream(
    streamId: string,
    events: readonly NewEvent[],
    options: { readonly expectedRevision?: ExpectedRevision } = {},
  ): Promise<AppendResult> {
    const expected = options.expectedRevision ?? 'any';
    assertAppendable(streamId, events, expected);
    const client = await this.pool.connect();
    let broken: Error | undefined;
    try {
      // One round trip: open the transaction and queue behind the previous appender (see the class comment).
      await client.query(`BEGIN; SELECT pg_advisory_xact_lock(${EVENT_STORE_APPEND_LOCK_KEY})`);
      try {
        const { result, wrote } = await this.appendLocked(client, streamId, events, expected);
        await client.query(wrote ? 'COMMIT' : 'ROLLBACK');
        if (wrote) this.notifyAppended();
        return result;
      } catch (error) {
        await client.query('ROLLBACK').catch((rollbackError: unknown) => {
          broken = rollbackError instanceof Error ? rollbackError : new Error(String(rollbackError));
        });
        throw error;
      }
    } finally {
      // A connection whose rollback failed is in an unknown state: destroy it rather than pool it.
      client.release(broken);
    }
  }

  async readStream(streamId: string, options: ReadStreamOptions = {}): Promise<RecordedEvent[]> {
    assertReadOptions(options);
    const backwards = options.direction === 'backwards';
    const { rows } = await this.pool.query<EventRow>(
      `SELECT ${EVENT_COLUMNS} FROM events e
        WHERE e.stream_id = $1 AND ($2::integer IS NULL OR e.revision ${backwards ? '<=' : '>='} $2::integer)
        ORDER BY e.revision ${backwards ? 'DESC' : 'ASC'}
        LIMIT $3`,
      [streamId, options.fromRevision ?? null, options.maxCount ?? null],
    );
    return rows.map(toRecordedEvent);
  }

  async readAll(options: ReadAllOptions = {}): Promise<RecordedEvent[]> {
    assertReadOptions(options);
    const after = (options.after ?? 0n).toString();
    const limit = options.maxCount ?? null;
    const { rows } = options.categories
      ? await this.pool.query<EventRow>(
          `SELECT ${EVENT_COLUMNS} FROM events e
            WHERE e.global_position > $1::bigint AND e.category = ANY($2::text[])
            ORDER BY e.global_position LIMIT $3`,
          [after, [...options.categories], limit],
        )
      : await this.pool.query<EventRow>(
          `SELECT ${EVENT_COLUMNS} FROM events e WHERE e.global_position > $1::bigint ORDER BY e.global_position LIMIT $2`,
          [after, limit],
        );
    return rows.map(toRecordedEvent);
  }

  async headPosition(): Promise<bigint> {
    const { rows } = await this.pool.query<{ head: string }>(
      'SELECT coalesce(max(global_position), 0)::text AS head FROM events',
    );
    return BigInt(rows[0]?.head ?? '0');
  }

  /**
   * Catch-up subscription by global position; its checkpoint lives in `subscription_checkpoints`. New events
   * appended through this store instance wake it at once; other processes' appends are seen at the next poll.
   */
  async subscribeToAll(options: SubscribeToAllOptions): Promise<StoreSubscription> {
    if (this.closed) throw new Error('event store is closed');
    const subscription = await startCatchUpSubscription(this, this.checkpoints, options, {
      ...this.options.subscriptions,
      onAppend: (wake) => {
        this.appendListeners.add(wake);
        return () => this.appendListeners.delete(wake);
      },
    });
    this.subscriptions.add(subscription);
    return {
      caughtUp: () => subscription.caughtUp(),
      stop: async () => {
        this.subscriptions.delete(subscription);
        await subscription.stop();
      },
    };
  }

  /** Stops this instance's subscriptions, then closes the pool if the store opened it. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all([...this.subscriptions].map((s) => s.stop()));
    this.subscriptions.clear();
    if (this.ownsPool) await this.pool.end();
  }

  private async appendLocked(
    client: PoolClient,
    streamId: string,
    events: readonly NewEvent[],
    expected: ExpectedRevision,
  ): Promise<{ result: AppendResult; wrote: boolean }> {
    // The stream's current revision and any already-stored copies of these ids, in one round trip.
    const probe = await client.query<ProbeRow>(
      `SELECT (SELECT max(revision) FROM events WHERE stream_id = $1) AS current_revision,
              e.event_id, e.stream_id, e.revision, e.global_position::text AS global_position
         FROM (SELECT 1) AS one
         LEFT JOIN events e ON e.event_id = ANY($2::text[])
        ORDER BY e.global_position`,
      [streamId, events.map((e) => e.id)],
    );
    const current = probe.rows[0]?.current_revision ?? -1;
    const stored: StoredRow[] = probe.rows.filter(isStored);
    if (stored.length > 0) {
      return { result: retriedAppendResult(streamId, events, expected, current, stored), wrote: false };
    }
    checkExpectedRevision(streamId, expected, current);
    const inserted = await client.query<{ global_position: string; revision: number }>(
      `INSERT INTO events (event_id, stream_id, category, revision, type, data, metadata, recorded_at)
       SELECT t.event_id, $1, $2, $3::integer + t.ord::integer - 1, t.type, t.data::jsonb, t.metadata::jsonb, $8
         FROM unnest($4::text[], $5::text[], $6::text[], $7::text[])
              WITH ORDINALITY AS t(event_id, type, data, metadata, ord)
        ORDER BY t.ord
       RETURNING global_position::text AS global_position, revision`,
      [
        streamId,
        streamCategory(streamId),
        current + 1,
        events.map((e) => e.id),
        events.map((e) => e.type),
        events.map((e) => JSON.stringify(e.data ?? null)),
        events.map((e) => JSON.stringify(e.metadata ?? {})),
        this.clock.now(),
      ],
    );
    const last = inserted.rows.reduce<{ global_position: string; revision: number } | undefined>(
      (max, row) => (max === undefined || row.revision > max.revision ? row : max),
      undefined,
    );
    if (!last) throw new Error(`stream ${streamId}: the insert returned no row`);
    return {
      result: { nextExpectedRevision: last.revision, lastGlobalPosition: BigInt(last.global_position) },
      wrote: true,
    };
  }

  private notifyAppended(): void {
    for (const listener of this.appendListeners) listener();
  }
}

interface StoredRow {
  readonly event_id: string;
  readonly stream_id: string;
  readonly revision: number;
  readonly global_position: string;
}

function isStored(row: ProbeRow): row is ProbeRow & StoredRow {
  return (
    row.event_id !== null && row.stream_id !== null && row.revision !== null && row.global_position !== null
  );
}

/**
 * The result of an append whose ids are already stored: the original result when every event sits, in order,
 * at the place this append targets; otherwise the revision conflict or the duplicate id is reported.
 */
function retriedAppendResult(
  streamId: string,
  events: readonly NewEvent[],
  expected: ExpectedRevision,
  current: number,
  stored: readonly StoredRow[],
): AppendResult {
  const first = stored[0]?.revision ?? null;
  const samePlace =
    stored.length === events.length &&
    first !== null &&
    stored.every(
      (row, i) => row.stream_id === streamId && row.event_id === events[i]?.id && row.revision === first + i,
    ) &&
    (typeof expected === 'number' ? first === expected + 1 : expected === 'no_stream' ? first === 0 : true);
  const last = stored[stored.length - 1];
  if (samePlace && last) {
    return { nextExpectedRevision: last.revision, lastGlobalPosition: BigInt(last.global_position) };
  }
  checkExpectedRevision(streamId, expected, current);
  throw new DuplicateEventIdError(
    streamId,
    stored.map((r) => r.event_id),
  );
}

function toRecordedEvent(row: EventRow): RecordedEvent {
  return {
    id: row.event_id,
    streamId: row.stream_id,
    type: row.type,
    data: row.data,
    metadata: row.metadata ?? {},
    revision: row.revision,
    globalPosition: BigInt(row.global_position),
    recordedAt: row.recorded_at,
  };
}

/**
 * Checkpoints in `subscription_checkpoints`. A save never moves a checkpoint backwards, so two instances of the
 * same subscription (a rolling deploy) cannot rewind each other; replaying from scratch is an explicit reset.
 */
export class PostgresCheckpointStore implements CheckpointStore {
  constructor(private readonly pool: Pool) {}

  async load(subscriptionId: string): Promise<bigint> {
    const { rows } = await this.pool.query<{ position: string }>(
      'SELECT position::text AS position FROM subscription_checkpoints WHERE subscription_id = $1',
      [subscriptionId],
    );
    return BigInt(rows[0]?.position ?? '0');
  }

  async save(subscriptionId: string, position: bigint): Promise<void> {
    await this.pool.query(
      `INSERT INTO subscription_checkpoints (subscription_id, position, updated_at) VALUES ($1, $2::bigint, now())
       ON CONFLICT (subscription_id) DO UPDATE
         SET position = GREATEST(subscription_checkpoints.position, EXCLUDED.position), updated_at = now()`,
      [subscriptionId, position.toString()],
    );
  }
}
