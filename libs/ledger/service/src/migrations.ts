import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The charge ledger read model: one row per `charge-<subc_ id>` stream. `seq` is the ledger sequence (SPEC
 * Pagination rule 6): taken when the row is FIRST written, whichever path wrote it, and never changed by a merge,
 * so a row the indexer writes late appears at the head and pages already read stay valid. Rows were unique by
 * transaction here until DropChargeTransactionUniqueness (a batch carries several charges); failed attempts rejected
 * at simulation have none. `object` is the
 * `subscription_charge` object; the other columns serve the filters.
 */
export class CreateSubscriptionCharges1767400000100 implements MigrationInterface {
  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE subscription_charges (
      id text PRIMARY KEY,
      seq bigserial NOT NULL UNIQUE,
      merchant_id text NOT NULL,
      mode text NOT NULL CHECK (mode IN ('test', 'live')),
      subscription_id text NOT NULL,
      subscriber text NOT NULL,
      chain text NOT NULL,
      status text NOT NULL CHECK (status IN ('succeeded', 'failed')),
      tx_hash text,
      charge_nonce integer NOT NULL,
      charged_at timestamptz NOT NULL,
      created_at timestamptz NOT NULL,
      object jsonb NOT NULL,
      revision integer NOT NULL
    )`);
    await q.query(
      'CREATE UNIQUE INDEX subscription_charges_tx ON subscription_charges (chain, lower(tx_hash)) WHERE tx_hash IS NOT NULL',
    );
    await q.query(
      'CREATE INDEX subscription_charges_merchant_seq ON subscription_charges (merchant_id, mode, seq)',
    );
    await q.query(
      'CREATE INDEX subscription_charges_merchant_subscription_seq ON subscription_charges (merchant_id, mode, subscription_id, seq)',
    );
    await q.query(
      'CREATE INDEX subscription_charges_merchant_subscriber_seq ON subscription_charges (merchant_id, mode, subscriber, seq)',
    );
  }
  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE subscription_charges');
  }
}

/**
 * The settlement of a fiat-settled charge on its row: `settlement_status` (also in `object`) and
 * `settlement_check_at`, when the open settlement's SPEC deadlines must next be checked (the durable timer's due time;
 * null once it is completed or failed, and for charges without a fiat settlement).
 */
export class AddChargeSettlementColumns1767400000200 implements MigrationInterface {
  async up(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE subscription_charges ADD COLUMN settlement_status text');
    await q.query('ALTER TABLE subscription_charges ADD COLUMN settlement_check_at timestamptz');
    await q.query(
      `UPDATE subscription_charges SET settlement_status = object->>'settlement_status'
       WHERE object->>'settlement_status' IS NOT NULL`,
    );
    await q.query(
      'CREATE INDEX subscription_charges_settlement_due ON subscription_charges (settlement_check_at, id) WHERE settlement_check_at IS NOT NULL',
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP INDEX subscription_charges_settlement_due');
    await q.query('ALTER TABLE subscription_charges DROP COLUMN settlement_check_at');
    await q.query('ALTER TABLE subscription_charges DROP COLUMN settlement_status');
  }
}

/**
 * A row per charge, not per transaction: one transaction may charge several times (a merchant wallet batching its
 * signed charges into one call, anyone may submit them), and the second charge's row broke the unique
 * (chain, tx_hash) index, so the projection refused it and the list and the export missed a charge that moved money.
 * The API path's row and the indexer's are one row already by the charge id (derived from chain, subscription and
 * nonce). Dropped CONCURRENTLY, outside a transaction: every charge writes this table.
 */
export class DropChargeTransactionUniqueness1796054400100 implements MigrationInterface {
  name = 'DropChargeTransactionUniqueness1796054400100';
  readonly transaction = false;
  async up(q: QueryRunner): Promise<void> {
    await q.query('DROP INDEX CONCURRENTLY IF EXISTS subscription_charges_tx');
  }
  async down(q: QueryRunner): Promise<void> {
    await q.query(
      'CREATE UNIQUE INDEX IF NOT EXISTS subscription_charges_tx ON subscription_charges (chain, lower(tx_hash)) WHERE tx_hash IS NOT NULL',
    );
  }
}

/**
 * The operator's list of open charge settlement exposures (GET /admin/charge-settlement-exposures) across every
 * merchant: the rows whose object holds a `settlement_exposure`, newest first by `seq`. Few rows, so a partial index
 * keeps the page a short index scan however many charges there are. The object is the projection's, so no backfill.
 */
export class AddChargeSettlementExposureIndex1796140800800 implements MigrationInterface {
  name = 'AddChargeSettlementExposureIndex1796140800800';
  async up(q: QueryRunner): Promise<void> {
    await q.query(
      `CREATE INDEX subscription_charges_settlement_exposed_seq ON subscription_charges (seq) WHERE jsonb_typeof(object->'settlement_exposure') = 'object'`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP INDEX subscription_charges_settlement_exposed_seq');
  }
}

export const LEDGER_MIGRATIONS = [
  CreateSubscriptionCharges1767400000100,
  AddChargeSettlementColumns1767400000200,
  DropChargeTransactionUniqueness1796054400100,
  AddChargeSettlementExposureIndex1796140800800,
];
