import { randomUUID } from 'node:crypto';
import { Pool, type QueryConfig, type QueryResultRow } from 'pg';
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
import {
  connectForListening,
  connectionGuardWanted,
  installConnectionGuard,
  sharesOneSession,
} from '@stablepay/node-util';
import { APPEND_CHANNEL, AppendNotifications, appendNotificationPrefix } from './append-notifications';

/** How often an append that lost a race on a unique key is re-run against the state the winner committed. */
const APPEND_CONFLICT_ATTEMPTS = 100;
/** How long readAll/headPosition wait for this instance's own appends to become readable (see below). */
const OWN_APPENDS_WAIT_MS = 2_000;
/**
 * Poll interval of a subscription while this instance hears other processes' appends (LISTEN): the poll is then
 * only the safety net for a notification lost while the listening connection was down, and idle subscriptions
 * (a dozen per process) no longer read every 50 ms.
 */
const NOTIFIED_POLL_INTERVAL_MS = 1_000;
/** Connections of the pool a store opens for its subscriptions' reads and checkpoints (see createPostgresEventStore). */
const SUBSCRIPTION_POOL_SIZE = 2;

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
  /**
   * Send the hot statements as named prepared statements (planned once per connection instead of per call; the
   * catch-up read's planning cost several times its execution). Default: on, unless the server turns out to share
   * one session between connections (the embedded PGlite server), where two connections preparing the same name
   * would collide.
   */
  readonly preparedStatements?: boolean;
  /**
   * Appends notify (`pg_notify` on APPEND_CHANNEL, delivered at commit) and subscriptions LISTEN for the appends
   * of other processes, so they are woken at once and poll only as a safety net (NOTIFIED_POLL_INTERVAL_MS).
   * Default: on, unless the server shares one session between connections (embedded PGlite: one process).
   */
  readonly notifications?: boolean;
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
  let preparedStatements: boolean;
  let notifications: boolean;
  let readPool: Pool | undefined;
  try {
    await migrateEventStore(pool);
    const oneSession = await sharesOneSession(pool);
    preparedStatements = options.preparedStatements ?? !oneSession;
    notifications = options.notifications ?? !oneSession;
    // On a server that runs every connection in one session (PGlite) a second connection inside a transaction
    // hangs the process; tests turn the guard on against PostgreSQL too, so such code fails in CI.
    if (connectionGuardWanted(process.env, oneSession)) installConnectionGuard();
    // Catch-up reads and checkpoints get connections of their own: behind a queue of appends waiting for the
    // shared pool (a burst, a slow disk) a projection's read would wait as long, and its lag grow with the queue.
    if (owned && !oneSession) {
      readPool = new Pool({ connectionString: options.url, max: SUBSCRIPTION_POOL_SIZE });
      readPool.on('error', (error) => options.onPoolError?.(error));
    }
  } catch (error) {
    if (owned) await pool.end();
    throw error;
  }
  return new PostgresEventStore(pool, {
    ...options,
    ownsPool: owned,
    preparedStatements,
    notifications,
    ...(readPool ? { subscriptionPool: readPool } : {}),
  });
}

// Moved to @stablepay/node-util (the idempotency interceptor probes the same way); still exported from here.
export { sharesOneSession };

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

interface AppendRow {
  kind: 'inserted' | 'current' | 'stored';
  current_revision: number | null;
  event_id: string | null;
  stream_id: string | null;
  revision: number | null;
  global_position: string | null;
  transaction_id: string | null;
}

// The position goes out as text (pg would give an int8 as a string anyway, this makes it explicit). Queries
// must ORDER BY the qualified column `e.global_position`: a bare name would sort by this text alias.
const EVENT_COLUMNS =
  'e.global_position::text AS global_position, e.event_id, e.stream_id, e.revision, e.type, e.data, e.metadata, e.recorded_at';

/**
 * One append in one statement (one round trip, one implicit transaction): the stream's current revision, the
 * copies of these ids already stored, and the insert, which happens only when no id is stored yet and the
 * expected revision ($8 kind, $9 number) holds. The caller tells a conflict from a retry by the rows returned.
 */
const appendSql = (notify: boolean): string => `
  WITH current_rev AS (
    SELECT max(revision) AS revision FROM events WHERE stream_id = $1
  ), stored AS (
    SELECT event_id, stream_id, revision, global_position FROM events WHERE event_id = ANY($3::text[])
  ), allowed AS (
    SELECT coalesce(c.revision, -1) AS revision FROM current_rev c
     WHERE NOT EXISTS (SELECT 1 FROM stored)
       AND CASE $8::text
             WHEN 'any' THEN true
             WHEN 'no_stream' THEN c.revision IS NULL
             WHEN 'stream_exists' THEN c.revision IS NOT NULL
             ELSE c.revision = $9::integer
           END
  ), inserted AS (
    INSERT INTO events (event_id, stream_id, category, revision, type, data, metadata, recorded_at)
    SELECT t.event_id, $1, $2, a.revision + t.ord::integer, t.type, t.data::jsonb, t.metadata::jsonb, $7
      FROM allowed a,
           unnest($3::text[], $4::text[], $5::text[], $6::text[]) WITH ORDINALITY AS t(event_id, type, data, metadata, ord)
     ORDER BY t.ord
    RETURNING revision, global_position, transaction_id
  )
  SELECT 'inserted' AS kind, NULL::integer AS current_revision, NULL::text AS event_id, NULL::text AS stream_id,
         revision, global_position::text AS global_position, transaction_id::text AS transaction_id
    FROM inserted
    ${
      // The notification goes out when the statement's transaction commits, never for one that rolls back.
      notify
        ? `WHERE (SELECT 1 FROM pg_notify('${APPEND_CHANNEL}', $10::text || ' ' || pg_current_xact_id()::text)) = 1`
        : ''
    }
  UNION ALL
  SELECT 'current', (SELECT revision FROM current_rev), NULL, NULL, NULL, NULL, NULL
  UNION ALL
  SELECT 'stored', NULL, event_id, stream_id, revision, global_position::text, NULL FROM stored`;
const APPEND_SQL = appendSql(false);
const APPEND_NOTIFY_SQL = appendSql(true);

/**
 * Several single-event appends to different streams in ONE statement (group commit, see appendGrouped): each
 * row is checked like APPEND_SQL checks its append (expected revision, id not stored yet) against the statement's
 * snapshot, and inserted with ON CONFLICT DO NOTHING, so a row that loses a race (or fails its check) is simply
 * not returned and its append is run again on its own, which reports exactly what a lone append would. With one
 * event per append, "row not inserted" is "append not applied": no append is ever half done.
 */
const groupAppendSql = (notify: boolean): string => `
  WITH req AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::timestamptz[],
                         $8::text[], $9::integer[])
      WITH ORDINALITY AS r(stream_id, category, event_id, type, data, metadata, recorded_at, kind, rev, ord)
  ), allowed AS (
    SELECT r.*, coalesce(c.revision, -1) AS current_revision FROM req r
      LEFT JOIN LATERAL (SELECT max(e.revision) AS revision FROM events e WHERE e.stream_id = r.stream_id) c ON true
     WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.event_id = r.event_id)
       AND CASE r.kind
             WHEN 'any' THEN true
             WHEN 'no_stream' THEN c.revision IS NULL
             WHEN 'stream_exists' THEN c.revision IS NOT NULL
             ELSE c.revision = r.rev
           END
  ), inserted AS (
    INSERT INTO events (event_id, stream_id, category, revision, type, data, metadata, recorded_at)
    SELECT a.event_id, a.stream_id, a.category, a.current_revision + 1, a.type, a.data::jsonb, a.metadata::jsonb,
           a.recorded_at
      FROM allowed a
     ORDER BY a.ord
    ON CONFLICT DO NOTHING
    RETURNING event_id, category, revision, global_position, transaction_id
  )
  SELECT i.event_id::text AS event_id, i.revision::integer AS revision, i.global_position::text AS global_position,
         i.transaction_id::text AS transaction_id
    FROM inserted i
  ${
    notify
      ? `UNION ALL
  SELECT NULL, NULL, NULL, NULL
    FROM (SELECT DISTINCT category FROM inserted) c
   CROSS JOIN LATERAL pg_notify('${APPEND_CHANNEL}', $10::text || ' ' || c.category || ' ' || pg_current_xact_id()::text) n`
      : ''
  }`;
const GROUP_APPEND_SQL = groupAppendSql(false);
const GROUP_APPEND_NOTIFY_SQL = groupAppendSql(true);
/**
 * Single-event appends in flight at once before further ones queue and go together in one statement: below it an
 * append is sent at once and alone (no added latency); above it a queue forms only when appends already wait.
 */
const GROUP_APPENDS_IN_FLIGHT = 4;
/** Appends in one group statement at most. */
const GROUP_MAX = 256;

interface GroupAppendRow {
  /** Null on the notification rows. */
  event_id: string | null;
  revision: number;
  global_position: string;
  transaction_id: string;
}

interface QueuedAppend {
  readonly streamId: string;
  readonly event: NewEvent;
  readonly expected: ExpectedRevision;
  readonly recordedAt: Date;
  readonly resolve: (result: AppendResult) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * `h.horizon`: the oldest transaction still in flight (`pg_snapshot_xmin(pg_current_snapshot())`), except that a
 * transaction seen running in ANOTHER database of the cluster is passed over: it cannot write this database's
 * events, and without this a `CREATE/DROP DATABASE` elsewhere (about a second each, holding a transaction id)
 * holds every reader here back. An in-flight id not found in pg_stat_activity counts (conservative). Both
 * come from the statement's snapshot time; a transaction that starts later gets an id at or above xmax.
 */
const HORIZON_CTE = `
  s AS (SELECT pg_current_snapshot() AS snap),
  h AS (
    SELECT coalesce(
      (SELECT min(x) FROM s, pg_snapshot_xip(s.snap) AS x
        WHERE NOT EXISTS (
          SELECT 1 FROM pg_stat_activity a
           WHERE a.datid <> (SELECT oid FROM pg_database WHERE datname = current_database())
             AND a.backend_xid::text::bigint = (x::text::numeric % 4294967296)::bigint)),
      (SELECT pg_snapshot_xmax(s.snap) FROM s)) AS horizon)`;

/**
 * A catch-up batch: events after the cursor event ($1; an unknown position counts as transaction 0, which is
 * what rows written before transaction ids were recorded carry) in log order, below the oldest in-flight
 * transaction, and that horizon. One statement, so the horizon and the rows come from one snapshot; the outer
 * join keeps the horizon row when no event qualifies. Two texts, with and without a category filter, so each has
 * a plan of its own once prepared (a generic plan for `$3 IS NULL OR category = ANY($3)` could not use the
 * category index).
 */
const readBatchSql = (filtered: boolean): string => `
  WITH ${HORIZON_CTE},
       c AS (SELECT coalesce((SELECT transaction_id FROM events WHERE global_position = $1::bigint), '0'::xid8) AS tx)
  SELECT h.horizon::text AS horizon, x.*
    FROM h
    LEFT JOIN LATERAL (
      SELECT ${EVENT_COLUMNS}, e.transaction_id AS log_tx, e.global_position AS log_pos
        FROM events e, c
       WHERE (e.transaction_id, e.global_position) > (c.tx, $1::bigint)
         AND e.transaction_id < h.horizon
         ${filtered ? 'AND e.category = ANY($3::text[])' : 'AND $3::text[] IS NULL'}
       ORDER BY e.transaction_id, e.global_position
       LIMIT $2
    ) x ON true
   ORDER BY x.log_tx, x.log_pos`;
const READ_BATCH_SQL = readBatchSql(false);
const READ_BATCH_CATEGORIES_SQL = readBatchSql(true);

const READ_STREAM_SQL = `
  SELECT ${EVENT_COLUMNS} FROM events e
   WHERE e.stream_id = $1 AND ($2::integer IS NULL OR e.revision >= $2::integer)
   ORDER BY e.revision ASC
   LIMIT $3`;

const READ_STREAM_BACKWARDS_SQL = `
  SELECT ${EVENT_COLUMNS} FROM events e
   WHERE e.stream_id = $1 AND ($2::integer IS NULL OR e.revision <= $2::integer)
   ORDER BY e.revision DESC
   LIMIT $3`;

const HEAD_SQL = `
  WITH ${HORIZON_CTE}
  SELECT h.horizon::text AS horizon,
         (SELECT e.global_position::text FROM events e
           WHERE e.transaction_id < h.horizon
           ORDER BY e.transaction_id DESC, e.global_position DESC LIMIT 1) AS head
    FROM h`;

/**
 * EventStore on PostgreSQL: one append-only `events` table, unique (stream_id, revision) and unique event id.
 *
 * Concurrency. Appends take no lock: each is ONE statement (probe the stream and the ids, check the expected
 * revision, insert) in its own implicit transaction, so appends to different streams run side by side. Two
 * appends racing for the same revision meet on the unique key: the loser waits for the winner's commit, fails,
 * and is re-run against the new state, which yields exactly what a serial run would (a revision conflict for an
 * expected revision, the next revision for 'any', the original result for a retried id).
 *
 * The log order. A bigserial alone is not in commit order: transaction A draws position 10, B draws 11 and
 * commits first; a reader that saw 11 and stored checkpoint 11 would never read 10. So every event records the
 * id of the transaction that wrote it (`transaction_id`, `pg_current_xact_id()`), the log is ordered by
 * (transaction_id, global_position), and catch-up reads return only events whose transaction id is below the
 * oldest transaction still in flight (`pg_snapshot_xmin(pg_current_snapshot())`), the technique of emmett's and
 * Marten's PostgreSQL stores. Every transaction below that mark has ended, and every transaction that can still
 * commit has an id at or above it, so what a read returns is a prefix of the log in that order: an event that
 * becomes readable later always sorts after it. The cursor `after: P` is the event at position P, located in
 * that order (its transaction id is looked up), so the port's single bigint position remains the checkpoint.
 * Within one stream, log order is revision order (revision n+1 is written only after revision n committed, by
 * a later transaction). The price: readers are held back by any writing transaction in the cluster, however
 * unrelated, for as long as it runs; keep transactions short (an idle-in-transaction session stalls every
 * projection, which /ready and the projection-lag metric show).
 *
 * Idempotency. An append whose events already sit, with the same ids, at exactly the place it would write them
 * is a retry: it writes nothing and returns the original result. Any other reuse of an id is a
 * DuplicateEventIdError.
 */
export class PostgresEventStore implements EventStore {
  private readonly clock: Clock;
  private readonly ownsPool: boolean;
  private readonly readPool: Pool;
  private readonly appendListeners = new Set<
    (mark: bigint | undefined, category: string | undefined) => void
  >();
  /** Tells this instance's appends from others' in notifications. */
  private readonly instanceId = randomUUID();
  /** Group commit of single-event appends (see appendGrouped). */
  private readonly appendQueue: QueuedAppend[] = [];
  private appendsInFlight = 0;
  private notifications: AppendNotifications | undefined;
  /** The highest transaction id of an append made through this instance (readable once the horizon passes it). */
  private lastAppendMark = -1n;
  private readonly subscriptions = new Set<StoreSubscription>();
  /** Catch-up reads in flight, by what they ask for (see sharedCatchUpBatch). */
  private readonly catchUpReads = new Map<string, Promise<{ events: RecordedEvent[]; horizon: bigint }>>();
  private readonly checkpoints: CheckpointStore;
  private closed = false;

  constructor(
    private readonly pool: Pool,
    private readonly options: {
      readonly clock?: Clock;
      readonly ownsPool?: boolean;
      readonly subscriptions?: Omit<CatchUpSettings, 'onAppend'>;
      /** See PostgresEventStoreOptions.preparedStatements; off when constructed directly. */
      readonly preparedStatements?: boolean;
      /** See PostgresEventStoreOptions.notifications; off when constructed directly. */
      readonly notifications?: boolean;
      /** Serves catch-up reads and checkpoints, and is closed with the store; default: the main pool. */
      readonly subscriptionPool?: Pool;
    } = {},
  ) {
    this.clock = options.clock ?? systemClock;
    this.ownsPool = options.ownsPool ?? false;
    this.readPool = options.subscriptionPool ?? pool;
    this.checkpoints = new PostgresCheckpointStore(this.readPool, options.preparedStatements ?? false);
  }

  /** A hot statement: named (prepared once per connection) when prepared statements are on. */
  private run<R extends QueryResultRow>(name: string, text: string, values?: unknown[], pool = this.pool) {
    return pool.query<R>(statement(this.options.preparedStatements ?? false, name, text, values));
  }

  async appendToStream(
    streamId: string,
    events: readonly NewEvent[],
    options: { readonly expectedRevision?: ExpectedRevision } = {},
  ): Promise<AppendResult> {
    const expected = options.expectedRevision ?? 'any';
    assertAppendable(streamId, events, expected);
    const [only] = events;
    if (events.length === 1 && only) return this.appendGrouped(streamId, only, expected);
    return this.appendOne(streamId, events, expected);
  }

  /**
   * Group commit. A single-event append is sent at once while fewer than GROUP_APPENDS_IN_FLIGHT appends run;
   * beyond that it queues, and when an append finishes everything queued (one per stream, up to GROUP_MAX) goes
   * in ONE statement: one round trip, one transaction and one WAL flush for the group. Failure isolation: an
   * append the group statement did not apply (its check failed, it lost a race) is run again alone; if the group
   * statement fails as a whole (e.g. one event's data the server refuses), every member is run alone. So each
   * caller gets exactly the result or the error a lone append would give, whatever its batch-mates do.
   */
  private appendGrouped(
    streamId: string,
    event: NewEvent,
    expected: ExpectedRevision,
  ): Promise<AppendResult> {
    return new Promise<AppendResult>((resolve, reject) => {
      this.appendQueue.push({ streamId, event, expected, recordedAt: this.clock.now(), resolve, reject });
      this.drainAppends();
    });
  }

  private drainAppends(): void {
    while (this.appendQueue.length > 0 && this.appendsInFlight < GROUP_APPENDS_IN_FLIGHT) {
      const group: QueuedAppend[] = [];
      const streams = new Set<string>();
      for (let i = 0; i < this.appendQueue.length && group.length < GROUP_MAX;) {
        const queued = this.appendQueue[i];
        if (queued && !streams.has(queued.streamId)) {
          streams.add(queued.streamId);
          group.push(queued);
          this.appendQueue.splice(i, 1);
        } else i++;
      }
      this.appendsInFlight++;
      void this.runGroup(group).finally(() => {
        this.appendsInFlight--;
        this.drainAppends();
      });
    }
  }

  /**
   * Runs a group and settles every member. Whatever fails outside the per-member paths (a malformed answer, a
   * throwing listener) rejects the members not settled yet: a waiting append must never hang, and the rejection
   * must not escape as an unhandled one (drainAppends does not await this).
   */
  private async runGroup(group: readonly QueuedAppend[]): Promise<void> {
    try {
      await this.runGroupMembers(group);
    } catch (error) {
      // A promise settles once: the members already resolved or rejected keep their outcome.
      for (const q of group) q.reject(error);
    }
  }

  private async runGroupMembers(group: readonly QueuedAppend[]): Promise<void> {
    const alone = (q: QueuedAppend): Promise<void> =>
      this.appendOne(q.streamId, [q.event], q.expected, q.recordedAt).then(q.resolve, q.reject);
    const [first] = group;
    if (group.length === 1 && first) return alone(first);
    let rows: GroupAppendRow[];
    try {
      const params = [
        group.map((q) => q.streamId),
        group.map((q) => streamCategory(q.streamId)),
        group.map((q) => q.event.id),
        group.map((q) => q.event.type),
        group.map((q) => JSON.stringify(q.event.data ?? null)),
        group.map((q) => JSON.stringify(q.event.metadata ?? {})),
        group.map((q) => q.recordedAt),
        group.map((q) => (typeof q.expected === 'number' ? 'revision' : q.expected)),
        group.map((q) => (typeof q.expected === 'number' ? q.expected : null)),
        ...(this.options.notifications ? [this.instanceId] : []),
      ];
      ({ rows } = this.options.notifications
        ? await this.run<GroupAppendRow>('sp_es_group_append_notify', GROUP_APPEND_NOTIFY_SQL, params)
        : await this.run<GroupAppendRow>('sp_es_group_append', GROUP_APPEND_SQL, params));
    } catch {
      // The statement failed as a whole: each append alone, so only the culprit fails.
      await Promise.all(group.map(alone));
      return;
    }
    const applied = new Map(rows.filter((r) => r.event_id !== null).map((r) => [r.event_id, r]));
    const rest: QueuedAppend[] = [];
    for (const q of group) {
      const row = applied.get(q.event.id);
      if (!row) {
        rest.push(q);
        continue;
      }
      const mark = BigInt(row.transaction_id);
      if (mark > this.lastAppendMark) this.lastAppendMark = mark;
      this.notifyAppended(mark, streamCategory(q.streamId));
      q.resolve({ nextExpectedRevision: row.revision, lastGlobalPosition: BigInt(row.global_position) });
    }
    await Promise.all(rest.map(alone));
  }

  private async appendOne(
    streamId: string,
    events: readonly NewEvent[],
    expected: ExpectedRevision,
    recordedAt: Date = this.clock.now(),
  ): Promise<AppendResult> {
    const params = [
      streamId,
      streamCategory(streamId),
      events.map((e) => e.id),
      events.map((e) => e.type),
      events.map((e) => JSON.stringify(e.data ?? null)),
      events.map((e) => JSON.stringify(e.metadata ?? {})),
      recordedAt,
      typeof expected === 'number' ? 'revision' : expected,
      typeof expected === 'number' ? expected : null,
      ...(this.options.notifications
        ? [appendNotificationPrefix(this.instanceId, streamCategory(streamId))]
        : []),
    ];
    for (let attempt = 1; ; attempt++) {
      let rows: AppendRow[];
      try {
        ({ rows } = this.options.notifications
          ? await this.run<AppendRow>('sp_es_append_notify', APPEND_NOTIFY_SQL, params)
          : await this.run<AppendRow>('sp_es_append', APPEND_SQL, params));
      } catch (error) {
        // Lost a race on (stream_id, revision) or on an event id: the winner has committed by now, so running
        // the statement again decides against its result.
        if (isUniqueViolation(error) && attempt < APPEND_CONFLICT_ATTEMPTS) continue;
        throw error;
      }
      const inserted = rows.filter((r) => r.kind === 'inserted');
      const last = inserted.reduce<AppendRow | undefined>(
        (max, row) => (max === undefined || (row.revision ?? -1) > (max.revision ?? -1) ? row : max),
        undefined,
      );
      if (last?.revision != null && last.global_position !== null && last.transaction_id !== null) {
        const mark = BigInt(last.transaction_id);
        if (mark > this.lastAppendMark) this.lastAppendMark = mark;
        this.notifyAppended(mark, streamCategory(streamId));
        return { nextExpectedRevision: last.revision, lastGlobalPosition: BigInt(last.global_position) };
      }
      const current = rows.find((r) => r.kind === 'current')?.current_revision ?? -1;
      const stored = rows
        .filter((r): r is AppendRow & StoredRow => r.kind === 'stored')
        .sort((a, b) => a.revision - b.revision);
      if (stored.length > 0) return retriedAppendResult(streamId, events, expected, current, stored);
      checkExpectedRevision(streamId, expected, current);
      throw new Error(`stream ${streamId}: the append wrote nothing and reported no reason`);
    }
  }

  async readStream(streamId: string, options: ReadStreamOptions = {}): Promise<RecordedEvent[]> {
    assertReadOptions(options);
    const backwards = options.direction === 'backwards';
    const { rows } = await this.run<EventRow>(
      backwards ? 'sp_es_read_stream_backwards' : 'sp_es_read_stream',
      backwards ? READ_STREAM_BACKWARDS_SQL : READ_STREAM_SQL,
      [streamId, options.fromRevision ?? null, options.maxCount ?? null],
    );
    return rows.map(toRecordedEvent);
  }

  /**
   * Events in log order after the event at `after`, only those below the in-flight horizon (see the class
   * comment), so paging with the last position read never skips an event. Events appended through this instance
   * before the call are included: the read waits (briefly re-polling) while an older transaction elsewhere still
   * holds them back, for up to OWN_APPENDS_WAIT_MS, then returns the readable prefix.
   */
  async readAll(options: ReadAllOptions = {}): Promise<RecordedEvent[]> {
    assertReadOptions(options);
    return (await this.afterOwnAppends(() => this.readCatchUpBatch(options))).events;
  }

  /** The position of the last readable event in log order (0n when none); a safe `after` for a later read. */
  async headPosition(): Promise<bigint> {
    const { head } = await this.afterOwnAppends(async () => {
      const { rows } = await this.run<{ head: string | null; horizon: string }>(
        'sp_es_head',
        HEAD_SQL,
        undefined,
        this.readPool,
      );
      const row = rows[0];
      return { head: BigInt(row?.head ?? '0'), horizon: BigInt(row?.horizon ?? '0') };
    });
    return head;
  }

  /** Catch-up read: a batch in log order, and the horizon when it reached the end of what is readable. */
  async readCatchUpBatch(options: ReadAllOptions): Promise<{ events: RecordedEvent[]; horizon: bigint }> {
    const after = (options.after ?? 0n).toString();
    const filtered = options.categories !== undefined;
    const { rows } = await this.run<EventRow & { horizon: string }>(
      filtered ? 'sp_es_read_batch_categories' : 'sp_es_read_batch',
      filtered ? READ_BATCH_CATEGORIES_SQL : READ_BATCH_SQL,
      [after, options.maxCount ?? null, options.categories ? [...options.categories] : null],
      this.readPool,
    );
    const events = rows.filter((r) => r.global_position !== null).map(toRecordedEvent);
    const horizon = BigInt(rows[0]?.horizon ?? '0');
    return { events, horizon };
  }

  /**
   * A catch-up read for a subscription, shared with every other subscription of this instance asking for the same
   * batch (same cursor, size and categories) while it runs. Several consumers of one topic (a projection and the
   * webhook recorder) are woken by the same append at the same moment and are usually at the same position, so
   * they would otherwise send the same statement side by side. Joining a read that started before one's own wake
   * is safe: any read returns a prefix of the log with its horizon, and a subscription whose announced append is
   * not below that horizon reads again (CatchUpSubscription's pending mark). The events are shared: handlers treat
   * recorded events as read-only.
   */
  private sharedCatchUpBatch(options: ReadAllOptions): Promise<{ events: RecordedEvent[]; horizon: bigint }> {
    const key = `${options.after ?? 0n}|${options.maxCount ?? ''}|${options.categories?.join('\u0000') ?? ''}|${
      options.categories === undefined ? 'all' : 'some'
    }`;
    const running = this.catchUpReads.get(key);
    if (running) return running;
    const read = this.readCatchUpBatch(options).finally(() => this.catchUpReads.delete(key));
    this.catchUpReads.set(key, read);
    return read;
  }

  /** The next transaction id to be assigned: every transaction that committed before this call is below it. */
  async watermark(): Promise<bigint> {
    const { rows } = await this.run<{ mark: string }>(
      'sp_es_watermark',
      'SELECT pg_snapshot_xmax(pg_current_snapshot())::text AS mark',
      undefined,
      this.readPool,
    );
    return BigInt(rows[0]?.mark ?? '0');
  }

  private async afterOwnAppends<T extends { horizon: bigint }>(read: () => Promise<T>): Promise<T> {
    const own = this.lastAppendMark;
    const deadline = Date.now() + OWN_APPENDS_WAIT_MS;
    for (;;) {
      const result = await read();
      if (result.horizon > own || Date.now() > deadline) return result;
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
  }

  /**
   * Catch-up subscription by global position; its checkpoint lives in `subscription_checkpoints`. New events
   * appended through this store instance wake it at once; other processes' appends are seen at the next poll.
   */
  async subscribeToAll(options: SubscribeToAllOptions): Promise<StoreSubscription> {
    if (this.closed) throw new Error('event store is closed');
    const source = {
      readAll: (o: ReadAllOptions) => this.readAll(o),
      headPosition: () => this.headPosition(),
      readCatchUpBatch: async (o: ReadAllOptions) => {
        const batch = await this.sharedCatchUpBatch(o);
        // A full batch says nothing about what lies beyond it.
        return batch.events.length < (o.maxCount ?? Infinity) ? batch : { events: batch.events };
      },
      watermark: () => this.watermark(),
    };
    await this.listenForOthers();
    const subscription = await startCatchUpSubscription(source, this.checkpoints, options, {
      ...(this.notifications ? { pollIntervalMs: NOTIFIED_POLL_INTERVAL_MS } : {}),
      ...this.options.subscriptions,
      onAppend: (wake) => {
        // Only appends to the subscription's categories wake it: the others would cost it an empty read.
        const categories = options.categories ? new Set(options.categories) : undefined;
        const listener = (mark: bigint | undefined, category: string | undefined): void => {
          if (!categories || category === undefined || categories.has(category)) wake(mark);
        };
        this.appendListeners.add(listener);
        return () => this.appendListeners.delete(listener);
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

  /** Starts LISTENing for other processes' appends at the first subscription (when notifications are on). */
  private async listenForOthers(): Promise<void> {
    if (!this.options.notifications || this.notifications) return;
    const options = this.pool.options;
    this.notifications = new AppendNotifications(
      () => connectForListening(options),
      this.instanceId,
      (category, mark) => this.notifyAppended(mark, category),
      (error) => this.options.subscriptions?.onInfrastructureError?.(error, 'append-notifications'),
    );
    await this.notifications.start();
  }

  /** Stops this instance's subscriptions, then closes the pool if the store opened it. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all([...this.subscriptions].map((s) => s.stop()));
    this.subscriptions.clear();
    await this.notifications?.stop();
    if (this.ownsPool) await this.pool.end();
    if (this.readPool !== this.pool) await this.readPool.end();
  }

  private notifyAppended(mark: bigint | undefined, category: string | undefined): void {
    for (const listener of this.appendListeners) listener(mark, category);
  }
}

interface StoredRow {
  readonly event_id: string;
  readonly stream_id: string;
  readonly revision: number;
  readonly global_position: string;
}

function isUniqueViolation(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === '23505';
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
    return {
      nextExpectedRevision: last.revision,
      lastGlobalPosition: BigInt(last.global_position),
      retried: true,
    };
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
  constructor(
    private readonly pool: Pool,
    private readonly prepared = false,
  ) {}

  async load(subscriptionId: string): Promise<bigint> {
    const { rows } = await this.pool.query<{ position: string }>(
      statement(
        this.prepared,
        'sp_es_checkpoint_load',
        'SELECT position::text AS position FROM subscription_checkpoints WHERE subscription_id = $1',
        [subscriptionId],
      ),
    );
    return BigInt(rows[0]?.position ?? '0');
  }

  async save(subscriptionId: string, position: bigint): Promise<void> {
    await this.pool.query(
      statement(
        this.prepared,
        'sp_es_checkpoint_save',
        `INSERT INTO subscription_checkpoints (subscription_id, position, updated_at) VALUES ($1, $2::bigint, now())
         ON CONFLICT (subscription_id) DO UPDATE
           SET position = GREATEST(subscription_checkpoints.position, EXCLUDED.position), updated_at = now()`,
        [subscriptionId, position.toString()],
      ),
    );
  }
}

/** A query config, named when prepared statements are on (pg prepares a name once per connection). */
function statement(prepared: boolean, name: string, text: string, values?: unknown[]): QueryConfig {
  return { ...(prepared ? { name } : {}), text, ...(values ? { values } : {}) };
}
