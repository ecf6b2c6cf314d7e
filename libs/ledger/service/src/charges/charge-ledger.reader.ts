import { Inject, Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { EVENT_STORE } from '@stablepay/aggregate';
import type { EventStore } from '@stablepay/event-store';
import { type Clause, keysetPage, type ListQuery } from '@stablepay/http';
import {
  type ChargeListFilter,
  chargeObject,
  chargeStreamId,
  foldCharge,
  type SubscriptionChargeObject,
} from '@stablepay/ledger-domain';
import { readAtLeastRevision } from '@stablepay/util';
import { ChargeLedgerChanges, ChargeRecords, type RecordedCharge } from './changes';

export interface ChargeLedgerRow {
  id: string;
  seq: string;
  merchant_id: string;
  mode: 'test' | 'live';
  subscription_id: string;
  subscriber: string;
  chain: string;
  status: 'succeeded' | 'failed';
  tx_hash: string | null;
  charge_nonce: number;
  charged_at: Date;
  created_at: Date;
  object: SubscriptionChargeObject;
  revision: number;
}

/** A ledger row as the operator's charge settlement exposure list reads it. */
export interface ChargeSettlementExposureRow {
  id: string;
  subscription_id: string;
  merchant_id: string;
  mode: 'test' | 'live';
  amount: string;
  currency: string;
  reason: 'charge_lost_to_reorg';
  recorded_at: string;
}

const READ_YOUR_WRITES_TIMEOUT_MS = 10_000;

/**
 * The SQL of the ledger's filters (the charges list and the subscription charges export); `table` qualifies the
 * columns for a statement that joins another table.
 */
export function chargeFilterClauses(filter: ChargeListFilter, table?: string): Clause[] {
  const clauses: Clause[] = [];
  const col = (name: string) => (table ? `${table}.${name}` : name);
  const eq = (column: string, value: string | undefined) => {
    if (value !== undefined) clauses.push((p) => `${col(column)} = ${p(value)}`);
  };
  eq('subscription_id', filter.subscriptionId);
  eq('subscriber', filter.subscriber);
  eq('status', filter.status);
  eq('chain', filter.chain);
  const { chargedFrom, chargedTo } = filter;
  if (chargedFrom)
    clauses.push((p) => `${col('charged_at')} >= ${p(chargedFrom.toISOString())}::timestamptz`);
  if (chargedTo) clauses.push((p) => `${col('charged_at')} < ${p(chargedTo.toISOString())}::timestamptz`);
  return clauses;
}

@Injectable()
export class ChargeLedgerReader {
  constructor(
    @Inject(DataSource) private readonly dataSource: DataSource,
    @Inject(ChargeLedgerChanges) private readonly changes: ChargeLedgerChanges,
    @Inject(ChargeRecords) private readonly records: ChargeRecords,
    @Inject(EVENT_STORE) private readonly store: EventStore,
  ) {}

  async find(id: string): Promise<ChargeLedgerRow | undefined> {
    const rows: ChargeLedgerRow[] = await this.dataSource.query(
      'SELECT * FROM subscription_charges WHERE id = $1',
      [id],
    );
    return rows[0];
  }

  /**
   * Read-your-writes: the row once the ledger reflects at least `revision` of its stream (0: the row exists).
   * `appended`: the caller has just recorded a new charge, whose row cannot exist before the projection announces it.
   */
  getAtLeast(
    id: string,
    revision = 0,
    options: { readonly appended?: boolean } = {},
  ): Promise<ChargeLedgerRow> {
    return readAtLeastRevision({
      read: () => this.find(id),
      revision,
      changes: this.changes,
      key: id,
      timeoutMs: READ_YOUR_WRITES_TIMEOUT_MS,
      ...this.changes.waitOptions(id, options.appended),
    });
  }

  /**
   * The charge as the ledger recorded it, once it has: the object of its Charge stream, folded by the projection's
   * own code (chargeObject of foldCharge), which is the object the ledger lists at that revision. Resolves when the
   * charge stream exists, without waiting for the projection to commit the row (SPEC fiat field rule 4: a charge
   * call may answer before its row is listed; rule 6 binds the webhooks, whose recorder waits for the row).
   * `appended`: the caller has just recorded the subscription's charge fact, so the charge stream cannot exist
   * before the ledger consumer announces it.
   */
  recorded(id: string, options: { readonly appended?: boolean } = {}): Promise<RecordedCharge> {
    return readAtLeastRevision({
      read: () => this.readRecorded(id),
      revision: 0,
      changes: this.records,
      key: id,
      timeoutMs: READ_YOUR_WRITES_TIMEOUT_MS,
      ...this.records.waitOptions(id, options.appended),
    });
  }

  private async readRecorded(id: string): Promise<RecordedCharge | undefined> {
    const events = await this.store.readStream(chargeStreamId(id));
    const last = events.at(-1);
    if (!last) return undefined;
    return { id, revision: last.revision, object: chargeObject(foldCharge(events)) };
  }

  /**
   * Open settlement exposures of every merchant's charges (the operator's list), newest row first. The exposure is a
   * filter, not the scope: a cursor stays valid after its charge was re-included between two pages. The subscription
   * id is the object's (the column is lower-cased for the filters).
   */
  listSettlementExposures(
    query: ListQuery,
    filters: { readonly mode?: 'test' | 'live' },
  ): Promise<{ rows: ChargeSettlementExposureRow[]; hasMore: boolean }> {
    const clauses: Clause[] = [() => `jsonb_typeof(object->'settlement_exposure') = 'object'`];
    const { mode } = filters;
    if (mode !== undefined) clauses.push((p) => `mode = ${p(mode)}`);
    return keysetPage<ChargeSettlementExposureRow>(this.dataSource, {
      table: 'subscription_charges',
      scope: [],
      filters: clauses,
      query,
      select: `id, merchant_id, mode, object->>'subscription_id' AS subscription_id,
        object->'settlement_exposure'->>'amount' AS amount, object->'settlement_exposure'->>'currency' AS currency,
        object->'settlement_exposure'->>'reason' AS reason,
        object->'settlement_exposure'->>'recorded_at' AS recorded_at`,
    });
  }

  /**
   * SPEC Pagination over the ledger sequence (newest first, rule 6); cursors resolve within the merchant's own rows
   * of its mode, filters narrow.
   */
  async list(
    owner: { merchantId: string; mode: 'test' | 'live' },
    query: ListQuery,
    filter: ChargeListFilter,
  ): Promise<{ rows: ChargeLedgerRow[]; hasMore: boolean }> {
    return keysetPage<ChargeLedgerRow>(this.dataSource, {
      table: 'subscription_charges',
      scope: [(p) => `merchant_id = ${p(owner.merchantId)}`, (p) => `mode = ${p(owner.mode)}`],
      filters: chargeFilterClauses(filter),
      query,
    });
  }
}
