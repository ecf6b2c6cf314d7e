import {
  AddPaymentActionSubmissionFailures1767600000200,
  CreatePaymentActionSubmissions1767500000000,
} from './actions/action-submissions';
import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The read models of the payment stream (`payment-<pay_id>`): one row per checkout and one per payment, written
 * in the same transaction by one projection. `object` is the checkout / payment object as of `revision` (the
 * projection of the stream's state); the other columns serve lists, filters and the expiry timer. `seq` orders
 * lists (SPEC Pagination: newest first, keyset cursors); `revision` makes the projection idempotent. The partial
 * index on pending expiries is the durable timer's queue.
 */
export class CreatePaymentReadModels1767400000100 implements MigrationInterface {
  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE checkouts (
      id text PRIMARY KEY,
      seq bigserial NOT NULL UNIQUE,
      payment_id text NOT NULL UNIQUE,
      merchant_id text NOT NULL,
      mode text NOT NULL CHECK (mode IN ('test', 'live')),
      status text NOT NULL,
      created_at timestamptz NOT NULL,
      expires_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL,
      object jsonb NOT NULL,
      revision integer NOT NULL
    )`);
    await q.query('CREATE INDEX checkouts_merchant_seq ON checkouts (merchant_id, seq)');
    await q.query('CREATE INDEX checkouts_merchant_status_seq ON checkouts (merchant_id, status, seq)');
    await q.query(`CREATE TABLE payments (
      id text PRIMARY KEY,
      seq bigserial NOT NULL UNIQUE,
      checkout_id text NOT NULL UNIQUE,
      merchant_id text NOT NULL,
      mode text NOT NULL CHECK (mode IN ('test', 'live')),
      status text NOT NULL,
      method text NOT NULL,
      deposit_address text NOT NULL,
      detected_chain text,
      created_at timestamptz NOT NULL,
      expires_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL,
      object jsonb NOT NULL,
      revision integer NOT NULL
    )`);
    await q.query('CREATE INDEX payments_merchant_seq ON payments (merchant_id, seq)');
    await q.query('CREATE INDEX payments_merchant_status_seq ON payments (merchant_id, status, seq)');
    await q.query('CREATE INDEX payments_deposit_address ON payments (deposit_address)');
    await q.query(
      `CREATE INDEX payments_pending_expiry ON payments (expires_at, id) WHERE status = 'pending'`,
    );
  }
  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE payments');
    await q.query('DROP TABLE checkouts');
  }
}

/**
 * A fiat-settled payment's payout on its row: `settlement_check_at`, when its open settlement's SPEC deadlines must
 * next be checked (the durable timer's queue, PaymentSettlementDeadlines; null for crypto-settled payments, before the
 * settle and once the settlement completed or failed). Written by the projection from the next event on.
 */
export class AddPaymentSettlementCheck1767600000000 implements MigrationInterface {
  async up(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE payments ADD COLUMN settlement_check_at timestamptz');
    await q.query(
      'CREATE INDEX payments_settlement_due ON payments (settlement_check_at, id) WHERE settlement_check_at IS NOT NULL',
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP INDEX payments_settlement_due');
    await q.query('ALTER TABLE payments DROP COLUMN settlement_check_at');
  }
}

/**
 * `settlement_started_at`: when a fiat-settled payment's crypto settled, i.e. its payout started (the sandbox
 * provider's payouts count from it, SandboxPaymentPayouts). Written by the projection from the next event on.
 */
export class AddPaymentSettlementStart1767600000100 implements MigrationInterface {
  async up(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE payments ADD COLUMN settlement_started_at timestamptz');
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE payments DROP COLUMN settlement_started_at');
  }
}

/**
 * The operator's list of open settlement exposures (GET /admin/settlement-exposures) across every merchant: the
 * payments whose object holds a `settlement_exposure`, newest first by `seq`. Few rows, so a partial index keeps the
 * page a short index scan however many payments there are. The object is the projection's, so no backfill.
 */
export class AddPaymentSettlementExposureIndex1796140800700 implements MigrationInterface {
  async up(q: QueryRunner): Promise<void> {
    await q.query(
      `CREATE INDEX payments_settlement_exposed_seq ON payments (seq) WHERE jsonb_typeof(object->'settlement_exposure') = 'object'`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP INDEX payments_settlement_exposed_seq');
  }
}

export const PAYMENTS_MIGRATIONS = [
  CreatePaymentReadModels1767400000100,
  CreatePaymentActionSubmissions1767500000000,
  AddPaymentSettlementCheck1767600000000,
  AddPaymentSettlementStart1767600000100,
  AddPaymentActionSubmissionFailures1767600000200,
  AddPaymentSettlementExposureIndex1796140800700,
];
