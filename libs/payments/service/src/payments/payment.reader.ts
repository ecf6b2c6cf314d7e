import { Inject, Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { type Clause, createdClauses, keysetPage, type ListQuery } from '@stablepay/http';
import type {
  CheckoutListFilters,
  PaymentListFilters,
  SettlementExposureListFilters,
} from '@stablepay/payments-api';
import type {
  CheckoutObject,
  CheckoutStatus,
  PaymentObject,
  PaymentStatus,
} from '@stablepay/payments-domain';
import { notFound, readAtLeastRevision } from '@stablepay/util';
import { PaymentChanges } from './changes';

export interface PaymentRow {
  id: string;
  seq: string;
  checkout_id: string;
  merchant_id: string;
  mode: 'test' | 'live';
  status: PaymentStatus;
  method: 'DIRECT' | 'TWO_STEP';
  deposit_address: string;
  detected_chain: string | null;
  created_at: Date;
  expires_at: Date;
  updated_at: Date;
  object: PaymentObject;
  revision: number;
}

export interface CheckoutRow {
  id: string;
  seq: string;
  payment_id: string;
  merchant_id: string;
  mode: 'test' | 'live';
  status: CheckoutStatus;
  created_at: Date;
  expires_at: Date;
  updated_at: Date;
  object: CheckoutObject;
  revision: number;
}

/** A payments row as the operator's settlement exposure list reads it. */
export interface SettlementExposureRow {
  id: string;
  merchant_id: string;
  mode: 'test' | 'live';
  amount: string;
  currency: string;
  reason: 'deposit_lost_to_reorg';
  recorded_at: string;
}

export type PaymentOwner = Pick<PaymentRow, 'id' | 'merchant_id' | 'mode'>;

const READ_YOUR_WRITES_TIMEOUT_MS = 10_000;

/** The SQL of the payment filters (GET /payments and the payments export). */
export function paymentFilterClauses(filters: PaymentListFilters): Clause[] {
  const clauses: Clause[] = createdClauses(filters);
  const { status, method, checkoutId, depositAddress, detectedChain } = filters;
  if (status !== undefined) clauses.push((p) => `status = ${p(status)}`);
  if (method !== undefined) clauses.push((p) => `method = ${p(method)}`);
  if (checkoutId !== undefined) clauses.push((p) => `checkout_id = ${p(checkoutId)}`);
  if (depositAddress !== undefined)
    clauses.push((p) => `deposit_address = ${p(depositAddress.toLowerCase())}`);
  if (detectedChain !== undefined) clauses.push((p) => `detected_chain = ${p(detectedChain)}`);
  return clauses;
}

/** Whose rows a merchant-facing read may answer: the key's merchant, in the key's mode. */
export interface PaymentScope {
  readonly merchantId: string;
  readonly mode: string;
}

const owns = (scope: PaymentScope, row: { merchant_id: string; mode: string }): boolean =>
  row.merchant_id === scope.merchantId && row.mode === scope.mode;

const scoped = (scope: PaymentScope): Clause[] => [
  (p) => `merchant_id = ${p(scope.merchantId)}`,
  (p) => `mode = ${p(scope.mode)}`,
];

/**
 * Reads of the checkouts and payments read models; every merchant-facing read is scoped to its merchant and the
 * key's mode (a row of the other mode is as unknown as another merchant's, as in the subscriptions and ledger reads).
 */
@Injectable()
export class PaymentReader {
  constructor(
    @Inject(DataSource) private readonly dataSource: DataSource,
    @Inject(PaymentChanges) private readonly changes: PaymentChanges,
  ) {}

  async findPayment(id: string): Promise<PaymentRow | undefined> {
    const rows: PaymentRow[] = await this.dataSource.query('SELECT * FROM payments WHERE id = $1', [id]);
    return rows[0];
  }

  async findCheckout(id: string): Promise<CheckoutRow | undefined> {
    const rows: CheckoutRow[] = await this.dataSource.query('SELECT * FROM checkouts WHERE id = $1', [id]);
    return rows[0];
  }

  /** The merchant's own payment in the key's mode, or 404 (any other id is as unknown as a made-up one). */
  async getOwnedPayment(scope: PaymentScope, id: string): Promise<PaymentRow> {
    const row = await this.findPayment(id);
    if (!row || !owns(scope, row)) throw notFound('payment', id);
    return row;
  }

  async getOwnedCheckout(scope: PaymentScope, id: string): Promise<CheckoutRow> {
    const row = await this.findCheckout(id);
    if (!row || !owns(scope, row)) throw notFound('checkout', id);
    return row;
  }

  /** Read-your-writes: the payment row once the projection reflects at least `revision` of its stream. */
  paymentAtLeast(paymentId: string, revision: number): Promise<PaymentRow> {
    return readAtLeastRevision({
      read: () => this.findPayment(paymentId),
      revision,
      changes: this.changes,
      key: paymentId,
      timeoutMs: READ_YOUR_WRITES_TIMEOUT_MS,
    });
  }

  /** Both rows are written in one transaction, so the checkout is at the same revision once the payment is. */
  async checkoutAtLeast(checkoutId: string, paymentId: string, revision: number): Promise<CheckoutRow> {
    await this.paymentAtLeast(paymentId, revision);
    const row = await this.findCheckout(checkoutId);
    if (!row) throw new Error(`checkout ${checkoutId} of payment ${paymentId} is not projected`);
    return row;
  }

  /** SPEC Pagination over `seq` (newest first); cursors resolve within the scope's rows, filters narrow. */
  listCheckouts(
    scope: PaymentScope,
    query: ListQuery,
    filters: CheckoutListFilters,
  ): Promise<{ rows: CheckoutRow[]; hasMore: boolean }> {
    const clauses: Clause[] = createdClauses(filters);
    const { status, paymentId } = filters;
    if (status !== undefined) clauses.push((p) => `status = ${p(status)}`);
    if (paymentId !== undefined) clauses.push((p) => `payment_id = ${p(paymentId)}`);
    return keysetPage<CheckoutRow>(this.dataSource, {
      table: 'checkouts',
      scope: scoped(scope),
      filters: clauses,
      query,
    });
  }

  listPayments(
    scope: PaymentScope,
    query: ListQuery,
    filters: PaymentListFilters,
  ): Promise<{ rows: PaymentRow[]; hasMore: boolean }> {
    return keysetPage<PaymentRow>(this.dataSource, {
      table: 'payments',
      scope: scoped(scope),
      filters: paymentFilterClauses(filters),
      query,
    });
  }

  /**
   * Open settlement exposures of every merchant (the operator's list), newest payment first. The exposure is a
   * filter, not the scope: a cursor stays valid after its payment's exposure ended (reinstated) between two pages.
   * Amount and currency are the order's, read from the object's top level, so a row stored before the exposure
   * named them still answers them.
   */
  listSettlementExposures(
    query: ListQuery,
    filters: SettlementExposureListFilters,
  ): Promise<{ rows: SettlementExposureRow[]; hasMore: boolean }> {
    const clauses: Clause[] = [() => `jsonb_typeof(object->'settlement_exposure') = 'object'`];
    const { mode } = filters;
    if (mode !== undefined) clauses.push((p) => `mode = ${p(mode)}`);
    return keysetPage<SettlementExposureRow>(this.dataSource, {
      table: 'payments',
      scope: [],
      filters: clauses,
      query,
      select: `id, merchant_id, mode, object->>'amount' AS amount, object->>'currency' AS currency,
        object->'settlement_exposure'->>'reason' AS reason, object->'settlement_exposure'->>'recorded_at' AS recorded_at`,
    });
  }

  /** Fiat settlements whose SPEC deadlines are due by `now` (the settlement timer's queue, keyset-paged). */
  async dueForSettlementCheck(
    now: Date,
    limit: number,
    after?: { dueAt: Date; id: string },
  ): Promise<Array<PaymentOwner & { settlement_check_at: Date }>> {
    return this.dataSource.query(
      `SELECT id, merchant_id, mode, settlement_check_at FROM payments
       WHERE settlement_check_at <= $1
         AND ($3::timestamptz IS NULL OR (settlement_check_at, id) > ($3::timestamptz, $4::text))
       ORDER BY settlement_check_at, id LIMIT $2`,
      [now.toISOString(), limit, after?.dueAt.toISOString() ?? null, after?.id ?? ''],
    );
  }

  /**
   * Pending payments whose expiry has passed, in (expires_at, id) order after `after` (the durable timer's queue;
   * the cursor lets a tick pass over a payment that is due but held off, e.g. a full deposit still confirming).
   */
  async dueForExpiry(
    now: Date,
    limit: number,
    after?: { dueAt: Date; id: string },
  ): Promise<Array<PaymentOwner & { expires_at: Date }>> {
    return this.dataSource.query(
      `SELECT id, merchant_id, mode, expires_at FROM payments
       WHERE status = 'pending' AND expires_at <= $1
         AND ($3::timestamptz IS NULL OR (expires_at, id) > ($3::timestamptz, $4::text))
       ORDER BY expires_at, id LIMIT $2`,
      [now.toISOString(), limit, after?.dueAt.toISOString() ?? null, after?.id ?? ''],
    );
  }
}
