import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The durable delivery schedule. One row per webhook event (the event itself, its delivery state and the lease
 * of the dispatcher working on it) and one row per attempt. `due_at` is the earlier of the next scheduled
 * attempt and a pending manual redelivery; the dispatcher claims rows whose `due_at` has come and whose lease
 * is free or expired, so a dispatcher that dies mid-schedule loses nothing: its leases expire and another
 * process (or the restarted one) carries on from the stored state.
 */
export class CreateWebhookEvents1763900000500 implements MigrationInterface {
  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE webhook_events (
      seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
      id text PRIMARY KEY,
      merchant_id text NOT NULL,
      type text NOT NULL,
      created_at timestamptz NOT NULL,
      data jsonb NOT NULL,
      source text NOT NULL,
      source_topic text NOT NULL,
      source_event_id text NOT NULL,
      source_stream text NOT NULL,
      source_revision integer NOT NULL,
      read_model_confirmed boolean NOT NULL DEFAULT false,
      delivery_status text NOT NULL CHECK (delivery_status IN ('pending', 'delivered', 'failed', 'abandoned', 'not_selected')),
      attempt_count integer NOT NULL DEFAULT 0,
      scheduled_attempts integer NOT NULL DEFAULT 0,
      next_attempt_at timestamptz,
      redelivery_requested_at timestamptz,
      due_at timestamptz GENERATED ALWAYS AS (LEAST(next_attempt_at, redelivery_requested_at)) STORED,
      last_attempt_at timestamptz,
      last_response_status integer,
      last_error text,
      delivered_at timestamptz,
      lease_token text,
      lease_expires_at timestamptz,
      recorded_at timestamptz NOT NULL
    ) WITH (fillfactor = 70)`);
    // The claim's skip-scan over merchants with scheduled work, then each merchant's earliest due rows.
    await q.query(
      'CREATE INDEX webhook_events_merchant_due_idx ON webhook_events (merchant_id, due_at, seq) WHERE due_at IS NOT NULL',
    );
    await q.query('CREATE INDEX webhook_events_merchant_seq_idx ON webhook_events (merchant_id, seq)');
    await q.query(
      'CREATE INDEX webhook_events_merchant_status_seq_idx ON webhook_events (merchant_id, delivery_status, seq)',
    );
    await q.query(
      'CREATE INDEX webhook_events_merchant_type_seq_idx ON webhook_events (merchant_id, type, seq)',
    );
    // No foreign key to webhook_events: attempts are written only beside their event's state, and the check
    // would cost a lookup per attempt on the hottest statement.
    await q.query(`CREATE TABLE webhook_delivery_attempts (
      event_id text NOT NULL,
      attempt_number integer NOT NULL,
      merchant_id text NOT NULL,
      trigger text NOT NULL CHECK (trigger IN ('scheduled', 'manual')),
      attempted_at timestamptz NOT NULL,
      url text,
      response_status integer,
      error text,
      duration_ms integer,
      response_excerpt text,
      PRIMARY KEY (event_id, attempt_number)
    )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE webhook_delivery_attempts');
    await q.query('DROP TABLE webhook_events');
  }
}

/**
 * Room on each page for the claim's lease: a claim takes rows recorded together (neighbours on a page) and writes
 * a lease on each, which touches no indexed column and is a HOT update (no index entry) only when the new version
 * fits on the row's page. With 70% filled, most of a page's rows moved to another page and got a new entry in every
 * index (six); at 40% every lease fits. Rows that are delivered take no more room than before (the result written
 * after the attempt moves the row anyway: it changes indexed columns); rows never claimed (`not_selected`) take
 * ~1.75 times the heap they took at 70%. Applies to pages filled from now on; existing rows keep their pages.
 */
export class WebhookEventsRoomForLeases1795449600500 implements MigrationInterface {
  async up(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE webhook_events SET (fillfactor = 40)');
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE webhook_events SET (fillfactor = 70)');
  }
}

/**
 * Drops the unique index on `seq`, which no statement reads: the claim goes through the due index, the list and its
 * cursors through `(merchant_id, ...)` indexes and the primary key. Every recorded event and every result write (a
 * non-HOT update: it changes indexed columns) added an entry to it. `seq` stays an identity column, unique by
 * construction (`GENERATED ALWAYS`: no statement supplies it). On an existing database the drop takes the table's
 * lock for a moment; events in flight keep their leases and rows.
 */
export class WebhookEventsDropSeqIndex1795536000500 implements MigrationInterface {
  async up(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE webhook_events DROP CONSTRAINT IF EXISTS webhook_events_seq_key');
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE webhook_events ADD CONSTRAINT webhook_events_seq_key UNIQUE (seq)');
  }
}

export const WEBHOOKS_MIGRATIONS = [
  CreateWebhookEvents1763900000500,
  WebhookEventsRoomForLeases1795449600500,
  WebhookEventsDropSeqIndex1795536000500,
];
