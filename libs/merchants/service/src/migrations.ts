import {
  AddMerchantChainHoldings1796140800000,
  CreateMerchantChainRegistrations1767400000000,
} from './chain-registration/registration.store';
import type { MigrationInterface, QueryRunner } from 'typeorm';
import { queryWithBoundedLockWait } from '@stablepay/database';

export class CreateMerchantReadModels1763800000100 implements MigrationInterface {
  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE merchant_settings (
      merchant_id text PRIMARY KEY,
      mode text NOT NULL CHECK (mode IN ('test', 'live')),
      name text NOT NULL,
      display_name text NOT NULL,
      settlement_mode text NOT NULL CHECK (settlement_mode IN ('crypto', 'fiat')),
      settlement_address text,
      merchant_signer text,
      webhook_url text,
      webhook_secret_id text,
      webhook_secret_fingerprint text,
      previous_webhook_secret_id text,
      previous_secret_expires_at timestamptz,
      webhook_event_types jsonb,
      background_color text,
      primary_color text,
      merchant_pauser text,
      shared_pauser_risk_acknowledged boolean NOT NULL DEFAULT false,
      subscription_manager_address text,
      revision integer NOT NULL,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL
    )`);
    await q.query(`CREATE TABLE api_keys (
      key_hash text PRIMARY KEY,
      merchant_id text NOT NULL,
      mode text NOT NULL CHECK (mode IN ('test', 'live')),
      hint text NOT NULL,
      created_at timestamptz NOT NULL
    )`);
    await q.query('CREATE INDEX api_keys_merchant ON api_keys (merchant_id)');
    // Written by the command side before the event that names the secret id is appended; the event never
    // carries the secret. Sealed with AES-256-GCM (SecretBox) under WEBHOOK_SECRET_ENCRYPTION_KEY.
    await q.query(`CREATE TABLE webhook_secrets (
      secret_id text PRIMARY KEY,
      merchant_id text NOT NULL,
      sealed_secret text NOT NULL,
      created_at timestamptz NOT NULL
    )`);
  }
  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE webhook_secrets');
    await q.query('DROP TABLE api_keys');
    await q.query('DROP TABLE merchant_settings');
  }
}

/** The fiat settlement configuration (GET/PUT /payments/settlement), projected from FiatSettlementConfigured.v1. */
export class AddFiatSettlement1767300000000 implements MigrationInterface {
  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE merchant_settings
      ADD COLUMN fiat_currency text,
      ADD COLUMN fiat_beneficiary_name text,
      ADD COLUMN fiat_bank_name text,
      ADD COLUMN fiat_account_number text,
      ADD COLUMN fiat_bank_code text,
      ADD COLUMN fiat_country text,
      ADD COLUMN fiat_configured_at timestamptz`);
  }
  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE merchant_settings
      DROP COLUMN fiat_currency, DROP COLUMN fiat_beneficiary_name, DROP COLUMN fiat_bank_name, DROP COLUMN fiat_account_number,
      DROP COLUMN fiat_bank_code, DROP COLUMN fiat_country, DROP COLUMN fiat_configured_at`);
  }
}

/** Beta features per merchant (POST /admin/merchants/:merchantId/beta-features), from MerchantBetaFeaturesSet.v1. */
export class AddMerchantBetaFeatures1767900000000 implements MigrationInterface {
  async up(q: QueryRunner): Promise<void> {
    await q.query(
      `ALTER TABLE merchant_settings ADD COLUMN beta_features jsonb NOT NULL DEFAULT '{}'::jsonb`,
    );
  }
  async down(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE merchant_settings DROP COLUMN beta_features');
  }
}

/**
 * When the settings' settlement address was last set (SettlementAddressChanged.v1 `changedAt`): subscriptions tells
 * a charge that paid a replaced address from one that paid the address then in force, whenever it reads the log.
 * Existing rows take `updated_at`, at or after the real change, so no older charge is called a replaced payment.
 */
export class AddSettlementAddressChangedAt1795622400500 implements MigrationInterface {
  async up(q: QueryRunner): Promise<void> {
    // Superseded by the history: a replica that runs this after another ran the history and the column's drop (no
    // lock orders them) must not bring the column back.
    if (await q.hasTable('merchant_settlement_addresses')) return;
    await q.query(
      'ALTER TABLE merchant_settings ADD COLUMN IF NOT EXISTS settlement_address_changed_at timestamptz',
    );
    await q.query(
      'UPDATE merchant_settings SET settlement_address_changed_at = updated_at WHERE settlement_address IS NOT NULL',
    );
  }
  async down(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE merchant_settings DROP COLUMN settlement_address_changed_at');
  }
}

/**
 * Every settlement address the settings held, with its validity interval (settlement-address-history.ts):
 * subscriptions compares a charge's payee with the address in force at the charge's block time, not only with the
 * last change. Existing rows start the history at their last change (`settlement_address_changed_at`); the addresses
 * before it are not known, so a charge before it is not judged (as before).
 */
export class CreateSettlementAddressHistory1795708800000 implements MigrationInterface {
  name = 'CreateSettlementAddressHistory1795708800000';
  // Idempotent: gateway replicas starting together each run what is pending (no lock orders them), and the backfill
  // must not fail on rows another run or the projection wrote.
  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE IF NOT EXISTS merchant_settlement_addresses (
      merchant_id text NOT NULL,
      settlement_address text NOT NULL,
      valid_from timestamptz NOT NULL,
      valid_to timestamptz,
      PRIMARY KEY (merchant_id, valid_from)
    )`);
    // A replica that runs this after another already ran DropSettlementAddressChangedAt finds the column gone and
    // the backfill done.
    if (!(await q.hasColumn('merchant_settings', 'settlement_address_changed_at'))) return;
    await q.query(
      `INSERT INTO merchant_settlement_addresses (merchant_id, settlement_address, valid_from)
       SELECT merchant_id, settlement_address, settlement_address_changed_at FROM merchant_settings
       WHERE settlement_address IS NOT NULL AND settlement_address_changed_at IS NOT NULL
       ON CONFLICT (merchant_id, valid_from) DO NOTHING`,
    );
  }
  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE IF EXISTS merchant_settlement_addresses');
  }
}

/**
 * `settlement_address_changed_at` (AddSettlementAddressChangedAt1795622400500) has been read by nothing since the
 * history (CreateSettlementAddressHistory1795708800000) replaced it, but for that migration's backfill: the open
 * history row says when the address held now took over, and a second record of it could only disagree. Idempotent
 * (replicas run pending migrations without a lock). Down puts it back from the open history row.
 */
export class DropSettlementAddressChangedAt1795881600000 implements MigrationInterface {
  name = 'DropSettlementAddressChangedAt1795881600000';
  async up(q: QueryRunner): Promise<void> {
    // Bounded lock wait: every API call of the merchant reads merchant_settings (queryWithBoundedLockWait).
    await queryWithBoundedLockWait(
      q,
      'ALTER TABLE merchant_settings DROP COLUMN IF EXISTS settlement_address_changed_at',
    );
  }
  async down(q: QueryRunner): Promise<void> {
    await q.query(
      'ALTER TABLE merchant_settings ADD COLUMN IF NOT EXISTS settlement_address_changed_at timestamptz',
    );
    await q.query(
      `UPDATE merchant_settings s SET settlement_address_changed_at = h.valid_from
         FROM merchant_settlement_addresses h
        WHERE h.merchant_id = s.merchant_id AND h.valid_to IS NULL`,
    );
  }
}

/**
 * The registration table is the chain registration worker's (payments process); the gateway reads it for
 * settings' `chain_registrations`, so it is created wherever settings are served too (idempotent DDL).
 */
export const MERCHANTS_MIGRATIONS = [
  CreateMerchantReadModels1763800000100,
  AddFiatSettlement1767300000000,
  CreateMerchantChainRegistrations1767400000000,
  AddMerchantBetaFeatures1767900000000,
  AddSettlementAddressChangedAt1795622400500,
  CreateSettlementAddressHistory1795708800000,
  DropSettlementAddressChangedAt1795881600000,
  AddMerchantChainHoldings1796140800000,
];
