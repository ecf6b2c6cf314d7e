import { Inject, Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { type Clause, keysetPage } from '@stablepay/http';
import { PooledStatements } from '@stablepay/node-util';
import {
  type AttemptTrigger,
  type DeliveryErrorCode,
  type DeliveryState,
  type DeliveryStatus,
  type WebhookAttemptView,
  type WebhookEventData,
  type WebhookEventListQuery,
  type WebhookEventView,
} from '@stablepay/webhooks-domain';
import type { RecordedWebhookEvent } from './sources';

/** A `webhook_events` row as pg returns it. */
export interface WebhookEventRow {
  seq: string;
  id: string;
  merchant_id: string;
  type: string;
  created_at: Date;
  data: WebhookEventData;
  source: string;
  source_topic: string;
  source_event_id: string;
  source_stream: string;
  source_revision: number;
  read_model_confirmed: boolean;
  delivery_status: DeliveryStatus;
  attempt_count: number;
  scheduled_attempts: number;
  next_attempt_at: Date | null;
  redelivery_requested_at: Date | null;
  due_at: Date | null;
  last_attempt_at: Date | null;
  last_response_status: number | null;
  last_error: DeliveryErrorCode | null;
  delivered_at: Date | null;
  lease_token: string | null;
  lease_expires_at: Date | null;
  recorded_at: Date;
}

/** The delivery state's columns (`stateOf`). */
type StateColumns = Pick<
  WebhookEventRow,
  | 'delivery_status'
  | 'attempt_count'
  | 'scheduled_attempts'
  | 'next_attempt_at'
  | 'redelivery_requested_at'
  | 'last_attempt_at'
  | 'last_response_status'
  | 'last_error'
  | 'delivered_at'
>;

/**
 * A claimed row: what the dispatcher reads of an event to attempt it, and no more (node-postgres parses every
 * column it is sent; a claim returns thousands of rows while a backlog drains). `data_json` is the jsonb column's
 * text, sent inside the envelope as it is (`serializeRecordedEnvelope`) and parsed only where a source needs the
 * event (`recordedEventOf`).
 */
export type ClaimedEventRow = Pick<
  WebhookEventRow,
  | 'id'
  | 'merchant_id'
  | 'type'
  | 'created_at'
  | 'source'
  | 'source_topic'
  | 'source_event_id'
  | 'source_stream'
  | 'source_revision'
  | 'read_model_confirmed'
> &
  StateColumns & { readonly data_json: string };

/** The outcome of a manual redelivery request. */
export type RedeliveryRequest =
  | { readonly kind: 'requested'; readonly event: WebhookEventView }
  /** One was already pending or in flight: nothing changed. */
  | { readonly kind: 'in_progress'; readonly event: WebhookEventView }
  | { readonly kind: 'not_found' };

/** The columns of a ClaimedEventRow, as the claim returns them. */
const CLAIMED_COLUMNS = `e.id, e.merchant_id, e.type, e.created_at, e.data::text AS data_json, e.source, e.source_topic,
  e.source_event_id, e.source_stream, e.source_revision, e.read_model_confirmed, e.delivery_status, e.attempt_count,
  e.scheduled_attempts, e.next_attempt_at, e.redelivery_requested_at, e.last_attempt_at, e.last_response_status,
  e.last_error, e.delivered_at`;

interface AttemptRow {
  attempt_number: number;
  trigger: AttemptTrigger;
  attempted_at: Date;
  url: string | null;
  response_status: number | null;
  error: DeliveryErrorCode | null;
  duration_ms: number | null;
  response_excerpt: string | null;
}

/** What one finished piece of work writes back: the new state and, when an attempt was made, its record. */
export interface WorkResult {
  readonly eventId: string;
  readonly merchantId: string;
  readonly leaseToken: string;
  /** The manual request as it was when claimed: a newer one made meanwhile is kept, not overwritten. */
  readonly claimedRedeliveryRequestedAt: Date | null;
  readonly state: DeliveryState;
  readonly readModelConfirmed: boolean;
  readonly attempt?: {
    readonly number: number;
    readonly trigger: AttemptTrigger;
    readonly at: Date;
    readonly url: string | null;
    readonly responseStatus: number | null;
    readonly error: DeliveryErrorCode | null;
    readonly durationMs: number | null;
    readonly responseExcerpt: string | null;
  };
}

export interface ClaimRequest {
  readonly now: Date;
  /** Rows to claim at most (the free global slots). */
  readonly limit: number;
  /** Per-merchant slots; a merchant with `busy` deliveries in flight gets `perMerchantLimit - busy` at most. */
  readonly perMerchantLimit: number;
  readonly busy: ReadonlyMap<string, number>;
  /** Events in flight in this process (never claimed twice here, whatever the clock says about leases). */
  readonly inFlight: readonly string[];
  readonly leaseToken: string;
  readonly leaseExpiresAt: Date;
}

/** Results from TypeORM: rows for SELECT, `[rows, count]` for UPDATE/DELETE. */
function rowsOf<T>(result: unknown): T[] {
  if (
    Array.isArray(result) &&
    result.length === 2 &&
    Array.isArray(result[0]) &&
    typeof result[1] === 'number'
  )
    return result[0] as T[];
  return Array.isArray(result) ? (result as T[]) : [];
}

export function stateOf(row: StateColumns): DeliveryState {
  return {
    status: row.delivery_status,
    attemptCount: row.attempt_count,
    scheduledAttempts: row.scheduled_attempts,
    nextAttemptAt: row.next_attempt_at,
    redeliveryRequestedAt: row.redelivery_requested_at,
    lastAttemptAt: row.last_attempt_at,
    lastResponseStatus: row.last_response_status,
    lastError: row.last_error,
    deliveredAt: row.delivered_at,
  };
}

/** The event of a claimed row, `data` parsed (only a source's read-model check needs it). */
export function recordedEventOf(row: ClaimedEventRow): RecordedWebhookEvent {
  return {
    id: row.id,
    merchantId: row.merchant_id,
    type: row.type,
    createdAt: row.created_at,
    data: JSON.parse(row.data_json) as WebhookEventData,
    origin: {
      source: row.source,
      topic: row.source_topic,
      eventId: row.source_event_id,
      streamId: row.source_stream,
      revision: row.source_revision,
    },
  };
}

function viewOf(row: WebhookEventRow): WebhookEventView {
  return {
    id: row.id,
    type: row.type,
    createdAt: row.created_at,
    data: row.data,
    deliveryStatus: row.delivery_status,
    attemptCount: row.attempt_count,
    lastAttemptAt: row.last_attempt_at,
    lastResponseStatus: row.last_response_status,
    lastError: row.last_error,
    nextAttemptAt: row.due_at,
  };
}

const iso = (d: Date | null): string | null => (d === null ? null : d.toISOString());

/** Postgres text cannot hold NUL; other control characters are dropped too (the excerpt is for display). */
export function sanitizeExcerpt(text: string, maxChars: number): string {
  // eslint-disable-next-line no-control-regex
  return text.replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/g, '').slice(0, maxChars);
}

/** The webhook_events / webhook_delivery_attempts tables: the durable schedule and the merchant's event log. */
@Injectable()
export class WebhookEventStore {
  /**
   * The claim and the result write, sent for every batch while a backlog drains, as named prepared statements:
   * parsing and planning the claim cost a third of the database's CPU for it (a generic plan is kept after five).
   */
  private readonly hot: PooledStatements;

  constructor(@Inject(DataSource) private readonly dataSource: DataSource) {
    this.hot = new PooledStatements(dataSource);
  }

  /** Records events once (the id is the deduplication key); returns how many were new. */
  async record(
    events: ReadonlyArray<{
      readonly event: RecordedWebhookEvent;
      readonly state: DeliveryState;
      readonly recordedAt: Date;
    }>,
  ): Promise<number> {
    if (events.length === 0) return 0;
    const payload = events.map(({ event, state, recordedAt }) => ({
      id: event.id,
      merchant_id: event.merchantId,
      type: event.type,
      created_at: event.createdAt.toISOString(),
      data: event.data,
      source: event.origin.source,
      source_topic: event.origin.topic,
      source_event_id: event.origin.eventId,
      source_stream: event.origin.streamId,
      source_revision: event.origin.revision,
      delivery_status: state.status,
      next_attempt_at: iso(state.nextAttemptAt),
      last_error: state.lastError,
      recorded_at: recordedAt.toISOString(),
    }));
    const inserted = rowsOf<{ id: string }>(
      await this.dataSource.query(
        `INSERT INTO webhook_events (id, merchant_id, type, created_at, data, source, source_topic, source_event_id, source_stream,
           source_revision, delivery_status, next_attempt_at, last_error, recorded_at)
         SELECT r.id, r.merchant_id, r.type, r.created_at, r.data, r.source, r.source_topic, r.source_event_id, r.source_stream,
           r.source_revision, r.delivery_status, r.next_attempt_at, r.last_error, r.recorded_at
         FROM jsonb_to_recordset($1::jsonb) AS r(id text, merchant_id text, type text, created_at timestamptz, data jsonb, source text,
           source_topic text, source_event_id text, source_stream text, source_revision integer, delivery_status text,
           next_attempt_at timestamptz, last_error text, recorded_at timestamptz)
         ON CONFLICT (id) DO NOTHING
         RETURNING id`,
        [JSON.stringify(payload)],
      ),
    );
    return inserted.length;
  }

  /**
   * Claims due events under a lease, fairly: every merchant with scheduled work is found by a skip-scan of the
   * (merchant_id, due_at) index, each contributes its earliest due rows up to its free slots, and the claim takes
   * every merchant's first row before anyone's second (ORDER BY rank), so one merchant's backlog or dead endpoint
   * cannot crowd the others out. The cost grows with the number of merchants that have scheduled work, not with the
   * number of due rows. `FOR UPDATE SKIP LOCKED` lets several dispatchers claim at once without blocking each other
   * or taking the same row.
   */
  async claimDue(request: ClaimRequest): Promise<ClaimedEventRow[]> {
    if (request.limit <= 0) return [];
    const busyMerchants = [...request.busy.keys()];
    const busyCounts = busyMerchants.map((m) => request.busy.get(m) ?? 0);
    // The skip-scan orders by the due index's full key: only that index gives this order, so the plan cannot walk
    // (merchant_id, seq) instead, past every delivered event of each merchant, when the statistics were taken
    // while most rows were due (after a backlog) and make both indexes look alike.
    return rowsOf<ClaimedEventRow>(
      await this.hot.query(
        'sp_webhook_claim',
        `WITH RECURSIVE scheduled AS (
           (SELECT e.merchant_id FROM webhook_events e WHERE e.due_at IS NOT NULL
            ORDER BY e.merchant_id, e.due_at, e.seq LIMIT 1)
           UNION ALL
           SELECT (SELECT e.merchant_id FROM webhook_events e
                   WHERE e.due_at IS NOT NULL AND e.merchant_id > s.merchant_id
                   ORDER BY e.merchant_id, e.due_at, e.seq LIMIT 1)
           FROM scheduled s WHERE s.merchant_id IS NOT NULL
         ), busy AS (
           SELECT * FROM unnest($3::text[], $4::integer[]) AS b(merchant_id, n)
         ), picked AS (
           SELECT c.id FROM scheduled s
           LEFT JOIN busy b ON b.merchant_id = s.merchant_id
           CROSS JOIN LATERAL (
             SELECT e.id, e.due_at, e.seq, row_number() OVER (ORDER BY e.due_at, e.seq) AS rank
             FROM webhook_events e
             WHERE e.merchant_id = s.merchant_id AND e.due_at IS NOT NULL AND e.due_at <= $1
               AND (e.lease_expires_at IS NULL OR e.lease_expires_at <= $1)
               AND NOT (e.id = ANY($5::text[]))
             ORDER BY e.due_at, e.seq
             LIMIT GREATEST($6 - COALESCE(b.n, 0), 0)
           ) c
           WHERE s.merchant_id IS NOT NULL
           ORDER BY c.rank, c.due_at, c.seq
           LIMIT $2
         ), locked AS (
           SELECT e.id FROM webhook_events e
           WHERE e.id = ANY(ARRAY(SELECT id FROM picked))
             AND e.due_at <= $1 AND (e.lease_expires_at IS NULL OR e.lease_expires_at <= $1)
           FOR UPDATE OF e SKIP LOCKED
         )
         UPDATE webhook_events e SET lease_token = $7, lease_expires_at = $8
         WHERE e.id = ANY(ARRAY(SELECT id FROM locked))
         RETURNING ${CLAIMED_COLUMNS}`,
        [
          request.now.toISOString(),
          request.limit,
          busyMerchants,
          busyCounts,
          [...request.inFlight],
          request.perMerchantLimit,
          request.leaseToken,
          request.leaseExpiresAt.toISOString(),
        ],
      ),
    );
  }

  /**
   * Writes finished work in one statement (group commit: every result that finished while the previous write ran
   * goes in the next one). A result whose lease was lost (expired and claimed by another dispatcher) does not
   * overwrite the newer owner's state; its attempt is still recorded.
   */
  async writeResults(results: readonly WorkResult[]): Promise<void> {
    if (results.length === 0) return;
    const states = results.map((r) => ({
      id: r.eventId,
      lease_token: r.leaseToken,
      delivery_status: r.state.status,
      attempt_count: r.state.attemptCount,
      scheduled_attempts: r.state.scheduledAttempts,
      next_attempt_at: iso(r.state.nextAttemptAt),
      redelivery_requested_at: iso(r.state.redeliveryRequestedAt),
      claimed_redelivery_requested_at: iso(r.claimedRedeliveryRequestedAt),
      last_attempt_at: iso(r.state.lastAttemptAt),
      last_response_status: r.state.lastResponseStatus,
      last_error: r.state.lastError,
      delivered_at: iso(r.state.deliveredAt),
      read_model_confirmed: r.readModelConfirmed,
    }));
    const attempts = results.flatMap((r) =>
      r.attempt
        ? [
            {
              event_id: r.eventId,
              attempt_number: r.attempt.number,
              merchant_id: r.merchantId,
              trigger: r.attempt.trigger,
              attempted_at: r.attempt.at.toISOString(),
              url: r.attempt.url,
              response_status: r.attempt.responseStatus,
              error: r.attempt.error,
              duration_ms: r.attempt.durationMs === null ? null : Math.round(r.attempt.durationMs),
              response_excerpt: r.attempt.responseExcerpt,
            },
          ]
        : [],
    );
    await this.hot.query(
      'sp_webhook_results',
      `WITH r AS (
         SELECT * FROM jsonb_to_recordset($1::jsonb) AS r(id text, lease_token text, delivery_status text, attempt_count integer,
           scheduled_attempts integer, next_attempt_at timestamptz, redelivery_requested_at timestamptz,
           claimed_redelivery_requested_at timestamptz, last_attempt_at timestamptz, last_response_status integer, last_error text,
           delivered_at timestamptz, read_model_confirmed boolean)
       ), attempts AS (
         INSERT INTO webhook_delivery_attempts (event_id, attempt_number, merchant_id, trigger, attempted_at, url, response_status, error,
           duration_ms, response_excerpt)
         SELECT a.event_id, a.attempt_number, a.merchant_id, a.trigger, a.attempted_at, a.url, a.response_status, a.error, a.duration_ms,
           a.response_excerpt
         FROM jsonb_to_recordset($2::jsonb) AS a(event_id text, attempt_number integer, merchant_id text, trigger text,
           attempted_at timestamptz, url text, response_status integer, error text, duration_ms integer, response_excerpt text)
         ON CONFLICT (event_id, attempt_number) DO NOTHING
         RETURNING event_id
       )
       UPDATE webhook_events e SET
         delivery_status = r.delivery_status,
         attempt_count = r.attempt_count,
         scheduled_attempts = r.scheduled_attempts,
         next_attempt_at = r.next_attempt_at,
         redelivery_requested_at = CASE
           WHEN e.redelivery_requested_at IS DISTINCT FROM r.claimed_redelivery_requested_at THEN e.redelivery_requested_at
           ELSE r.redelivery_requested_at END,
         last_attempt_at = r.last_attempt_at,
         last_response_status = r.last_response_status,
         last_error = r.last_error,
         delivered_at = r.delivered_at,
         read_model_confirmed = e.read_model_confirmed OR r.read_model_confirmed,
         lease_token = NULL,
         lease_expires_at = NULL
       FROM r WHERE e.id = ANY($3::text[]) AND e.id = r.id AND e.lease_token = r.lease_token`,
      [JSON.stringify(states), JSON.stringify(attempts), results.map((r) => r.eventId)],
    );
  }

  /** Gives leases back unworked (shutdown before an attempt started), so the next claim need not wait for expiry. */
  async releaseLeases(eventIds: readonly string[], leaseTokens: readonly string[]): Promise<void> {
    if (eventIds.length === 0) return;
    await this.dataSource.query(
      `UPDATE webhook_events e SET lease_token = NULL, lease_expires_at = NULL
       FROM unnest($1::text[], $2::text[]) AS r(id, lease_token) WHERE e.id = r.id AND e.lease_token = r.lease_token`,
      [[...eventIds], [...leaseTokens]],
    );
  }

  /** SPEC Pagination over the merchant's events, newest first, filtered by type and delivery status. */
  async list(query: WebhookEventListQuery): Promise<{ rows: WebhookEventView[]; hasMore: boolean }> {
    const filters: Clause[] = [];
    if (query.type !== undefined) filters.push((p) => `type = ${p(query.type)}`);
    if (query.deliveryStatus !== undefined)
      filters.push((p) => `delivery_status = ${p(query.deliveryStatus)}`);
    const page = await keysetPage<WebhookEventRow>(this.dataSource, {
      table: 'webhook_events',
      scope: [(p) => `merchant_id = ${p(query.merchantId)}`],
      filters,
      query: {
        limit: query.limit,
        ...(query.startingAfter !== undefined ? { startingAfter: query.startingAfter } : {}),
        ...(query.endingBefore !== undefined ? { endingBefore: query.endingBefore } : {}),
      },
    });
    return { rows: page.rows.map(viewOf), hasMore: page.hasMore };
  }

  async find(merchantId: string, eventId: string): Promise<WebhookEventRow | undefined> {
    const rows = rowsOf<WebhookEventRow>(
      await this.dataSource.query('SELECT * FROM webhook_events WHERE merchant_id = $1 AND id = $2', [
        merchantId,
        eventId,
      ]),
    );
    return rows[0];
  }

  async get(
    merchantId: string,
    eventId: string,
  ): Promise<{ event: WebhookEventView; attempts: WebhookAttemptView[] } | null> {
    const row = await this.find(merchantId, eventId);
    if (!row) return null;
    const attempts = rowsOf<AttemptRow>(
      await this.dataSource.query(
        `SELECT attempt_number, trigger, attempted_at, url, response_status, error, duration_ms, response_excerpt
         FROM webhook_delivery_attempts WHERE event_id = $1 ORDER BY attempt_number DESC LIMIT 100`,
        [eventId],
      ),
    );
    return {
      event: viewOf(row),
      attempts: attempts.map((a) => ({
        attemptNumber: a.attempt_number,
        trigger: a.trigger,
        attemptedAt: a.attempted_at,
        url: a.url,
        responseStatus: a.response_status,
        error: a.error,
        durationMs: a.duration_ms,
        responseExcerpt: a.response_excerpt,
      })),
    };
  }

  /**
   * A manual redelivery: one more attempt due now, beside whatever schedule the event has. One at a time per event:
   * while one is pending or in flight (`redeliveryInProgress`: `redelivery_requested_at` is set) nothing changes and
   * `in_progress` says so. The check and the write are one conditional UPDATE, so concurrent requests from any
   * gateway or process are serialised on the row and exactly one wins; the losers hold no lock afterwards (a
   * SELECT ... FOR UPDATE per request did, and the dispatcher's claim, which skips locked rows, passed the event by
   * until its next poll).
   */
  async requestRedelivery(merchantId: string, eventId: string, now: Date): Promise<RedeliveryRequest> {
    // `redelivery_requested_at IS NULL` is webhooks-domain's `redeliveryInProgress` (false), said in SQL.
    const updated = rowsOf<WebhookEventRow>(
      await this.dataSource.query(
        `UPDATE webhook_events SET redelivery_requested_at = $3
         WHERE merchant_id = $1 AND id = $2 AND redelivery_requested_at IS NULL RETURNING *`,
        [merchantId, eventId, now.toISOString()],
      ),
    );
    const requested = updated[0];
    if (requested) return { kind: 'requested', event: viewOf(requested) };
    const row = await this.find(merchantId, eventId);
    // A row found here had one pending or in flight when the UPDATE ran (it may have been written back since).
    return row ? { kind: 'in_progress', event: viewOf(row) } : { kind: 'not_found' };
  }
}
