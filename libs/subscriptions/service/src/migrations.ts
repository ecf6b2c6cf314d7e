import type { MigrationInterface, QueryRunner } from 'typeorm';
import { createIndexConcurrently, queryWithBoundedLockWait } from '@stablepay/database';
import { CreateChargeQuotes1767400000200 } from './charges/charge-quotes';

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

/**
 * The Subscription read model (one row per on-chain subscription, projected from `subscription-<id>`) and the
 * merchants' deployed subscription managers (which manager belongs to whom: the chain observation consumer maps a
 * manager's logs to its merchant through it). `object` is the subscription object as of the row's revision; the
 * window columns let a read bring the time-dependent fields to chain time. The intents' on-chain ids are indexed so a
 * `SubscriptionCreated` finds its intent.
 */
export class CreateSubscriptions1767400000310 implements MigrationInterface {
  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE subscriptions (
      id text PRIMARY KEY,
      seq bigserial NOT NULL UNIQUE,
      merchant_id text NOT NULL,
      mode text NOT NULL CHECK (mode IN ('test', 'live')),
      checkout_id text,
      chain text NOT NULL,
      subscriber text NOT NULL,
      status text NOT NULL CHECK (status IN ('active', 'cancelling', 'cancelled')),
      external_customer_id text,
      started_at bigint NOT NULL,
      period_duration bigint NOT NULL,
      window_index numeric(78, 0) NOT NULL,
      window_spent numeric(78, 0) NOT NULL,
      budget numeric(78, 0) NOT NULL,
      object jsonb NOT NULL,
      revision integer NOT NULL,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL
    )`);
    await q.query('CREATE INDEX subscriptions_merchant_seq ON subscriptions (merchant_id, seq)');
    await q.query(
      'CREATE INDEX subscriptions_merchant_subscriber_seq ON subscriptions (merchant_id, subscriber, seq)',
    );
    await q.query('CREATE UNIQUE INDEX subscriptions_checkout ON subscriptions (checkout_id)');
    await q.query(`CREATE TABLE subscription_managers (
      merchant_id text NOT NULL,
      chain text NOT NULL,
      address text NOT NULL,
      mode text NOT NULL CHECK (mode IN ('test', 'live')),
      merchant_pauser text NOT NULL,
      deploy_tx_hash text,
      deployed_at timestamptz NOT NULL,
      PRIMARY KEY (merchant_id, chain)
    )`);
    await q.query(
      'CREATE UNIQUE INDEX subscription_managers_address ON subscription_managers (chain, address)',
    );
    await q.query(
      `CREATE INDEX subscription_checkouts_onchain_id ON subscription_checkouts ((lower(object->>'onchain_id')))`,
    );
  }
  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP INDEX subscription_checkouts_onchain_id');
    await q.query('DROP TABLE subscription_managers');
    await q.query('DROP TABLE subscriptions');
  }
}

/**
 * Which subscription fact each manager observation of the indexer reported (by the observation's event id), so an
 * ObservationRetracted (which names only the observation) can undo that fact (docs/subscriptions.md, Reorgs).
 */
export class CreateSubscriptionChainObservations1767600000100 implements MigrationInterface {
  name = 'CreateSubscriptionChainObservations1767600000100';
  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE subscription_chain_observations (
      observation_id text PRIMARY KEY,
      chain text NOT NULL,
      contract text NOT NULL,
      event text NOT NULL,
      subscription_id text,
      tx_hash text NOT NULL,
      args jsonb NOT NULL,
      retracted_at timestamptz
    )`);
  }
  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE subscription_chain_observations');
  }
}

/**
 * Where each remembered manager log was seen (`block_number`, `block_hash`; null on rows from before) and who saw it
 * (`written_by`: `indexer` for the indexer's observations, `api` for a receipt the API path read itself). An `api`
 * row is open (`settled_at` null) until the indexer's observation of the same transaction in the same block arrives
 * or the receipt's block is found orphaned (SubscriptionReceiptChecks): a reorg that took out a block the indexer
 * had not read yet (it reads INDEXER_CONFIRMATIONS behind the head) left the API path's charge or subscribe recorded
 * for good before.
 */
export class AddSubscriptionObservationBlocks1795622400100 implements MigrationInterface {
  name = 'AddSubscriptionObservationBlocks1795622400100';
  // Outside a transaction, so that its indexes are built CONCURRENTLY (createIndexConcurrently): every charge and
  // subscribe writes subscription_chain_observations, and a plain CREATE INDEX stopped those writes for the build.
  // Each statement is safe to run again alone (IF NOT EXISTS; the columns' defaults are constant or now(), stored
  // without a rewrite). A database that ran this migration's earlier text (one transaction, plain CREATE INDEX) has
  // the same columns and indexes.
  readonly transaction = false;
  async up(q: QueryRunner): Promise<void> {
    await queryWithBoundedLockWait(
      q,
      `ALTER TABLE subscription_chain_observations
      ADD COLUMN IF NOT EXISTS block_number bigint,
      ADD COLUMN IF NOT EXISTS block_hash text,
      ADD COLUMN IF NOT EXISTS written_by text NOT NULL DEFAULT 'indexer',
      ADD COLUMN IF NOT EXISTS remembered_at timestamptz NOT NULL DEFAULT now(),
      ADD COLUMN IF NOT EXISTS settled_at timestamptz`,
    );
    await createIndexConcurrently(
      q,
      'subscription_chain_observations_open_receipts',
      `ON subscription_chain_observations (remembered_at, observation_id)
        WHERE written_by = 'api' AND settled_at IS NULL AND retracted_at IS NULL`,
    );
    await createIndexConcurrently(
      q,
      'subscription_chain_observations_tx',
      'ON subscription_chain_observations (lower(tx_hash))',
    );
  }
  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP INDEX IF EXISTS subscription_chain_observations_tx');
    await q.query('DROP INDEX IF EXISTS subscription_chain_observations_open_receipts');
    await q.query(`ALTER TABLE subscription_chain_observations
      DROP COLUMN IF EXISTS settled_at, DROP COLUMN IF EXISTS remembered_at, DROP COLUMN IF EXISTS written_by,
      DROP COLUMN IF EXISTS block_hash, DROP COLUMN IF EXISTS block_number`);
  }
}

/**
 * `pending_since`: when the receipt check first found an API-path receipt's block replaced while the node still held
 * its transaction pending (a real node puts the transactions of an orphaned block back in its pool). The fact is kept
 * while the transaction may still be mined, for RECEIPT_REINCLUSION_WINDOW_SECONDS from then: undoing it at once
 * told the merchant `charge_failed` (or `subscription_checkout.reorged`) and then, once re-mined, success again.
 */
export class AddReceiptPendingSince1795795200100 implements MigrationInterface {
  name = 'AddReceiptPendingSince1795795200100';
  async up(q: QueryRunner): Promise<void> {
    // Bounded lock wait: every charge and subscribe writes this table (queryWithBoundedLockWait).
    await queryWithBoundedLockWait(
      q,
      'ALTER TABLE subscription_chain_observations ADD COLUMN IF NOT EXISTS pending_since timestamptz',
    );
  }
  async down(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE subscription_chain_observations DROP COLUMN IF EXISTS pending_since');
  }
}

export const SUBSCRIPTIONS_MIGRATIONS = [
  CreateSubscriptionCheckouts1767300000100,
  CreateSubscriptions1767400000310,
  CreateChargeQuotes1767400000200,
  CreateSubscriptionChainObservations1767600000100,
  AddSubscriptionObservationBlocks1795622400100,
  AddReceiptPendingSince1795795200100,
];
