import { Inject, Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { type Clause, createdClauses, keysetPage, type ListQuery } from '@stablepay/http';
import type {
  SubscriptionListFilters,
  SubscriptionObject,
  SubscriptionStatus,
  WindowFacts,
} from '@stablepay/subscriptions-domain';
import { notFound, readAtLeastRevision } from '@stablepay/util';
import { SubscriptionChanges } from './changes';

export interface SubscriptionRow {
  id: string;
  seq: string;
  merchant_id: string;
  mode: 'test' | 'live';
  checkout_id: string | null;
  chain: string;
  subscriber: string;
  status: SubscriptionStatus;
  external_customer_id: string | null;
  started_at: string;
  period_duration: string;
  window_index: string;
  window_spent: string;
  budget: string;
  object: SubscriptionObject;
  revision: number;
  created_at: Date;
  updated_at: Date;
}

/** The SQL of the subscription filters (the list and the subscriptions export). */
export function subscriptionFilterClauses(filters: SubscriptionListFilters): Clause[] {
  const clauses: Clause[] = createdClauses(filters);
  const { status, subscriber, chain, externalCustomerId } = filters;
  if (status !== undefined) clauses.push((p) => `status = ${p(status)}`);
  if (subscriber !== undefined) clauses.push((p) => `subscriber = ${p(subscriber.toLowerCase())}`);
  if (chain !== undefined) clauses.push((p) => `chain = ${p(chain)}`);
  if (externalCustomerId !== undefined)
    clauses.push((p) => `external_customer_id = ${p(externalCustomerId)}`);
  return clauses;
}

export const rowWindowFacts = (row: SubscriptionRow): WindowFacts => ({
  startedAt: BigInt(row.started_at),
  periodDuration: BigInt(row.period_duration),
  windowIndex: BigInt(row.window_index),
  windowSpent: BigInt(row.window_spent),
  budget: BigInt(row.budget),
});

const READ_YOUR_WRITES_TIMEOUT_MS = 15_000;

/** A row as the reader returns it (the numbers that exceed a JS number as text); the projection's RETURNING too. */
export const SUBSCRIPTION_ROW_COLUMNS = `*, started_at::text AS started_at, period_duration::text AS period_duration,
  window_index::text AS window_index, window_spent::text AS window_spent, budget::text AS budget`;

@Injectable()
export class SubscriptionReader {
  constructor(
    @Inject(DataSource) private readonly dataSource: DataSource,
    @Inject(SubscriptionChanges) private readonly changes: SubscriptionChanges,
  ) {}

  async find(id: string): Promise<SubscriptionRow | undefined> {
    const rows: SubscriptionRow[] = await this.dataSource.query(
      `SELECT ${SUBSCRIPTION_ROW_COLUMNS} FROM subscriptions WHERE id = $1`,
      [id.toLowerCase()],
    );
    return rows[0];
  }

  async findByCheckout(checkoutId: string): Promise<SubscriptionRow | undefined> {
    const rows: SubscriptionRow[] = await this.dataSource.query(
      'SELECT id FROM subscriptions WHERE checkout_id = $1',
      [checkoutId],
    );
    return rows[0] ? this.find(rows[0].id) : undefined;
  }

  /** The merchant's own subscription in the caller's mode, or 404. */
  async getOwned(merchant: { merchantId: string; mode: string }, id: string): Promise<SubscriptionRow> {
    const row = await this.find(id);
    if (!row || row.merchant_id !== merchant.merchantId || row.mode !== merchant.mode)
      throw notFound('subscription', id);
    return row;
  }

  /** `appended`: the caller has just appended `revision`, which the projection has to announce first. */
  getAtLeast(
    id: string,
    revision: number,
    options: { readonly appended?: boolean } = {},
  ): Promise<SubscriptionRow> {
    return readAtLeastRevision({
      read: () => this.find(id),
      revision,
      changes: this.changes,
      key: id.toLowerCase(),
      timeoutMs: READ_YOUR_WRITES_TIMEOUT_MS,
      ...this.changes.waitOptions(id.toLowerCase(), options.appended),
    });
  }

  async list(
    merchant: { merchantId: string; mode: string },
    query: ListQuery,
    filters: SubscriptionListFilters,
  ): Promise<{ rows: SubscriptionRow[]; hasMore: boolean }> {
    return keysetPage<SubscriptionRow>(this.dataSource, {
      table: 'subscriptions',
      select: SUBSCRIPTION_ROW_COLUMNS,
      scope: [(p) => `merchant_id = ${p(merchant.merchantId)}`, (p) => `mode = ${p(merchant.mode)}`],
      filters: subscriptionFilterClauses(filters),
      query,
    });
  }
}
