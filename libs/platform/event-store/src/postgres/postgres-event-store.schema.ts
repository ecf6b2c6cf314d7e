import type { Pool } from 'pg';
import { applySqlMigrations, type SqlMigration } from '../sql-migrations';

/**
 * The event store's schema, forward-only. Never edit a released step: add the next version.
 *
 * - `events` is append-only. `global_position` comes from an identity column; `transaction_id` is the writing
 *   transaction's id (version 2), and the log order readers follow is (transaction_id, global_position), see
 *   PostgresEventStore. Rows written before version 2 carry transaction id 0, so they keep their old order, in
 *   front of everything newer. `category` is stored (not derived at read time) so category reads use an index.
 * - `subscription_checkpoints` holds each durable subscription's last handled position.
 */
export const EVENT_STORE_MIGRATIONS: readonly SqlMigration[] = [
  {
    version: 1,
    name: 'events and subscription checkpoints',
    sql: `
      CREATE TABLE events (
        global_position bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        event_id        text        NOT NULL,
        stream_id       text        NOT NULL,
        category        text        NOT NULL,
        revision        integer     NOT NULL CHECK (revision >= 0),
        type            text        NOT NULL,
        data            jsonb       NOT NULL,
        metadata        jsonb       NOT NULL DEFAULT '{}'::jsonb,
        recorded_at     timestamptz NOT NULL,
        CONSTRAINT events_event_id_key UNIQUE (event_id),
        CONSTRAINT events_stream_revision_key UNIQUE (stream_id, revision)
      );
      CREATE INDEX events_category_position_idx ON events (category, global_position);

      CREATE TABLE subscription_checkpoints (
        subscription_id text        PRIMARY KEY,
        position        bigint      NOT NULL DEFAULT 0,
        updated_at      timestamptz NOT NULL DEFAULT now()
      );
    `,
  },
  {
    version: 2,
    name: 'events record their writing transaction id',
    // Adding the column with a constant default rewrites nothing and gives existing rows 0; only then does the
    // default become the writer's transaction id, so every later insert records its own.
    sql: `
      ALTER TABLE events ADD COLUMN transaction_id xid8 NOT NULL DEFAULT '0'::xid8;
      ALTER TABLE events ALTER COLUMN transaction_id SET DEFAULT pg_current_xact_id();
      CREATE INDEX events_log_order_idx ON events (transaction_id, global_position);
      CREATE INDEX events_category_log_order_idx ON events (category, transaction_id, global_position);
      DROP INDEX events_category_position_idx;
    `,
  },
];

/** Creates or upgrades the event store tables; idempotent and safe to run from several processes at once. */
export async function migrateEventStore(pool: Pool): Promise<number[]> {
  return applySqlMigrations(pool, 'event_store', EVENT_STORE_MIGRATIONS);
}
