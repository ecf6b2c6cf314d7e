import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The subscription checkout read model: one row per intent, projected from its stream. `object` is the latest
 * subscription checkout object (as the events carry it); the other columns serve lists, filters and the timer.
 * `seq` orders lists (SPEC Pagination: newest first, keyset cursors); `revision` makes the projection idempotent.
 * The partial index on pending expiries is the durable timer's queue.
 */
export class CreateSubscriptionCheckouts1767300000100 implements MigrationInterface {
  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE subscription_checkouts (
      id text PRIMARY KEY,
      seq bigserial NOT NULL UNIQUE,
      merchant_id text NOT NULL,
      mode text NOT NULL CHECK (mode IN ('test', 'live')),
      status text NOT NULL CHECK (status IN ('pending', 'completed', 'cancelled', 'expired')),
      external_customer_id text,
      created_at timestamptz NOT NULL,
      expires_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL,
      object jsonb NOT NULL,
      revision integer NOT NULL
    )`);
    await q.query(
      'CREATE INDEX subscription_checkouts_merchant_seq ON subscription_checkouts (merchant_id, seq)',
    );
    await q.query(
      'CREATE INDEX subscription_checkouts_merchant_status_seq ON subscription_checkouts (merchant_id, status, seq)',
    );
    await q.query(
      'CREATE INDEX subscription_checkouts_merchant_customer_seq ON subscription_checkouts (merchant_id, external_customer_id, seq)',
    );
    await q.query(
      `CREATE INDEX subscription_checkouts_pending_expiry ON subscription_checkouts (expires_at) WHERE status = 'pending'`,
    );
  }
  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE subscription_checkouts');
  }
}

export const SUBSCRIPTIONS_MIGRATIONS = [CreateSubscriptionCheckouts1767300000100];
