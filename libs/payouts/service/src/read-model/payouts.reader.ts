import { Inject, Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { AuthenticatedMerchant } from '@stablepay/http';
import { type Clause, keysetPage, type ListQuery } from '@stablepay/http';
import { ReadModelChanges } from '@stablepay/node-util';
import type { CustomerListFilters, PayoutListFilters } from '@stablepay/payouts-api';
import type {
  BeneficiaryObject,
  CustomerObject,
  CustomerStatus,
  PayoutObject,
  PayoutStatus,
} from '@stablepay/payouts-domain';
import { notFound, readAtLeastRevision } from '@stablepay/util';

interface RowBase {
  id: string;
  seq: string;
  merchant_id: string;
  mode: 'test' | 'live';
  revision: number;
}
export interface CustomerRow extends RowBase {
  status: CustomerStatus;
  email: string;
  kyc_session_id: string | null;
  deposit_address: string;
  object: CustomerObject;
}
export interface BeneficiaryRow extends RowBase {
  currency: string;
  object: BeneficiaryObject;
}
export interface PayoutRow extends RowBase {
  status: PayoutStatus;
  customer_id: string;
  beneficiary_id: string;
  chain: string;
  token: string;
  amount: string;
  object: PayoutObject;
}
export type PayoutsRow = CustomerRow | BeneficiaryRow | PayoutRow;

/**
 * In-process wake-ups for read-your-writes on the three payouts read models (keyed by the row's id: the prefixes
 * `cus_`, `bnf_`, `po_` keep them apart).
 */
@Injectable()
export class PayoutsChanges extends ReadModelChanges<PayoutsRow> {}

/** The tables and what each aggregate is called in a 404. */
export const PAYOUTS_TABLES = {
  customer: 'payout_customers',
  beneficiary: 'payout_beneficiaries',
  payout: 'payouts',
} as const;
export type PayoutsResource = keyof typeof PAYOUTS_TABLES;
type RowOf<R extends PayoutsResource> = R extends 'customer'
  ? CustomerRow
  : R extends 'beneficiary'
    ? BeneficiaryRow
    : PayoutRow;

const READ_YOUR_WRITES_TIMEOUT_MS = 10_000;

/** The payouts read side: GETs and lists scoped to the merchant (and so its mode: a merchant is one mode). */
@Injectable()
export class PayoutsReader {
  constructor(
    @Inject(DataSource) private readonly dataSource: DataSource,
    @Inject(PayoutsChanges) private readonly changes: PayoutsChanges,
  ) {}

  async find<R extends PayoutsResource>(resource: R, id: string): Promise<RowOf<R> | undefined> {
    const rows: Array<RowOf<R>> = await this.dataSource.query(
      `SELECT * FROM ${PAYOUTS_TABLES[resource]} WHERE id = $1`,
      [id],
    );
    return rows[0];
  }

  /** The merchant's own row, or 404 (another merchant's id is as unknown as a made-up one). */
  async getOwned<R extends PayoutsResource>(
    resource: R,
    merchant: AuthenticatedMerchant,
    id: string,
  ): Promise<RowOf<R>> {
    const row = await this.find(resource, id);
    if (!row || row.merchant_id !== merchant.merchantId || row.mode !== merchant.mode)
      throw notFound(resource, id);
    return row;
  }

  /** The operator's view: the merchant's object in either mode; another merchant's is 404 as on its own routes. */
  async getOfMerchant<R extends PayoutsResource>(
    resource: R,
    merchantId: string,
    id: string,
  ): Promise<RowOf<R>> {
    const row = await this.find(resource, id);
    if (!row || row.merchant_id !== merchantId) throw notFound(resource, id);
    return row;
  }

  /** Read-your-writes: the row once the projection reflects at least `revision` of its stream. */
  getAtLeast<R extends PayoutsResource>(resource: R, id: string, revision: number): Promise<RowOf<R>> {
    return readAtLeastRevision({
      read: () => this.find(resource, id),
      revision,
      changes: this.changes,
      key: id,
      timeoutMs: READ_YOUR_WRITES_TIMEOUT_MS,
      ...this.changes.waitOptions(id),
    }) as Promise<RowOf<R>>;
  }

  /** The customer a KYC session was issued to (its current one or an earlier one). */
  async customerByKycSession(sessionId: string): Promise<CustomerRow | undefined> {
    const rows: CustomerRow[] = await this.dataSource.query(
      `SELECT c.* FROM payout_kyc_sessions s JOIN payout_customers c ON c.id = s.customer_id
        WHERE s.session_id = $1`,
      [sessionId],
    );
    return rows[0];
  }

  async customerByDepositAddress(address: string): Promise<CustomerRow | undefined> {
    const rows: CustomerRow[] = await this.dataSource.query(
      'SELECT * FROM payout_customers WHERE lower(deposit_address) = lower($1)',
      [address],
    );
    return rows[0];
  }

  /** What a hosted page shows of the merchant: its display name and branding. */
  async merchantProfile(merchantId: string): Promise<{
    businessName: string;
    backgroundColor: string | null;
    primaryColor: string | null;
  }> {
    const rows: Array<{
      display_name: string;
      background_color: string | null;
      primary_color: string | null;
    }> = await this.dataSource.query(
      'SELECT display_name, background_color, primary_color FROM merchant_settings WHERE merchant_id = $1',
      [merchantId],
    );
    const row = rows[0];
    return {
      businessName: row?.display_name ?? 'Stablepay',
      backgroundColor: row?.background_color ?? null,
      primaryColor: row?.primary_color ?? null,
    };
  }

  /** The customer's payouts waiting for exactly this deposit (chain, token, amount), oldest first. */
  payoutsAwaiting(
    customerId: string,
    deposit: { chain: string; token: string; amount: string },
  ): Promise<PayoutRow[]> {
    return this.dataSource.query(
      `SELECT * FROM payouts WHERE customer_id = $1 AND status = 'awaiting_deposit'
         AND chain = $2 AND token = $3 AND amount = $4::numeric ORDER BY seq LIMIT 20`,
      [customerId, deposit.chain, deposit.token, deposit.amount],
    );
  }

  /** The payouts a deposit transaction funded on `chain` (a reorg's retraction undoes them). */
  payoutsFundedBy(chain: string, txHash: string): Promise<PayoutRow[]> {
    return this.dataSource.query(
      `SELECT * FROM payouts WHERE chain = $1 AND lower(object->'deposit'->>'tx_hash') = lower($2) ORDER BY seq`,
      [chain, txHash],
    );
  }

  list<R extends PayoutsResource>(
    resource: R,
    merchant: AuthenticatedMerchant,
    query: ListQuery,
    filters: readonly Clause[] = [],
  ): Promise<{ rows: Array<RowOf<R>>; hasMore: boolean }> {
    return keysetPage<RowOf<R>>(this.dataSource, {
      table: PAYOUTS_TABLES[resource],
      scope: [(p) => `merchant_id = ${p(merchant.merchantId)}`, (p) => `mode = ${p(merchant.mode)}`],
      filters,
      query,
    });
  }

  customerFilters(filters: CustomerListFilters): Clause[] {
    const clauses: Clause[] = [];
    if (filters.status !== undefined) clauses.push((p) => `status = ${p(filters.status)}`);
    if (filters.email !== undefined) clauses.push((p) => `email = ${p(filters.email)}`);
    return clauses;
  }

  payoutFilters(filters: PayoutListFilters): Clause[] {
    const clauses: Clause[] = [];
    if (filters.status !== undefined) clauses.push((p) => `status = ${p(filters.status)}`);
    if (filters.customer !== undefined) clauses.push((p) => `customer_id = ${p(filters.customer)}`);
    if (filters.beneficiary !== undefined) clauses.push((p) => `beneficiary_id = ${p(filters.beneficiary)}`);
    return clauses;
  }

  /** Whether the operator enabled the payouts beta for the merchant (the merchants scope's read model, one database). */
  async betaEnabled(merchantId: string): Promise<boolean> {
    const rows: Array<{ enabled: boolean | null }> = await this.dataSource.query(
      `SELECT (beta_features ->> 'payouts')::boolean AS enabled FROM merchant_settings WHERE merchant_id = $1`,
      [merchantId],
    );
    return rows[0]?.enabled === true;
  }
}
