import type { MigrationInterface, QueryRunner } from 'typeorm';
import { createIndexConcurrently } from '@stablepay/database';

/**
 * The payouts read models (beta), one row per aggregate, projected from `customer-<id>`, `beneficiary-<id>` and
 * `payout-<id>`. `object` is the API object as of `revision` (the projection is idempotent by it); `seq` orders the
 * lists (SPEC Pagination: newest first, keyset cursors); the other columns serve filters, ownership and the
 * payout flow's lookups (a customer by its open KYC session, a customer's payouts awaiting a deposit).
 */
export class CreatePayoutsReadModels1767900000100 implements MigrationInterface {
  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE IF NOT EXISTS payout_customers (
      id text PRIMARY KEY,
      seq bigserial NOT NULL UNIQUE,
      merchant_id text NOT NULL,
      mode text NOT NULL CHECK (mode IN ('test', 'live')),
      status text NOT NULL,
      email text NOT NULL,
      kyc_session_id text,
      deposit_address text NOT NULL,
      object jsonb NOT NULL,
      revision integer NOT NULL
    )`);
    await q.query(
      'CREATE INDEX IF NOT EXISTS payout_customers_merchant_seq ON payout_customers (merchant_id, seq)',
    );
    await q.query(
      'CREATE UNIQUE INDEX IF NOT EXISTS payout_customers_kyc_session ON payout_customers (kyc_session_id)',
    );
    await q.query(
      'CREATE INDEX IF NOT EXISTS payout_customers_deposit_address ON payout_customers (lower(deposit_address))',
    );
    // Every KYC session a customer was given (the hosted page of an old link still shows where the customer stands).
    await q.query(`CREATE TABLE IF NOT EXISTS payout_kyc_sessions (
      session_id text PRIMARY KEY,
      customer_id text NOT NULL
    )`);
    await q.query(`CREATE TABLE IF NOT EXISTS payout_beneficiaries (
      id text PRIMARY KEY,
      seq bigserial NOT NULL UNIQUE,
      merchant_id text NOT NULL,
      mode text NOT NULL CHECK (mode IN ('test', 'live')),
      currency text NOT NULL,
      object jsonb NOT NULL,
      revision integer NOT NULL
    )`);
    await q.query(
      'CREATE INDEX IF NOT EXISTS payout_beneficiaries_merchant_seq ON payout_beneficiaries (merchant_id, seq)',
    );
    await q.query(`CREATE TABLE IF NOT EXISTS payouts (
      id text PRIMARY KEY,
      seq bigserial NOT NULL UNIQUE,
      merchant_id text NOT NULL,
      mode text NOT NULL CHECK (mode IN ('test', 'live')),
      status text NOT NULL,
      customer_id text NOT NULL,
      beneficiary_id text NOT NULL,
      chain text NOT NULL,
      token text NOT NULL,
      amount numeric(78, 0) NOT NULL,
      object jsonb NOT NULL,
      revision integer NOT NULL
    )`);
    await q.query('CREATE INDEX IF NOT EXISTS payouts_merchant_seq ON payouts (merchant_id, seq)');
    await q.query(
      `CREATE INDEX IF NOT EXISTS payouts_awaiting_deposit ON payouts (customer_id, seq) WHERE status = 'awaiting_deposit'`,
    );
  }
  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE payouts');
    await q.query('DROP TABLE payout_beneficiaries');
    await q.query('DROP TABLE payout_kyc_sessions');
    await q.query('DROP TABLE payout_customers');
  }
}

/**
 * The beneficiaries' bank account numbers, sealed (SecretBox, AES-256-GCM under the sealing key, associated data the
 * beneficiary id): written by the command side before the creation fact, which keeps only last4 and a fingerprint.
 * Not a read model (nothing rebuilds it from events): back it up with the database.
 */
export class CreatePayoutBankAccounts1767900000200 implements MigrationInterface {
  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE IF NOT EXISTS payout_bank_accounts (
      beneficiary_id text PRIMARY KEY,
      merchant_id text NOT NULL,
      sealed_account text NOT NULL,
      created_at timestamptz NOT NULL
    )`);
  }
  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE payout_bank_accounts');
  }
}

/**
 * Which payout each deposit (chain, transaction, log, block) went to: a deposit funds one payout, once, also when
 * its observation is delivered again. Command-side state, not a read model (nothing rebuilds it from events).
 */
export class CreatePayoutDepositClaims1767900000300 implements MigrationInterface {
  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE IF NOT EXISTS payout_deposit_claims (
      claim_key text PRIMARY KEY,
      payout_id text NOT NULL,
      claimed_at timestamptz NOT NULL DEFAULT now()
    )`);
  }
  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE payout_deposit_claims');
  }
}

/**
 * The payouts a deposit transaction funded (PayoutsReader.payoutsFundedBy), looked up by a reorg's retraction and,
 * since a re-included transfer of a swept payout stays with it, by every transfer observation.
 */
export class IndexPayoutsByDepositTx1767900000400 implements MigrationInterface {
  // Built CONCURRENTLY, outside a transaction (createIndexConcurrently): payouts is written while it builds. A
  // database that ran this migration's earlier text (a plain CREATE INDEX) keeps the same index.
  readonly transaction = false;
  async up(q: QueryRunner): Promise<void> {
    await createIndexConcurrently(
      q,
      'payouts_deposit_tx',
      `ON payouts (chain, lower(object->'deposit'->>'tx_hash'))`,
    );
  }
  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP INDEX IF EXISTS payouts_deposit_tx');
  }
}

/**
 * The claims of a transaction's transfers (DepositIntake.fundedBefore, a prefix of the claim key): a transfer a reorg
 * re-included goes back to the payout its first observation funded.
 */
export class IndexPayoutDepositClaimsByPrefix1767900000500 implements MigrationInterface {
  // As IndexPayoutsByDepositTx1767900000400: built CONCURRENTLY, the claims of deposits are written meanwhile.
  readonly transaction = false;
  async up(q: QueryRunner): Promise<void> {
    await createIndexConcurrently(
      q,
      'payout_deposit_claims_prefix',
      'ON payout_deposit_claims (claim_key text_pattern_ops)',
    );
  }
  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP INDEX IF EXISTS payout_deposit_claims_prefix');
  }
}

export const PAYOUTS_MIGRATIONS = [
  CreatePayoutsReadModels1767900000100,
  CreatePayoutBankAccounts1767900000200,
  CreatePayoutDepositClaims1767900000300,
  IndexPayoutsByDepositTx1767900000400,
  IndexPayoutDepositClaimsByPrefix1767900000500,
];
