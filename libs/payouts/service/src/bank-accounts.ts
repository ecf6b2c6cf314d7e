import { Inject, Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { accountNumber, type BankAccount } from '@stablepay/payouts-domain';
import type { SecretBox } from '@stablepay/util';

export const PAYOUTS_SEALING = Symbol('PAYOUTS_SEALING');

/**
 * The vault of beneficiaries' bank accounts (ARCHITECTURE: no secret in clear in an event; docs/payouts.md,
 * "Beneficiaries"): the full account is sealed with the service's sealing key (SecretBox, associated data the
 * beneficiary id, so a ciphertext moved to another row does not open) in `payout_bank_accounts`, written before the
 * creation fact; the fact keeps `last4` and `fingerprint`. Only the off-ramp adapter is handed the opened account.
 */
@Injectable()
export class BankAccountVault {
  constructor(
    @Inject(DataSource) private readonly dataSource: DataSource,
    @Inject(PAYOUTS_SEALING) private readonly box: SecretBox,
  ) {}

  /** The keyed fingerprint the creation fact keeps (stable under one sealing key). */
  fingerprint(account: BankAccount): string {
    return this.box.digest(accountNumber(account), 'payout-bank-account');
  }

  /** Idempotent: a retried create (same id, hence same input) keeps the first sealed copy. */
  async store(beneficiaryId: string, merchantId: string, account: BankAccount, now: Date): Promise<void> {
    await this.dataSource.query(
      `INSERT INTO payout_bank_accounts (beneficiary_id, merchant_id, sealed_account, created_at)
       VALUES ($1, $2, $3, $4) ON CONFLICT (beneficiary_id) DO NOTHING`,
      [beneficiaryId, merchantId, this.box.seal(JSON.stringify(account), beneficiaryId), now.toISOString()],
    );
  }

  /**
   * The full account for the off-ramp. A beneficiary created before the vault (BeneficiaryCreated.v1, the beta's first
   * hour) has none: the error names the beneficiary only, and the payout waits (its flow step is retried) until the
   * operator acts (docs/payouts.md).
   */
  async account(beneficiaryId: string): Promise<BankAccount> {
    const rows: Array<{ sealed_account: string }> = await this.dataSource.query(
      'SELECT sealed_account FROM payout_bank_accounts WHERE beneficiary_id = $1',
      [beneficiaryId],
    );
    const sealed = rows[0]?.sealed_account;
    if (sealed === undefined)
      throw new Error(`beneficiary ${beneficiaryId} has no sealed bank account (created before the vault)`);
    return JSON.parse(this.box.open(sealed, beneficiaryId)) as BankAccount;
  }
}
