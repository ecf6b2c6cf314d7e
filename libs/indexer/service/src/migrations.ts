import type { MigrationInterface, QueryRunner } from 'typeorm';
import { queryWithBoundedLockWait } from '@stablepay/database';

/**
 * The indexer's own state. The event store holds what was published; these tables hold what a follower needs to
 * publish it exactly once across restarts and reorgs, and they are written in one transaction per step.
 */
export class CreateIndexerTables1764100000400 implements MigrationInterface {
  async up(q: QueryRunner): Promise<void> {
    // One row per chain: the last ingested block (NULL until the first start), the last revision of the chain's
    // observation stream this follower knows it appended, and a lease so one process at a time follows a chain.
    await q.query(`CREATE TABLE indexer_checkpoints (
      chain text PRIMARY KEY,
      block_number bigint,
      block_hash text,
      stream_revision integer NOT NULL DEFAULT -1,
      lease_owner text,
      lease_expires_at timestamptz,
      updated_at timestamptz NOT NULL DEFAULT now()
    )`);
    // Hashes of ingested blocks a reorg may still replace: the first and last block of every range and every block
    // an observation came from, down to the reorg window below the checkpoint. A reorg's fork point is the
    // highest of them still canonical.
    await q.query(`CREATE TABLE indexer_blocks (
      chain text NOT NULL,
      block_number bigint NOT NULL,
      block_hash text NOT NULL,
      PRIMARY KEY (chain, block_number)
    )`);
    // Observations published from blocks inside the reorg window (pruned below it), so a reorg knows what to
    // retract and a re-scan knows what was already published.
    await q.query(`CREATE TABLE indexer_observations (
      event_id text PRIMARY KEY,
      chain text NOT NULL,
      type text NOT NULL,
      block_number bigint NOT NULL,
      block_hash text NOT NULL,
      tx_hash text NOT NULL,
      log_index integer NOT NULL,
      occurrence integer NOT NULL,
      retracted boolean NOT NULL DEFAULT false
    )`);
    await q.query('CREATE INDEX indexer_observations_block ON indexer_observations (chain, block_number)');
    // Events decided but not yet acknowledged by the event store, appended in seq order (transactional outbox).
    await q.query(`CREATE TABLE indexer_outbox (
      seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      chain text NOT NULL,
      event_id text NOT NULL UNIQUE,
      type text NOT NULL,
      data jsonb NOT NULL,
      metadata jsonb NOT NULL
    )`);
    await q.query('CREATE INDEX indexer_outbox_chain ON indexer_outbox (chain, seq)');
    // Watches. scanned_through NULL: the watch follows the checkpoint (main scan); a number: every block up to it
    // was scanned for this watch, and it catches up on its own before joining the main scan. Addresses are
    // lower-case hex so other services' rows compare equal.
    await q.query(`CREATE TABLE indexer_watched_addresses (
      chain text NOT NULL,
      address text NOT NULL CHECK (address ~ '^0x[0-9a-f]{40}$'),
      scanned_through bigint,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (chain, address)
    )`);
    await q.query(`CREATE TABLE indexer_watched_contracts (
      chain text NOT NULL,
      address text NOT NULL CHECK (address ~ '^0x[0-9a-f]{40}$'),
      kind text NOT NULL CHECK (kind IN ('subscription_manager')),
      scanned_through bigint,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (chain, address)
    )`);
  }

  async down(q: QueryRunner): Promise<void> {
    for (const table of [
      'indexer_watched_contracts',
      'indexer_watched_addresses',
      'indexer_outbox',
      'indexer_observations',
      'indexer_blocks',
      'indexer_checkpoints',
    ]) {
      await q.query(`DROP TABLE ${table}`);
    }
  }
}

/** Payment deposit contracts become a watched kind (the payments service watches each deployed deposit). */
export class AllowPaymentDepositWatches1767700000100 implements MigrationInterface {
  name = 'AllowPaymentDepositWatches1767700000100';

  async up(q: QueryRunner): Promise<void> {
    await q.query(
      'ALTER TABLE indexer_watched_contracts DROP CONSTRAINT IF EXISTS indexer_watched_contracts_kind_check',
    );
    await q.query(`ALTER TABLE indexer_watched_contracts ADD CONSTRAINT indexer_watched_contracts_kind_check
      CHECK (kind IN ('subscription_manager', 'payment_deposit'))`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(
      'ALTER TABLE indexer_watched_contracts DROP CONSTRAINT IF EXISTS indexer_watched_contracts_kind_check',
    );
    await q.query(`ALTER TABLE indexer_watched_contracts ADD CONSTRAINT indexer_watched_contracts_kind_check
      CHECK (kind IN ('subscription_manager'))`);
  }
}

/**
 * Each observation keeps the watched address it is about, so its retraction names it (consumers keep order per
 * address). Rows from before have none; they leave with the reorg window.
 */
export class AddObservationAddress1795449600200 implements MigrationInterface {
  name = 'AddObservationAddress1795449600200';

  async up(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE indexer_observations ADD COLUMN IF NOT EXISTS address text');
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE indexer_observations DROP COLUMN IF EXISTS address');
  }
}

/**
 * An operator's re-scan of a deposit address (docs/chain-operator.md, "Re-scanning a deposit address") counts on its
 * watch: what the re-scan finds is published under event ids of that count, so a log published before and pruned
 * from `indexer_observations` since (below the reorg window) never collides with its first event's id.
 */
export class AddWatchedAddressRescans1795968000100 implements MigrationInterface {
  name = 'AddWatchedAddressRescans1795968000100';

  async up(q: QueryRunner): Promise<void> {
    // Bounded lock wait: every chain follower reads this table each block (queryWithBoundedLockWait).
    await queryWithBoundedLockWait(
      q,
      'ALTER TABLE indexer_watched_addresses ADD COLUMN IF NOT EXISTS rescans integer NOT NULL DEFAULT 0',
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE indexer_watched_addresses DROP COLUMN IF EXISTS rescans');
  }
}

export const INDEXER_MIGRATIONS = [
  CreateIndexerTables1764100000400,
  AllowPaymentDepositWatches1767700000100,
  AddObservationAddress1795449600200,
  AddWatchedAddressRescans1795968000100,
];
