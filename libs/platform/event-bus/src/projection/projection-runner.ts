import type { DataSource, EntityManager, MigrationInterface, QueryRunner } from 'typeorm';
import type { EventStore } from '@stablepay/event-store';
import { insideTransaction } from '@stablepay/node-util';
import { toBusMessage } from '../bus-message';
import type { BusMessage, BusSubscription, EventBus } from '../event-bus.port';
import { isConnectionLoss, isTransient } from '../supervision/failure-kind';
import {
  NotifyParkedStreamChanges1795536000000,
  ParkedStreamNotifications,
} from './parked-stream-notifications';
import { projectionMetrics } from './projection-metrics';

/** The events of a stream from revision 0 through one event, in order. */
export type StreamHistory = ReadonlyArray<{
  readonly type: string;
  readonly data: unknown;
}>;

/** A read model fed from the bus. `apply` must be idempotent (read models keep the stream revision they reflect). */
export interface ProjectionDefinition {
  /** Consumer group, metric label and the name operators use (`/admin/projections`). */
  readonly name: string;
  readonly topics: readonly string[];
  /**
   * The projection needs each event's stream history through that event (e.g. an object as of the event). The
   * runner reads it before the batch's transaction opens and passes it to `apply`: read inside the transaction on
   * another connection, it would wait forever on PGlite (one session: a connection in a transaction holds the rest).
   */
  readonly needsHistory?: boolean;
  /** Applies one message inside the batch's transaction; true when it changed the read model. */
  apply(em: EntityManager, message: BusMessage, history?: StreamHistory): Promise<boolean>;
  /**
   * Optional: applies a whole batch (in order, per stream) inside its transaction with fewer statements than one
   * per message (e.g. one multi-row insert for the creations); answers the messages that changed the read model,
   * in order. Must have the effect of `apply` on each message in turn. Used on the fast path only: when the batch
   * fails, the runner applies it again message by message with `apply` to find and park the culprit.
   */
  applyBatch?(
    em: EntityManager,
    messages: readonly BusMessage[],
    histories: ReadonlyMap<string, StreamHistory>,
  ): Promise<BusMessage[]>;
  /**
   * Optional: the whole batch as ONE statement when it can be (e.g. a batch of creations only), else undefined.
   * It runs alone, in its own implicit transaction: one round trip instead of BEGIN, the statement and COMMIT, with
   * the same all-or-nothing effect. Must have the effect of `applyBatch` on these messages, be one data-modifying
   * statement with RETURNING and without a WITH of its own (the runner may put it inside one), and `changed` maps
   * its rows to the messages that changed the read model, in order. Not used while the projection has parked
   * streams; when it fails, the batch is applied message by message as a failed `applyBatch` would be.
   */
  batchStatement?(
    messages: readonly BusMessage[],
    histories: ReadonlyMap<string, StreamHistory>,
  ): BatchStatement | undefined;
  /** Called after a transaction committed, with the messages that changed the read model (in order). */
  onCommitted?(changed: readonly BusMessage[]): void;
}

/** See `ProjectionDefinition.batchStatement`. */
export interface BatchStatement {
  readonly sql: string;
  readonly params: readonly unknown[];
  changed(rows: readonly unknown[]): BusMessage[];
}

/**
 * The history the runner passed to `apply` of a projection with `needsHistory`. Never read here instead: `apply`
 * runs inside the batch transaction, where a read on another connection hangs PGlite.
 */
export function givenHistory(message: BusMessage, history: StreamHistory | undefined): StreamHistory {
  if (!history)
    throw new Error(`no stream history given for ${message.key}@${message.revision}: set needsHistory`);
  return history;
}

export interface ProjectionLogger {
  error(message: Record<string, unknown>): void;
  warn(message: Record<string, unknown>): void;
  log(message: Record<string, unknown>): void;
}

export interface ParkedStream {
  readonly projection: string;
  /**
   * What is parked: the stream, or a bus consumer's isolation key within it (e.g. one deposit address on a chain's
   * observation stream, `chain-eip155:8453:0x…`). The retry route takes it.
   */
  readonly streamId: string;
  /** The stream a key parked within it is in (read by its retry); null when `streamId` is the stream itself. */
  readonly sourceStreamId: string | null;
  readonly eventId: string;
  readonly revision: number;
  readonly eventType: string;
  readonly error: string;
  readonly parkedAt: string;
  readonly attempts: number;
  /** The newest later revision of the stream that arrived while parked and waits behind it. */
  readonly waitingRevision: number | null;
  readonly retryRequestedAt: string | null;
}

export type RetryOutcome = 'applied' | 'still_parked' | 'not_parked';

export interface ProjectionStatus {
  readonly name: string;
  /** Batches keep failing for a reason that is not one event (e.g. the database is unreachable). */
  readonly stalled: boolean;
  readonly consecutiveFailures: number;
  readonly lastError?: string;
  readonly parkedStreams: number;
}

const CREATE_PARKED_STREAMS = `
  CREATE TABLE IF NOT EXISTS parked_streams (
    projection         text        NOT NULL,
    stream_id          text        NOT NULL,
    event_id           text        NOT NULL,
    revision           integer     NOT NULL,
    event_type         text        NOT NULL,
    error              text        NOT NULL,
    parked_at          timestamptz NOT NULL DEFAULT now(),
    attempts           integer     NOT NULL DEFAULT 1,
    waiting_revision   integer,
    retry_requested_at timestamptz,
    PRIMARY KEY (projection, stream_id)
  )`;

/** The table of parked streams, as a TypeORM migration every process applies (platform runtime). */
export class CreateParkedStreams1767312000000 implements MigrationInterface {
  name = 'CreateParkedStreams1767312000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(CREATE_PARKED_STREAMS);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TABLE IF EXISTS parked_streams');
  }
}

/**
 * A bus consumer may park a key finer than a stream (ConsumeOptions.isolationKey): `stream_id` is then the key,
 * and this column the stream it is in. Every existing row parked a whole stream, which is what NULL means, so the
 * upgrade rewrites nothing (and a process of the previous version keeps reading and writing the table).
 */
export class AddParkedStreamSource1795449600000 implements MigrationInterface {
  name = 'AddParkedStreamSource1795449600000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE parked_streams ADD COLUMN IF NOT EXISTS source_stream_id text');
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE parked_streams DROP COLUMN IF EXISTS source_stream_id');
  }
}

/**
 * A bus consumer's claim on retrying a parked stream (SupervisedEventBus): the member holding it and until when, so
 * one member of a group retries a stream at a time without holding a connection for it. Projections lock the row.
 */
export class AddParkedStreamRetryClaims1795449600100 implements MigrationInterface {
  name = 'AddParkedStreamRetryClaims1795449600100';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE parked_streams
      ADD COLUMN IF NOT EXISTS retry_claimed_by text,
      ADD COLUMN IF NOT EXISTS retry_claimed_until timestamptz`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      'ALTER TABLE parked_streams DROP COLUMN IF EXISTS retry_claimed_by, DROP COLUMN IF EXISTS retry_claimed_until',
    );
  }
}

/** The migrations of `parked_streams`, in order: every process that parks or retries applies all of them. */
export const PARKED_STREAMS_MIGRATIONS = [
  CreateParkedStreams1767312000000,
  AddParkedStreamSource1795449600000,
  AddParkedStreamRetryClaims1795449600100,
  NotifyParkedStreamChanges1795536000000,
] as const;

/** Consecutive failed batches after which a projection counts as stalled (/ready fails). */
const STALLED_AFTER_FAILURES = 3;
/**
 * Transient batch failures in a row after which the batch gets the event-by-event pass anyway, parking an event
 * whose own application keeps failing transiently (a statement timeout) while the connection answers.
 */
const ISOLATE_AFTER_TRANSIENT_FAILURES = 10;
const RETRY_REQUEST_POLL_MS = 1_000;
/**
 * The poll while the runner hears `parked_streams` notifications (ParkedStreamNotifications): they wake it at once
 * for a park, a release or a retry request of any process, so the poll is only the safety net for one sent while
 * the listening connection was down. A retry scheduled for later (after a transient failure) is polled for when due.
 */
const NOTIFIED_RETRY_REQUEST_POLL_MS = 30_000;
/**
 * A stream parked for a transient failure (a statement timeout under load) is retried by itself after this delay,
 * doubling per failed retry up to TRANSIENT_RETRY_MAX_MS: an overload that passes must not leave a merchant's read
 * model frozen until an operator notices. A failure of the event's own (a constraint) still waits for the operator.
 */
const TRANSIENT_RETRY_BASE_MS = 60_000;
const TRANSIENT_RETRY_MAX_MS = 30 * 60_000;
/** `retry_requested_at` of a stream whose `attempts` retries threw, e.g. transiently ($3: base ms, $4: max ms). */
const NEXT_TRANSIENT_RETRY = `now() + LEAST($4::float8, $3::float8 * power(2, attempts - 1)) * interval '1 millisecond'`;

/**
 * Runs one projection: consumes its topics in batches and applies each batch in ONE transaction (the fast path),
 * so a burst costs one commit instead of one per event.
 *
 * One bad event does not stop the others. If a batch fails because of one event (a constraint the read model
 * cannot hold, a bug in `apply`), the batch is applied again event by event under savepoints: the failing
 * event's stream is PARKED (a `parked_streams` row, with the error; error log and metrics), its later events
 * wait behind it (skipped, the newest waiting revision recorded, so per-stream order holds), and every other
 * stream's events commit in the same transaction. A failure that is not one event's (connection lost,
 * serialization failure, deadlock...) rolls the batch back and the bus redelivers it; after a few in a row the
 * projection reports itself stalled. An operator retries a parked stream once the cause is fixed (admin route or
 * CLI set `retry_requested_at`; the owning runner is notified at once, or `retry` directly): the stream's
 * events from the parked revision are read from the event store and applied; the row goes once they all apply.
 *
 * The parked row is read `FOR UPDATE` by each batch touching that stream and by a retry, so a retry and a live
 * batch never interleave: a batch that skipped an event records it as waiting before the retry can run, and the
 * retry re-reads the stream if it has not reached that revision yet.
 */
export class ProjectionRunner {
  private subscription?: BusSubscription;
  private consecutiveFailures = 0;
  private lastError?: string;
  private parkedCount = 0;
  /** Reads of the parked count sent, and the newest one taken (parkedCounted). */
  private parkedReads = 0;
  private parkedCountRead = 0;
  private retryTimer?: NodeJS.Timeout;
  private retrying: Promise<void> = Promise.resolve();
  /** A poll queued by a notification and not started yet: later ones in the meantime are folded into it. */
  private wakeQueued = false;
  /** Milliseconds from the last poll until the earliest retry it saw scheduled for later (none: undefined). */
  private nextRetryInMs: number | undefined;
  private notifications?: ParkedStreamNotifications;
  private unsubscribe?: () => Promise<void>;
  private stopped = false;

  constructor(
    private readonly definition: ProjectionDefinition,
    private readonly deps: {
      readonly dataSource: DataSource;
      readonly bus: EventBus;
      readonly store: Pick<EventStore, 'readStream'>;
      readonly logger: ProjectionLogger;
      readonly clock?: () => number;
      /**
       * Commit batches without waiting for their WAL flush. Only safe when the bus position is stored in the
       * SAME PostgreSQL after the batch commits (store-log bus on the Postgres event store on this database):
       * that synchronous commit flushes this one's WAL too, and a crash before it loses both, so redelivery
       * (idempotent by revision) applies the batch again. Read-your-writes waits then see the rows without a
       * second fsync on their path. Never with Kafka (its offsets commit elsewhere).
       */
      readonly asyncCommit?: boolean;
      /** First automatic retry of a stream parked for a transient failure (default 60 s, doubling to 30 min). */
      readonly transientRetryBaseMs?: number;
      /** The retry poll while notifications are heard (default NOTIFIED_RETRY_REQUEST_POLL_MS). */
      readonly notifiedPollMs?: number;
    },
  ) {}

  private get transientRetry(): [number, number] {
    const base = this.deps.transientRetryBaseMs ?? TRANSIENT_RETRY_BASE_MS;
    return [base, Math.max(base, TRANSIENT_RETRY_MAX_MS)];
  }

  get name(): string {
    return this.definition.name;
  }

  async start(): Promise<void> {
    await this.refreshParkedCount();
    this.subscription = await this.deps.bus.consume({
      group: this.definition.name,
      topics: this.definition.topics,
      handler: (message) => this.handleBatch([message]),
      handleBatch: (messages) => this.handleBatch(messages),
      isolatesItself: true,
      // A member that takes over partitions (Kafka) counts the streams another member parked before handling any
      // of their messages: counting none, it would skip the row lock and apply a later event past the parked one.
      onAssigned: () => this.refreshParkedCount(),
      onError: (error, message) =>
        this.deps.logger.error({
          msg: 'projection batch failed, will retry',
          projection: this.definition.name,
          eventId: message.id,
          error: String(error),
        }),
    });
    this.notifications = ParkedStreamNotifications.of(this.deps.dataSource);
    this.unsubscribe = await this.notifications.subscribe(
      this.definition.name,
      () => this.wake(),
      (error) =>
        this.deps.logger.warn({
          msg: 'listening for parked stream changes failed; polled meanwhile',
          projection: this.definition.name,
          error: String(error),
        }),
    );
    this.schedulePoll();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    await this.unsubscribe?.();
    await this.subscription?.stop();
    await this.retrying;
  }

  /** A notification about this projection's parked streams: poll now (folded with others not yet started). */
  private wake(): void {
    if (this.wakeQueued || this.stopped) return;
    this.wakeQueued = true;
    void this.requestRetries().finally(() => this.schedulePoll());
  }

  /** The next poll: each second, or while notifications are heard only as a safety net and when a retry is due. */
  private schedulePoll(): void {
    if (this.stopped) return;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    const poll = this.notifications?.listening
      ? (this.deps.notifiedPollMs ?? NOTIFIED_RETRY_REQUEST_POLL_MS)
      : RETRY_REQUEST_POLL_MS;
    this.retryTimer = setTimeout(
      () => void this.requestRetries().finally(() => this.schedulePoll()),
      // setTimeout fires at once for more than 2^31 - 1 ms.
      Math.min(poll, this.nextRetryInMs ?? poll, 2 ** 31 - 1),
    );
    this.retryTimer.unref();
  }

  /** Resolves once every message published before the call was handled (applied, parked or waiting). */
  async caughtUp(): Promise<void> {
    await this.subscription?.caughtUp();
  }

  status(): ProjectionStatus {
    return {
      name: this.definition.name,
      stalled: this.consecutiveFailures >= STALLED_AFTER_FAILURES,
      consecutiveFailures: this.consecutiveFailures,
      ...(this.lastError !== undefined ? { lastError: this.lastError } : {}),
      parkedStreams: this.parkedCount,
    };
  }

  async parkedStreams(): Promise<ParkedStream[]> {
    return listParkedStreams(this.deps.dataSource, this.definition.name);
  }

  /**
   * Retries every stream whose retry is due: asked for by an operator, or scheduled after a transient failure (also
   * polled: on each notification, and each second or while notified every 30 s; each poll also takes the parked
   * count from the shared table), oldest first; resolves when done. A retry that throws (fails transiently again, or for a
   * reason that is not one of its events', such as its DELETE refused) is put off with a doubling delay and the next
   * stream is retried: left due, it would run again at every poll, and the streams after it would never run. A
   * request an operator made while it ran is kept (a retry serves only the requests older than its start).
   */
  requestRetries(): Promise<void> {
    if (this.stopped) return this.retrying;
    this.retrying = this.retrying.then(async () => {
      this.wakeQueued = false;
      try {
        // Every row, not just the due ones: the count is the shared table's, so streams another process (another
        // member, another replica's retry) parked or released show in this one's status, /ready and gauge.
        const read = ++this.parkedReads;
        const rows: Array<{
          stream_id: string;
          due: boolean | null;
          due_in_ms: number | null;
          started: Date;
        }> = await this.deps.dataSource.query(
          `SELECT stream_id, retry_requested_at <= now() AS due,
                    extract(epoch FROM retry_requested_at - now())::float8 * 1000 AS due_in_ms,
                    clock_timestamp() AS started
               FROM parked_streams WHERE projection = $1 ORDER BY parked_at, stream_id`,
          [this.definition.name],
        );
        this.parkedCounted(read, rows.length);
        const later = rows.flatMap((r) => (r.due === false && r.due_in_ms !== null ? [r.due_in_ms] : []));
        this.nextRetryInMs = later.length > 0 ? Math.max(0, Math.ceil(Math.min(...later))) : undefined;
        for (const row of rows.filter((r) => r.due)) {
          if (this.stopped) break;
          try {
            await this.retry(row.stream_id);
          } catch (error) {
            await this.putOff(row.stream_id, row.started, error);
          }
        }
      } catch (error) {
        this.deps.logger.warn({
          msg: 'retrying parked streams failed',
          projection: this.definition.name,
          error: String(error),
        });
      }
    });
    return this.retrying;
  }

  /** The next retry of a stream whose retry threw: after a doubling delay, unless an operator asked since `started`. */
  private async putOff(streamId: string, started: Date, error: unknown): Promise<void> {
    await this.deps.dataSource.query(
      `UPDATE parked_streams SET attempts = attempts + 1, error = $5,
              retry_requested_at = CASE WHEN retry_requested_at > $6 THEN retry_requested_at
                                        ELSE ${NEXT_TRANSIENT_RETRY} END
        WHERE projection = $1 AND stream_id = $2`,
      [this.definition.name, streamId, ...this.transientRetry, String(error), started],
    );
    const transient = isTransient(error) || isConnectionLoss(error);
    this.deps.logger[transient ? 'warn' : 'error']({
      msg: transient
        ? 'parked stream retry failed transiently, retried later'
        : 'parked stream retry failed for a reason that is not one of its events; retried later',
      projection: this.definition.name,
      streamId,
      error: String(error),
    });
  }

  /**
   * Applies a parked stream's events from the parked one on; the stream is released once all of them apply.
   * `not_parked` when the projection has no row for the stream as the retry begins. A row that goes while it runs
   * was released by another retry (the poll's, another process's: this one waited for its lock): `applied`, as the
   * supervised bus answers, not `not_parked` for a stream that was parked when the operator asked.
   */
  async retry(streamId: string): Promise<RetryOutcome> {
    for (let seen = false; ; seen = true) {
      const rows: Array<{ revision: number }> = await this.deps.dataSource.query(
        'SELECT revision FROM parked_streams WHERE projection = $1 AND stream_id = $2',
        [this.definition.name, streamId],
      );
      const parked = rows[0];
      if (!parked) return seen ? this.releasedMeanwhile() : 'not_parked';
      // Read outside the transaction: on PGlite a second connection inside it would wait for it forever.
      const messages = (await this.deps.store.readStream(streamId, { fromRevision: parked.revision })).map(
        toBusMessage,
      );
      const histories = await this.histories(messages);
      const result = await this.deps.dataSource.transaction(async (em) => {
        const locked: Array<{ revision: number; waiting_revision: number | null }> = await em.query(
          `SELECT revision, waiting_revision FROM parked_streams WHERE projection = $1 AND stream_id = $2 FOR UPDATE`,
          [this.definition.name, streamId],
        );
        const row = locked[0];
        if (!row) return { outcome: 'released_meanwhile' as const, changed: [] };
        const newest = messages[messages.length - 1]?.revision ?? -1;
        if (row.revision !== parked.revision || (row.waiting_revision ?? -1) > newest) {
          return { outcome: 'reread' as const, changed: [] };
        }
        const changed: BusMessage[] = [];
        for (const message of messages) {
          const failure = await this.applyIsolated(em, message, changed, histories);
          if (failure !== undefined) {
            await em.query(
              `UPDATE parked_streams SET event_id = $3, revision = $4, event_type = $5, error = $6,
                      attempts = attempts + 1, retry_requested_at = NULL
                WHERE projection = $1 AND stream_id = $2`,
              [this.definition.name, streamId, message.id, message.revision, message.type, failure.text],
            );
            return { outcome: 'still_parked' as const, changed, failure: failure.text, message };
          }
        }
        await em.query('DELETE FROM parked_streams WHERE projection = $1 AND stream_id = $2', [
          this.definition.name,
          streamId,
        ]);
        return { outcome: 'applied' as const, changed };
      });
      if (result.outcome === 'reread') continue;
      if (result.outcome === 'released_meanwhile') return this.releasedMeanwhile();
      this.committed(result.changed);
      if (result.outcome === 'still_parked') {
        this.deps.logger.error({
          msg: 'retry of a parked stream failed; still parked',
          projection: this.definition.name,
          streamId,
          eventId: result.message.id,
          error: result.failure,
        });
      } else if (result.outcome === 'applied') {
        this.deps.logger.log({ msg: 'parked stream released', projection: this.definition.name, streamId });
      }
      await this.refreshParkedCount();
      return result.outcome;
    }
  }

  /** The answer of a retry whose stream another retry released while it ran (that one logged the release). */
  private async releasedMeanwhile(): Promise<RetryOutcome> {
    await this.refreshParkedCount();
    return 'applied';
  }

  private async handleBatch(messages: readonly BusMessage[]): Promise<void> {
    let result: { changed: BusMessage[]; parked: ParkedNow[] };
    try {
      const histories = await this.histories(messages);
      try {
        result =
          (await this.applyStatement(messages, histories)) ??
          (await this.batchTransaction((em) => this.applyBatch(em, messages, false, histories)));
      } catch (error) {
        const transient = isTransient(error);
        if (transient && this.consecutiveFailures + 1 < ISOLATE_AFTER_TRANSIENT_FAILURES) throw error;
        // One event (or more) cannot be applied: again, event by event, parking what fails.
        result = await this.batchTransaction((em) =>
          this.applyBatch(em, messages, transient ? 'parking_transient' : true, histories),
        );
      }
    } catch (error) {
      this.consecutiveFailures++;
      this.lastError = String(error);
      projectionMetrics.failures.inc({ projection: this.definition.name });
      throw error;
    }
    this.consecutiveFailures = 0;
    this.lastError = undefined;
    const now = this.deps.clock?.() ?? Date.now();
    const projection = this.definition.name;
    projectionMetrics.batchSize.observe({ projection }, messages.length);
    for (const message of messages) {
      const lag = Math.max(0, now - Date.parse(message.recordedAt)) / 1000;
      projectionMetrics.lag.observe({ projection }, lag);
      if (message === messages[messages.length - 1]) projectionMetrics.lastLag.set({ projection }, lag);
    }
    for (const parked of result.parked) {
      this.deps.logger.error({
        msg: 'projection parked a stream: an event cannot be applied; the stream waits for an operator retry',
        projection,
        streamId: parked.message.key,
        eventId: parked.message.id,
        revision: parked.message.revision,
        type: parked.message.type,
        error: parked.error,
      });
    }
    if (result.parked.length > 0) await this.refreshParkedCount();
    this.committed(result.changed);
  }

  private async applyBatch(
    em: EntityManager,
    messages: readonly BusMessage[],
    isolate: boolean | 'parking_transient',
    histories: ReadonlyMap<string, StreamHistory>,
  ): Promise<{ changed: BusMessage[]; parked: ParkedNow[] }> {
    const projection = this.definition.name;
    const keys = [...new Set(messages.map((m) => m.key))];
    // Only the member handling a stream parks it, and a member counts the parked rows again on each partition
    // assignment, so with none counted the lock query is skipped; a retry only ever removes rows.
    const rows: Array<{ stream_id: string }> =
      this.parkedCount === 0 && !isolate
        ? []
        : await em.query(
            'SELECT stream_id FROM parked_streams WHERE projection = $1 AND stream_id = ANY($2::text[]) FOR UPDATE',
            [projection, keys],
          );
    const parkedKeys = new Set(rows.map((r) => r.stream_id));
    const waiting = new Map<string, number>();
    const changed: BusMessage[] = [];
    const parked: ParkedNow[] = [];
    const applyAll = this.definition.applyBatch?.bind(this.definition);
    if (applyAll && !isolate) {
      const ready: BusMessage[] = [];
      for (const message of messages) {
        if (parkedKeys.has(message.key))
          waiting.set(message.key, Math.max(waiting.get(message.key) ?? -1, message.revision));
        else ready.push(message);
      }
      if (ready.length > 0) changed.push(...(await applyAll(em, ready, histories)));
    }
    for (const message of applyAll && !isolate ? [] : messages) {
      if (parkedKeys.has(message.key)) {
        waiting.set(message.key, Math.max(waiting.get(message.key) ?? -1, message.revision));
        continue;
      }
      if (!isolate) {
        if (await this.definition.apply(em, message, histories.get(message.id))) changed.push(message);
        continue;
      }
      const failure = await this.applyIsolated(
        em,
        message,
        changed,
        histories,
        isolate === 'parking_transient',
      );
      if (failure === undefined) continue;
      const [base] = this.transientRetry;
      await em.query(
        `INSERT INTO parked_streams (projection, stream_id, event_id, revision, event_type, error, retry_requested_at)
         VALUES ($1, $2, $3, $4, $5, $6, CASE WHEN $7 THEN now() + $8::float8 * interval '1 millisecond' END)
         ON CONFLICT (projection, stream_id) DO NOTHING`,
        [
          projection,
          message.key,
          message.id,
          message.revision,
          message.type,
          failure.text,
          failure.transient,
          base,
        ],
      );
      parkedKeys.add(message.key);
      parked.push({ message, error: failure.text });
    }
    for (const [key, revision] of waiting) {
      await em.query(
        `UPDATE parked_streams SET waiting_revision = GREATEST(coalesce(waiting_revision, -1), $3)
          WHERE projection = $1 AND stream_id = $2`,
        [projection, key, revision],
      );
    }
    const waited = messages.filter((m) => waiting.has(m.key)).length;
    const applied = messages.length - waited - parked.length;
    if (applied > 0) projectionMetrics.events.inc({ projection, outcome: 'applied' }, applied);
    if (parked.length > 0) projectionMetrics.events.inc({ projection, outcome: 'parked' }, parked.length);
    if (waited > 0) projectionMetrics.events.inc({ projection, outcome: 'waiting' }, waited);
    return { changed, parked };
  }

  /**
   * Each message's stream history through it, when the projection asks for it: one read per stream, before any
   * transaction opens. A stream that does not hold the message at its revision is an error (the batch is retried).
   */
  private async histories(messages: readonly BusMessage[]): Promise<Map<string, StreamHistory>> {
    const histories = new Map<string, StreamHistory>();
    if (!this.definition.needsHistory) return histories;
    const newest = new Map<string, number>();
    for (const m of messages) newest.set(m.key, Math.max(newest.get(m.key) ?? -1, m.revision));
    for (const [key, revision] of newest) {
      const stream = revision === 0 ? [] : await this.deps.store.readStream(key, { maxCount: revision + 1 });
      for (const m of messages) {
        if (m.key !== key) continue;
        if (m.revision === 0) {
          histories.set(m.id, [m]);
          continue;
        }
        const history = stream.slice(0, m.revision + 1);
        if (history.length !== m.revision + 1 || history.at(-1)?.id !== m.id)
          throw new Error(`stream ${key} has no event ${m.id} at revision ${m.revision}`);
        histories.set(m.id, history);
      }
    }
    return histories;
  }

  /**
   * The batch as the definition's one statement, in an implicit transaction (one round trip), when it gives one and
   * no stream is parked (only the member handling a stream parks it, so none can be parked meanwhile). With
   * asyncCommit, the statement turns off its own commit's flush wait (`set_config(..., true)` lasts until the end of
   * its transaction, which is the commit), as the batch transaction's `SET LOCAL` does; the session is unchanged.
   */
  private async applyStatement(
    messages: readonly BusMessage[],
    histories: ReadonlyMap<string, StreamHistory>,
  ): Promise<{ changed: BusMessage[]; parked: ParkedNow[] } | undefined> {
    if (this.parkedCount !== 0) return undefined;
    const statement = this.definition.batchStatement?.(messages, histories);
    if (!statement) return undefined;
    const sql = this.deps.asyncCommit
      ? `WITH projection_batch AS (${statement.sql})
         SELECT * FROM projection_batch WHERE (SELECT set_config('synchronous_commit', 'off', true)) IS NOT NULL`
      : statement.sql;
    const rows: unknown[] = await this.deps.dataSource.query(sql, [...statement.params]);
    projectionMetrics.events.inc({ projection: this.definition.name, outcome: 'applied' }, messages.length);
    return { changed: statement.changed(rows), parked: [] };
  }

  /** A batch's transaction; with asyncCommit its BEGIN also turns off the commit's flush wait (one round trip). */
  private async batchTransaction<T>(work: (em: EntityManager) => Promise<T>): Promise<T> {
    if (!this.deps.asyncCommit) return this.deps.dataSource.transaction(work);
    const runner = this.deps.dataSource.createQueryRunner();
    await runner.connect();
    try {
      await runner.query('BEGIN; SET LOCAL synchronous_commit TO off');
      try {
        const result = await insideTransaction(() => work(runner.manager));
        await runner.query('COMMIT');
        return result;
      } catch (error) {
        await runner.query('ROLLBACK').catch(() => undefined);
        throw error;
      }
    } finally {
      await runner.release();
    }
  }

  /** Applies one message under a savepoint; the error text when it fails for a reason of its own. */
  private async applyIsolated(
    em: EntityManager,
    message: BusMessage,
    changed: BusMessage[],
    histories: ReadonlyMap<string, StreamHistory>,
    parkTransient = false,
  ): Promise<{ text: string; transient: boolean } | undefined> {
    await em.query('SAVEPOINT projection_event');
    try {
      if (await this.definition.apply(em, message, histories.get(message.id))) changed.push(message);
      await em.query('RELEASE SAVEPOINT projection_event');
      return undefined;
    } catch (error) {
      // If even the rollback to the savepoint fails, the connection is gone: the whole batch is retried.
      await em.query('ROLLBACK TO SAVEPOINT projection_event');
      // The rollback answered, so the connection works: after transient failures in a row, this event is the cause.
      if (isConnectionLoss(error) || (isTransient(error) && !parkTransient)) throw error;
      return {
        text: error instanceof Error ? `${error.name}: ${error.message}` : String(error),
        transient: isTransient(error),
      };
    }
  }

  private committed(changed: readonly BusMessage[]): void {
    if (changed.length === 0) return;
    try {
      this.definition.onCommitted?.(changed);
    } catch (error) {
      this.deps.logger.warn({ msg: 'onCommitted failed', projection: this.name, error: String(error) });
    }
  }

  private async refreshParkedCount(): Promise<void> {
    const read = ++this.parkedReads;
    const rows: Array<{ n: number }> = await this.deps.dataSource.query(
      'SELECT count(*)::int AS n FROM parked_streams WHERE projection = $1',
      [this.definition.name],
    );
    this.parkedCounted(read, rows[0]?.n ?? 0);
  }

  /**
   * Takes the count a read found, unless a read sent after it was already taken: the poll's read may be sent before
   * a batch of this process parks a stream and answer after the count read once that batch committed; taking its
   * older zero then would skip the row lock, and a later event of the parked stream would apply past it.
   */
  private parkedCounted(read: number, count: number): void {
    if (read < this.parkedCountRead) return;
    this.parkedCountRead = read;
    this.parkedCount = count;
    projectionMetrics.parked.set({ projection: this.definition.name }, count);
  }
}

interface ParkedNow {
  readonly message: BusMessage;
  readonly error: string;
}

/** Every parked stream (of one projection, or of all), oldest first. */
export async function listParkedStreams(
  dataSource: Pick<DataSource, 'query'>,
  projection?: string,
): Promise<ParkedStream[]> {
  const rows: Array<{
    projection: string;
    stream_id: string;
    source_stream_id: string | null;
    event_id: string;
    revision: number;
    event_type: string;
    error: string;
    parked_at: Date;
    attempts: number;
    waiting_revision: number | null;
    retry_requested_at: Date | null;
  }> = await dataSource.query(
    `SELECT * FROM parked_streams WHERE ($1::text IS NULL OR projection = $1) ORDER BY parked_at, projection, stream_id`,
    [projection ?? null],
  );
  return rows.map((r) => ({
    projection: r.projection,
    streamId: r.stream_id,
    sourceStreamId: r.source_stream_id,
    eventId: r.event_id,
    revision: r.revision,
    eventType: r.event_type,
    error: r.error,
    parkedAt: new Date(r.parked_at).toISOString(),
    attempts: r.attempts,
    waitingRevision: r.waiting_revision,
    retryRequestedAt: r.retry_requested_at ? new Date(r.retry_requested_at).toISOString() : null,
  }));
}

/** Marks a parked stream for retry by the process running its projection; false when it is not parked. */
export async function requestParkedStreamRetry(
  dataSource: Pick<DataSource, 'query'>,
  projection: string,
  streamId: string,
): Promise<boolean> {
  const rows: unknown[] = await dataSource.query(
    `UPDATE parked_streams SET retry_requested_at = now() WHERE projection = $1 AND stream_id = $2 RETURNING stream_id`,
    [projection, streamId],
  );
  // TypeORM returns [rows, rowCount] for UPDATE on Postgres.
  const affected = Array.isArray(rows[0]) ? (rows[0] as unknown[]).length : rows.length;
  return affected > 0;
}

/** The projections running in this process: for /ready, /metrics and the operator routes. */
export class ProjectionRegistry {
  private readonly runners = new Map<string, ProjectionRunner>();

  add(runner: ProjectionRunner): void {
    this.runners.set(runner.name, runner);
  }

  remove(runner: ProjectionRunner): void {
    if (this.runners.get(runner.name) === runner) this.runners.delete(runner.name);
  }

  get(name: string): ProjectionRunner | undefined {
    return this.runners.get(name);
  }

  all(): ProjectionRunner[] {
    return [...this.runners.values()];
  }

  /**
   * Readiness: a stalled projection makes the process not ready (its reads would lag without bound); parked
   * streams leave it ready but degraded (every other merchant is served), named in the details.
   */
  readiness(): { readonly stalled: string[]; readonly degraded: string[] } {
    const stalled: string[] = [];
    const degraded: string[] = [];
    for (const runner of this.runners.values()) {
      const status = runner.status();
      if (status.stalled) stalled.push(`${status.name} stalled: ${status.lastError ?? 'failing'}`);
      if (status.parkedStreams > 0) degraded.push(`${status.name}: ${status.parkedStreams} parked stream(s)`);
    }
    return { stalled, degraded };
  }
}
