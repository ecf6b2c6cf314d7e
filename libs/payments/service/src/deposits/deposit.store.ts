import type { ClientBase } from 'pg';
import type { DataSource, MigrationInterface, QueryRunner } from 'typeorm';
import { queryWithBoundedLockWait } from '@stablepay/database';

/**
 * The deposit side's working tables (the payment stream stays the truth):
 * - `payment_deposit_addresses`: deposit address -> payment (what an observed transfer belongs to);
 * - `payment_deposit_transfers`: each observed transfer, until it is confirmed or retracted (the confirmation
 *   worker's queue; the observation id finds it again when the indexer retracts it);
 * - `payment_deposit_jobs`: a payment whose chain work (screening, deploy, flag) is to be retried at `next_at`.
 */
export class CreatePaymentDepositTables1767500000000 implements MigrationInterface {
  name = 'CreatePaymentDepositTables1767500000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE IF NOT EXISTS payment_deposit_addresses (
      deposit_address text PRIMARY KEY CHECK (deposit_address ~ '^0x[0-9a-f]{40}$'),
      payment_id text NOT NULL UNIQUE
    )`);
    await q.query(`CREATE TABLE IF NOT EXISTS payment_deposit_transfers (
      observation_id text PRIMARY KEY,
      payment_id text NOT NULL,
      chain text NOT NULL,
      tx_hash text NOT NULL,
      log_index integer NOT NULL,
      block_number bigint NOT NULL,
      state text NOT NULL CHECK (state IN ('observed', 'confirmed', 'retracted'))
    )`);
    await q.query(`CREATE INDEX IF NOT EXISTS payment_deposit_transfers_open
      ON payment_deposit_transfers (chain, block_number) WHERE state = 'observed'`);
    await q.query(`CREATE TABLE IF NOT EXISTS payment_deposit_jobs (
      payment_id text PRIMARY KEY,
      next_at timestamptz NOT NULL,
      attempts integer NOT NULL DEFAULT 0,
      last_error text
    )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE IF EXISTS payment_deposit_jobs');
    await q.query('DROP TABLE IF EXISTS payment_deposit_transfers');
    await q.query('DROP TABLE IF EXISTS payment_deposit_addresses');
  }
}

/**
 * Before 2026-11-23 the confirmation worker could take a transfer from the queue before its payment had recorded
 * it: the confirmation decided nothing, the row was marked confirmed anyway, and the payment stayed pending with
 * its money observed. Every confirmed row goes back to the queue once: for a transfer its payment already holds
 * confirmed the worker appends nothing (the decider ignores it) and marks it again; a stuck one is confirmed now.
 */
export class ReopenUnrecordedDepositConfirmations1767500000100 implements MigrationInterface {
  name = 'ReopenUnrecordedDepositConfirmations1767500000100';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`UPDATE payment_deposit_transfers SET state = 'observed' WHERE state = 'confirmed'`);
  }

  async down(): Promise<void> {
    // Nothing to undo: the rows are confirmed again by the worker.
  }
}

/**
 * `payment_deposit_outflows`: each fund movement out of a deployed deposit the indexer observed (capture, refund,
 * reclaim, recover, rescue, whoever sent it), until its block has the chain's confirmations and the payment records
 * it (`recorded`) or a reorg takes it back first (`retracted`: it never happened).
 */
export class CreatePaymentDepositOutflows1767700000200 implements MigrationInterface {
  name = 'CreatePaymentDepositOutflows1767700000200';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE IF NOT EXISTS payment_deposit_outflows (
      observation_id text PRIMARY KEY,
      payment_id text NOT NULL,
      chain text NOT NULL,
      tx_hash text NOT NULL,
      log_index integer NOT NULL,
      block_number bigint NOT NULL,
      kind text NOT NULL CHECK (kind IN ('captured', 'refunded', 'reclaimed', 'recovered', 'rescued')),
      token text NOT NULL,
      recipient text NOT NULL,
      amount text NOT NULL CHECK (amount ~ '^[0-9]+$'),
      state text NOT NULL CHECK (state IN ('observed', 'recorded', 'retracted'))
    )`);
    await q.query(`CREATE INDEX IF NOT EXISTS payment_deposit_outflows_open
      ON payment_deposit_outflows (chain, block_number) WHERE state = 'observed'`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE IF EXISTS payment_deposit_outflows');
  }
}

/**
 * The block hash of each queued observation (`block_hash`, null on rows queued before it was kept). The worker
 * confirms a transfer, or records an outflow, only while its block is still the chain's block at that height: a
 * reorg shallower than the confirmations whose new fork is already deeper than them when the worker looks (the
 * indexer's retraction not in yet) confirmed the orphaned transfer (payment.deposit_confirmed, then failed with
 * deposit_lost_to_reorg) or recorded the orphaned capture (settled, for good) before this.
 */
export class AddDepositObservationBlockHashes1795622400000 implements MigrationInterface {
  name = 'AddDepositObservationBlockHashes1795622400000';

  async up(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE payment_deposit_transfers ADD COLUMN IF NOT EXISTS block_hash text');
    await q.query('ALTER TABLE payment_deposit_outflows ADD COLUMN IF NOT EXISTS block_hash text');
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE payment_deposit_outflows DROP COLUMN IF EXISTS block_hash');
    await q.query('ALTER TABLE payment_deposit_transfers DROP COLUMN IF EXISTS block_hash');
  }
}

/**
 * `payment_deposit_receipts`: the transactions the payment recorded from a receipt at one confirmation (our own deploy,
 * capture, refund, recover or rescue), each with the block of that receipt, until the worker finds that block still the
 * chain's at the chain's confirmations (`confirmed`: the deployment's or outflow's webhook is sent then), taken back
 * with the transaction not mined again (`retracted`), or an outflow mined again elsewhere (`mined_again`: the indexer's
 * sighting there records and confirms it), or a deploy taken back and on no chain (`lost`: logged, never announced). The indexer reads INDEXER_CONFIRMATIONS behind the head, so a
 * reorg within that depth took such a block back without a sighting to retract: the payment kept a capture on no
 * chain, and a DIRECT payment was announced `payment.settled` from the deploy's receipt alone.
 */
export class CreatePaymentDepositReceipts1795622400700 implements MigrationInterface {
  name = 'CreatePaymentDepositReceipts1795622400700';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE IF NOT EXISTS payment_deposit_receipts (
      receipt_id text PRIMARY KEY,
      payment_id text NOT NULL,
      chain text NOT NULL,
      tx_hash text NOT NULL,
      log_index integer,
      kind text NOT NULL CHECK (kind IN ('deployed', 'captured', 'refunded', 'reclaimed', 'recovered', 'rescued')),
      block_number bigint NOT NULL,
      block_hash text NOT NULL,
      state text NOT NULL CHECK (state IN ('open', 'confirmed', 'retracted', 'mined_again'))
    )`);
    await q.query(`CREATE INDEX IF NOT EXISTS payment_deposit_receipts_open
      ON payment_deposit_receipts (chain, block_number) WHERE state = 'open'`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE IF EXISTS payment_deposit_receipts');
  }
}

const RECEIPT_STATES = "'open', 'confirmed', 'retracted', 'mined_again', 'lost'";

/**
 * A receipt row may be `lost`: a deploy a reorg took back and that is on no chain is closed, not left open for ever
 * (open rows are read oldest first a page at a time, so enough of them would starve every later deploy of the
 * chain). NOT VALID, as every CHECK added to a table in use: ValidateLostDepositReceipts1795622400900 scans it
 * in its own transaction under a lock that lets the worker through. Idempotent: replicas may run it at once.
 */
export class AllowLostDepositReceipts1795622400800 implements MigrationInterface {
  name = 'AllowLostDepositReceipts1795622400800';

  async up(q: QueryRunner): Promise<void> {
    await queryWithBoundedLockWait(
      q,
      `ALTER TABLE payment_deposit_receipts DROP CONSTRAINT IF EXISTS payment_deposit_receipts_state_check,
        ADD CONSTRAINT payment_deposit_receipts_state_check CHECK (state IN (${RECEIPT_STATES})) NOT VALID`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`UPDATE payment_deposit_receipts SET state = 'retracted' WHERE state = 'lost'`);
    await q.query(`ALTER TABLE payment_deposit_receipts DROP CONSTRAINT IF EXISTS payment_deposit_receipts_state_check,
      ADD CONSTRAINT payment_deposit_receipts_state_check
      CHECK (state IN ('open', 'confirmed', 'retracted', 'mined_again'))`);
  }
}

/** Validates the check AllowLostDepositReceipts1795622400800 adds NOT VALID (SHARE UPDATE EXCLUSIVE: writes go on). */
export class ValidateLostDepositReceipts1795622400900 implements MigrationInterface {
  name = 'ValidateLostDepositReceipts1795622400900';

  async up(q: QueryRunner): Promise<void> {
    await q.query(
      'ALTER TABLE payment_deposit_receipts VALIDATE CONSTRAINT payment_deposit_receipts_state_check',
    );
  }

  async down(): Promise<void> {
    // Nothing: the down of AllowLostDepositReceipts1795622400800 puts the earlier, validated constraint back.
  }
}

/**
 * When the worker last read each open receipt row (`checked_at`) and since when its transaction has been undecided
 * (`undecided_since`: pending in the node's pool, or no block at its height). The pass reads never-checked rows first,
 * then the least recently checked, so rows that stay undecided rotate to the back instead of filling every page and
 * starving the chain's later deploys and outflows. Nullable columns without a default: no table rewrite.
 */
export class AddDepositReceiptChecks1795622401000 implements MigrationInterface {
  name = 'AddDepositReceiptChecks1795622401000';

  async up(q: QueryRunner): Promise<void> {
    await queryWithBoundedLockWait(
      q,
      `ALTER TABLE payment_deposit_receipts ADD COLUMN IF NOT EXISTS checked_at timestamptz,
        ADD COLUMN IF NOT EXISTS undecided_since timestamptz`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE payment_deposit_receipts DROP COLUMN IF EXISTS undecided_since,
      DROP COLUMN IF EXISTS checked_at`);
  }
}

/**
 * The block the payment recorded an outflow from (`recorded_block_hash`), kept beside the block the receipt row is now
 * checked at: an outflow mined again in another block is followed there (`block_number`/`block_hash`, as a deploy is)
 * until that block has the chain's confirmations. Closed `mined_again` at once, as before, a capture whose new block a
 * second shallow reorg took back (the transaction dropped, the indexer never having read that block) kept its record
 * for a move on no chain; the undo of such a record must name the block the payment holds it from. Null on rows from
 * before (their block_hash is that block: outflows were never followed). Idempotent; the ALTER waits boundedly.
 */
export class AddDepositReceiptRecordedBlock1796054400300 implements MigrationInterface {
  name = 'AddDepositReceiptRecordedBlock1796054400300';

  async up(q: QueryRunner): Promise<void> {
    await queryWithBoundedLockWait(
      q,
      'ALTER TABLE payment_deposit_receipts ADD COLUMN IF NOT EXISTS recorded_block_hash text',
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE payment_deposit_receipts DROP COLUMN IF EXISTS recorded_block_hash');
  }
}

/**
 * When the worker last read each queued transfer and outflow (`checked_at`). Its pass reads the never-checked rows
 * first, then the least recently checked, as it does receipts (AddDepositReceiptChecks1795622401000): rows that stay
 * queued (an orphaned sighting whose retraction never comes, a height with no block on a node behind, an outflow whose
 * recording keeps failing) rotate to the back instead of filling every page and starving the chain's later transfers
 * and outflows. Nullable columns without a default (no rewrite), idempotent; the ALTERs wait boundedly.
 */
export class AddDepositQueueChecks1796140800900 implements MigrationInterface {
  name = 'AddDepositQueueChecks1796140800900';

  async up(q: QueryRunner): Promise<void> {
    await queryWithBoundedLockWait(
      q,
      'ALTER TABLE payment_deposit_transfers ADD COLUMN IF NOT EXISTS checked_at timestamptz',
    );
    await queryWithBoundedLockWait(
      q,
      'ALTER TABLE payment_deposit_outflows ADD COLUMN IF NOT EXISTS checked_at timestamptz',
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE payment_deposit_outflows DROP COLUMN IF EXISTS checked_at');
    await q.query('ALTER TABLE payment_deposit_transfers DROP COLUMN IF EXISTS checked_at');
  }
}

/** Open receipt rows the worker reads in one pass of a chain. */
const RECEIPT_PAGE = 200;
/** Queued transfers, and queued outflows, the worker reads in one pass of a chain. */
const QUEUE_PAGE = 200;

/** A transaction the payment recorded from its receipt, awaiting the chain's confirmations (log_index null: a deploy). */
export interface RecordedReceipt {
  readonly receipt_id: string;
  readonly payment_id: string;
  readonly chain: string;
  readonly tx_hash: string;
  readonly log_index: number | null;
  readonly kind: 'deployed' | 'captured' | 'refunded' | 'reclaimed' | 'recovered' | 'rescued';
  /** The block the receipt row is checked at: the recorded one, or the block the transaction was mined again in. */
  readonly block_number: string;
  readonly block_hash: string;
  /** The block the payment recorded it from, once followed elsewhere (null: never followed, or a row from before). */
  readonly recorded_block_hash?: string | null;
  /** Read back only: seconds since its transaction was first found undecided (null: never, or decided). */
  readonly undecided_seconds?: number | null;
}

export interface ObservedOutflow {
  readonly observation_id: string;
  readonly payment_id: string;
  readonly chain: string;
  readonly tx_hash: string;
  readonly log_index: number;
  readonly block_number: string;
  /** The block the indexer saw it in; null on rows queued before it was kept. */
  readonly block_hash: string | null;
  readonly kind: 'captured' | 'refunded' | 'reclaimed' | 'recovered' | 'rescued';
  readonly token: string;
  readonly recipient: string;
  readonly amount: string;
}

export interface OpenTransfer {
  readonly observation_id: string;
  readonly payment_id: string;
  readonly chain: string;
  readonly tx_hash: string;
  readonly log_index: number;
  readonly block_number: string;
  /** The block the indexer saw it in; null on rows queued before it was kept. */
  readonly block_hash: string | null;
}

/** Oldest first: by block, then log, then id (a stamped page comes back in no order). */
function inBlockOrder(
  a: { block_number: string; log_index: number; observation_id: string },
  b: { block_number: string; log_index: number; observation_id: string },
): number {
  return (
    Number(BigInt(a.block_number) - BigInt(b.block_number)) ||
    a.log_index - b.log_index ||
    a.observation_id.localeCompare(b.observation_id)
  );
}

export class DepositStore {
  constructor(private readonly db: DataSource) {}

  async addAddress(depositAddress: string, paymentId: string): Promise<void> {
    await this.db.query(
      `INSERT INTO payment_deposit_addresses (deposit_address, payment_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
      [depositAddress.toLowerCase(), paymentId],
    );
  }

  async paymentOf(depositAddress: string): Promise<string | null> {
    const rows: { payment_id: string }[] = await this.db.query(
      'SELECT payment_id FROM payment_deposit_addresses WHERE deposit_address = $1',
      [depositAddress.toLowerCase()],
    );
    return rows[0]?.payment_id ?? null;
  }

  async addTransfer(t: OpenTransfer): Promise<void> {
    await this.db.query(
      `INSERT INTO payment_deposit_transfers
         (observation_id, payment_id, chain, tx_hash, log_index, block_number, block_hash, state)
       VALUES ($1, $2, $3, $4, $5, $6, $7, 'observed') ON CONFLICT DO NOTHING`,
      [t.observation_id, t.payment_id, t.chain, t.tx_hash, t.log_index, t.block_number, t.block_hash],
    );
  }

  async transfer(observationId: string): Promise<(OpenTransfer & { state: string }) | null> {
    const rows: (OpenTransfer & { state: string })[] = await this.db.query(
      'SELECT * FROM payment_deposit_transfers WHERE observation_id = $1',
      [observationId],
    );
    return rows[0] ?? null;
  }

  /**
   * A page of the queued transfers of `chain` whose block is at or below `throughBlock`, stamped as checked: never
   * checked first, then the least recently checked, so rows the pass leaves queued rotate to the back (see
   * AddDepositQueueChecks1796140800900). Answered oldest first. A SELECT over the stamping UPDATE: TypeORM answers an
   * UPDATE with [rows, count], not rows.
   */
  async open(chain: string, throughBlock: number): Promise<OpenTransfer[]> {
    const rows: OpenTransfer[] = await this.db.query(
      `WITH due AS (
         SELECT observation_id FROM payment_deposit_transfers
          WHERE state = 'observed' AND chain = $1 AND block_number <= $2
          ORDER BY checked_at NULLS FIRST, block_number, log_index, observation_id
          LIMIT $3),
       stamped AS (
         UPDATE payment_deposit_transfers t SET checked_at = now() FROM due
          WHERE t.observation_id = due.observation_id
          RETURNING t.observation_id, t.payment_id, t.chain, t.tx_hash, t.log_index, t.block_number, t.block_hash)
       SELECT * FROM stamped`,
      [chain, throughBlock, QUEUE_PAGE],
    );
    return rows.sort(inBlockOrder);
  }

  async mark(observationId: string, state: 'confirmed' | 'retracted'): Promise<void> {
    await this.db.query('UPDATE payment_deposit_transfers SET state = $2 WHERE observation_id = $1', [
      observationId,
      state,
    ]);
  }

  async addOutflow(o: ObservedOutflow): Promise<void> {
    await this.db.query(
      `INSERT INTO payment_deposit_outflows
         (observation_id, payment_id, chain, tx_hash, log_index, block_number, block_hash, kind, token, recipient,
          amount, state)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'observed') ON CONFLICT DO NOTHING`,
      [
        o.observation_id,
        o.payment_id,
        o.chain,
        o.tx_hash,
        o.log_index,
        o.block_number,
        o.block_hash,
        o.kind,
        o.token,
        o.recipient,
        o.amount,
      ],
    );
  }

  async outflow(observationId: string): Promise<(ObservedOutflow & { state: string }) | null> {
    const rows: (ObservedOutflow & { state: string })[] = await this.db.query(
      'SELECT * FROM payment_deposit_outflows WHERE observation_id = $1',
      [observationId],
    );
    return rows[0] ?? null;
  }

  /**
   * A page of the observed outflows of `chain` whose block is at or below `throughBlock` (confirmed deep enough),
   * stamped and rotated as `open` pages transfers; answered oldest first.
   */
  async openOutflows(chain: string, throughBlock: number): Promise<ObservedOutflow[]> {
    const rows: ObservedOutflow[] = await this.db.query(
      `WITH due AS (
         SELECT observation_id FROM payment_deposit_outflows
          WHERE state = 'observed' AND chain = $1 AND block_number <= $2
          ORDER BY checked_at NULLS FIRST, block_number, log_index, observation_id
          LIMIT $3),
       stamped AS (
         UPDATE payment_deposit_outflows o SET checked_at = now() FROM due
          WHERE o.observation_id = due.observation_id
          RETURNING o.observation_id, o.payment_id, o.chain, o.tx_hash, o.log_index, o.block_number, o.block_hash,
            o.kind, o.token, o.recipient, o.amount)
       SELECT * FROM stamped`,
      [chain, throughBlock, QUEUE_PAGE],
    );
    return rows.sort(inBlockOrder);
  }

  async markOutflow(observationId: string, state: 'recorded' | 'retracted'): Promise<void> {
    await this.db.query('UPDATE payment_deposit_outflows SET state = $2 WHERE observation_id = $1', [
      observationId,
      state,
    ]);
  }

  async addReceipt(r: RecordedReceipt): Promise<void> {
    await this.db.query(
      `INSERT INTO payment_deposit_receipts
         (receipt_id, payment_id, chain, tx_hash, log_index, kind, block_number, block_hash, state)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'open') ON CONFLICT DO NOTHING`,
      [
        r.receipt_id,
        r.payment_id,
        r.chain,
        r.tx_hash.toLowerCase(),
        r.log_index,
        r.kind,
        r.block_number,
        r.block_hash.toLowerCase(),
      ],
    );
  }

  /**
   * A page of the open receipts of `chain` whose block is at or below `throughBlock`, stamped as checked: the rows
   * never checked first, then the least recently checked, so rows the pass leaves open (pending in the node's pool,
   * no block at their height yet) rotate to the back and cannot fill every page. Answered in block order, deploys
   * first within a block. A SELECT over the stamping UPDATE: TypeORM answers an UPDATE with [rows, count], not rows.
   */
  async openReceipts(chain: string, throughBlock: number): Promise<RecordedReceipt[]> {
    const rows: RecordedReceipt[] = await this.db.query(
      `WITH due AS (
         SELECT receipt_id FROM payment_deposit_receipts
          WHERE state = 'open' AND chain = $1 AND block_number <= $2
          ORDER BY checked_at NULLS FIRST, block_number, log_index NULLS FIRST, receipt_id
          LIMIT $3),
       stamped AS (
         UPDATE payment_deposit_receipts r SET checked_at = now() FROM due
          WHERE r.receipt_id = due.receipt_id
          RETURNING r.receipt_id, r.payment_id, r.chain, r.tx_hash, r.log_index, r.kind, r.block_number, r.block_hash,
            r.recorded_block_hash, EXTRACT(EPOCH FROM now() - r.undecided_since)::float8 AS undecided_seconds)
       SELECT * FROM stamped`,
      [chain, throughBlock, RECEIPT_PAGE],
    );
    return rows.sort(
      (a, b) =>
        Number(BigInt(a.block_number) - BigInt(b.block_number)) ||
        (a.log_index ?? -1) - (b.log_index ?? -1) ||
        a.receipt_id.localeCompare(b.receipt_id),
    );
  }

  /** The row's transaction is undecided (pending, or no block at its height) since now, unless it already was. */
  async receiptUndecided(receiptId: string): Promise<void> {
    await this.db.query(
      'UPDATE payment_deposit_receipts SET undecided_since = COALESCE(undecided_since, now()) WHERE receipt_id = $1',
      [receiptId],
    );
  }

  async receiptState(receiptId: string): Promise<string | null> {
    const rows: { state: string }[] = await this.db.query(
      'SELECT state FROM payment_deposit_receipts WHERE receipt_id = $1',
      [receiptId],
    );
    return rows[0]?.state ?? null;
  }

  /**
   * The transaction mined again in another block: the receipt is checked there from now on. The block it was first
   * recorded from is kept (set once: a second follow does not overwrite it).
   */
  async followReceipt(receiptId: string, blockNumber: number, blockHash: string): Promise<void> {
    await this.db.query(
      `UPDATE payment_deposit_receipts
          SET recorded_block_hash = COALESCE(recorded_block_hash, block_hash), block_number = $2, block_hash = $3
        WHERE receipt_id = $1`,
      [receiptId, blockNumber, blockHash.toLowerCase()],
    );
  }

  async markReceipt(
    receiptId: string,
    state: 'confirmed' | 'retracted' | 'mined_again' | 'lost',
  ): Promise<void> {
    await this.db.query('UPDATE payment_deposit_receipts SET state = $2 WHERE receipt_id = $1', [
      receiptId,
      state,
    ]);
  }

  async scheduleRetry(paymentId: string, at: Date, error: string): Promise<number> {
    const rows: { attempts: number }[] = await this.db.query(
      `INSERT INTO payment_deposit_jobs (payment_id, next_at, attempts, last_error) VALUES ($1, $2, 1, $3)
       ON CONFLICT (payment_id) DO UPDATE SET next_at = $2, attempts = payment_deposit_jobs.attempts + 1, last_error = $3
       RETURNING attempts`,
      [paymentId, at, error],
    );
    return rows[0]?.attempts ?? 1;
  }

  /**
   * Makes the payment's chain work due now for the worker's timer, unless a retry is scheduled already (its backoff
   * stands): for work no payment event will start, such as the screening of a payer attested before it was screened.
   */
  async wake(paymentId: string, at: Date): Promise<void> {
    await this.db.query(
      `INSERT INTO payment_deposit_jobs (payment_id, next_at, attempts) VALUES ($1, $2, 0) ON CONFLICT DO NOTHING`,
      [paymentId, at],
    );
  }

  async attempts(paymentId: string): Promise<number> {
    const rows: { attempts: number }[] = await this.db.query(
      'SELECT attempts FROM payment_deposit_jobs WHERE payment_id = $1',
      [paymentId],
    );
    return rows[0]?.attempts ?? 0;
  }

  async clearRetry(paymentId: string): Promise<void> {
    await this.db.query('DELETE FROM payment_deposit_jobs WHERE payment_id = $1', [paymentId]);
  }

  async dueRetries(now: Date): Promise<string[]> {
    const rows: { payment_id: string }[] = await this.db.query(
      'SELECT payment_id FROM payment_deposit_jobs WHERE next_at <= $1 ORDER BY next_at LIMIT 50',
      [now],
    );
    return rows.map((r) => r.payment_id);
  }
}

/**
 * The payments recorded on a local test chain that came back without the history the database recorded (the
 * embedded run's recovery of its own anvil chains, never a real chain), by status, for the caller's log: they are
 * not recovered. They keep what was recorded (events are history), but their deposits and funds went with the chain.
 * A payment still waiting for its money is not among them (no chain detected yet): its deposit address is
 * counterfactual, the same on the fresh chain, so it can still be paid there.
 */
export async function paymentsOnLostLocalChain(
  client: ClientBase,
  chain: string,
): Promise<Record<string, number>> {
  const exists = await client.query<{ t: string | null }>("SELECT to_regclass('payments')::text AS t");
  if (!exists.rows[0]?.t) return {};
  const { rows } = await client.query<{ status: string; n: string }>(
    'SELECT status, count(*)::text AS n FROM payments WHERE detected_chain = $1 GROUP BY status ORDER BY status',
    [chain],
  );
  return Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
}
