import { Inject, Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { type Clause, keysetPage, type ListQuery } from '@stablepay/http';
import type { SubscriptionCheckoutListFilters } from '@stablepay/subscriptions-api';
import type { SubscriptionCheckoutObject, SubscriptionCheckoutStatus } from '@stablepay/subscriptions-domain';
import { notFound, readAtLeastRevision } from '@stablepay/util';
import { SubscriptionCheckoutChanges } from './changes';

export interface SubscriptionCheckoutRow {
  id: string;
  seq: string;
  merchant_id: string;
  mode: 'test' | 'live';
  status: SubscriptionCheckoutStatus;
  external_customer_id: string | null;
  created_at: Date;
  expires_at: Date;
  updated_at: Date;
  object: SubscriptionCheckoutObject;
  revision: number;
}

const READ_YOUR_WRITES_TIMEOUT_MS = 10_000;

@Injectable()
export class SubscriptionCheckoutReader {
  constructor(
    @Inject(DataSource) private readonly dataSource: DataSource,
    @Inject(SubscriptionCheckoutChanges) private readonly changes: SubscriptionCheckoutChanges,
  ) {}

  async find(id: string): Promise<SubscriptionCheckoutRow | undefined> {
    const rows: SubscriptionCheckoutRow[] = await this.dataSource.query(
      'SELECT * FROM subscription_checkouts WHERE id = $1',
      [id],
    );
    return rows[0];
  }

  /** The merchant's own intent, or 404 (another merchant's id is as unknown as a made-up one). */
  async getOwned(merchantId: string, id: string): Promise<SubscriptionCheckoutRow> {
    const row = await this.find(id);
    if (!row || row.merchant_id !== merchantId) throw notFound('subscription_checkout', id);
    return row;
  }

  /**
   * Read-your-writes: the row once the projection reflects at least `revision` of its stream. `appended` says the
   * caller's command has just appended that revision: with the projection in this process the row then comes from
   * the projection's commit (no read at all); otherwise, or for a command that appended nothing, it is read.
   */
  getAtLeast(
    id: string,
    revision: number,
    options: { readonly appended?: boolean } = {},
  ): Promise<SubscriptionCheckoutRow> {
    return readAtLeastRevision({
      read: () => this.find(id),
      revision,
      changes: this.changes,
      key: id,
      timeoutMs: READ_YOUR_WRITES_TIMEOUT_MS,
      ...this.changes.waitOptions(id, options.appended),
    });
  }

  /** SPEC Pagination over `seq` (newest first); cursors resolve within the merchant's rows, filters narrow. */
  async list(
    merchantId: string,
    query: ListQuery,
    filters: SubscriptionCheckoutListFilters,
  ): Promise<{ rows: SubscriptionCheckoutRow[]; hasMore: boolean }> {
    const clauses: Clause[] = [];
    if (filters.status !== undefined) {
      const status = filters.status;
      clauses.push((p) => `status = ${p(status)}`);
    }
    if (filters.externalCustomerId !== undefined) {
      const customer = filters.externalCustomerId;
      clauses.push((p) => `external_customer_id = ${p(customer)}`);
    }
    const bounds: Array<[Date | undefined, string]> = [
      [filters.createdGte, '>='],
      [filters.createdGt, '>'],
      [filters.createdLte, '<='],
      [filters.createdLt, '<'],
    ];
    for (const [value, op] of bounds) {
      if (value !== undefined) clauses.push((p) => `created_at ${op} ${p(value.toISOString())}::timestamptz`);
    }
    return keysetPage<SubscriptionCheckoutRow>(this.dataSource, {
      table: 'subscription_checkouts',
      scope: [(p) => `merchant_id = ${p(merchantId)}`],
      filters: clauses,
      query,
    });
  }

  /**
   * Pending intents whose expiry has passed, in (expires_at, id) order after `after` (the durable timer's queue;
   * the cursor lets a tick pass over an intent that is due but whose expiry appended nothing).
   */
  async dueForExpiry(
    now: Date,
    limit: number,
    after?: { dueAt: Date; id: string },
  ): Promise<Array<Pick<SubscriptionCheckoutRow, 'id' | 'merchant_id' | 'mode'> & { expires_at: Date }>> {
    return this.dataSource.query(
      `SELECT id, merchant_id, mode, expires_at FROM subscription_checkouts
       WHERE status = 'pending' AND expires_at <= $1
         AND ($3::timestamptz IS NULL OR (expires_at, id) > ($3::timestamptz, $4::text))
       ORDER BY expires_at, id LIMIT $2`,
      [now.toISOString(), limit, after?.dueAt.toISOString() ?? null, after?.id ?? ''],
    );
  }
}
