import type { DataSource, MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The call an action is about to send, kept durably BEFORE its request fact is appended: a crash between the fact
 * and the broadcast leaves a row that is not `done`, so a retry of the request (same command id) or the next start
 * of the service submits it instead of answering "already requested" with nothing sent. Sending it again is
 * harmless: a merchant signature's digest is single-use on chain and `recover` finds nothing left a second time.
 */
export interface PendingSubmission {
  readonly paymentId: string;
  readonly commandId: string;
  /** CAIP-2 id of the deposit's chain. */
  readonly chain: string;
  readonly to: string;
  readonly data: string;
}

export interface KeptSubmission extends PendingSubmission {
  readonly done: boolean;
  /** The chain refused it at the broadcast or it reverted: nothing moved (see PaymentActions' attempts). */
  readonly failed: boolean;
}

export interface ActionSubmissions {
  /** Records the call (again: a retried request that never reached its fact replaces it and is not done). */
  save(submission: PendingSubmission): Promise<void>;
  find(paymentId: string, commandId: string): Promise<KeptSubmission | undefined>;
  /**
   * The call was sent (its transaction, when known) or is known not to need sending; `failed` when the chain
   * refused or reverted it, so nothing moved.
   */
  markDone(paymentId: string, commandId: string, txHash: string | null, failed?: boolean): Promise<void>;
  /** Calls not done, oldest first (resumed at start). */
  unfinished(limit: number): Promise<PendingSubmission[]>;
}

export const ACTION_SUBMISSIONS = Symbol('ACTION_SUBMISSIONS');

interface Row {
  payment_id: string;
  command_id: string;
  chain: string;
  call_to: string;
  call_data: string;
  done_at: Date | null;
  failed: boolean;
}

const toSubmission = (r: Row): PendingSubmission => ({
  paymentId: r.payment_id,
  commandId: r.command_id,
  chain: r.chain,
  to: r.call_to,
  data: r.call_data,
});

export class PostgresActionSubmissions implements ActionSubmissions {
  constructor(private readonly db: DataSource) {}

  async save(s: PendingSubmission): Promise<void> {
    await this.db.query(
      `INSERT INTO payment_action_submissions (payment_id, command_id, chain, call_to, call_data, created_at)
       VALUES ($1, $2, $3, $4, $5, now())
       ON CONFLICT (payment_id, command_id) DO UPDATE
         SET chain = EXCLUDED.chain, call_to = EXCLUDED.call_to, call_data = EXCLUDED.call_data,
             done_at = NULL, tx_hash = NULL
         WHERE payment_action_submissions.done_at IS NULL`,
      [s.paymentId, s.commandId, s.chain, s.to, s.data],
    );
  }

  async find(paymentId: string, commandId: string) {
    const rows: Row[] = await this.db.query(
      'SELECT * FROM payment_action_submissions WHERE payment_id = $1 AND command_id = $2',
      [paymentId, commandId],
    );
    const row = rows[0];
    return row ? { ...toSubmission(row), done: row.done_at !== null, failed: row.failed } : undefined;
  }

  async markDone(paymentId: string, commandId: string, txHash: string | null, failed = false): Promise<void> {
    // Two submitters can finish one call (a replica resuming it at start while another has it in flight): a landed
    // outcome is never overwritten by the other's refusal or revert, so a retry under the same key is answered as
    // done instead of running again. A failure is replaced by a later success.
    await this.db.query(
      `UPDATE payment_action_submissions
          SET done_at = COALESCE(done_at, now()),
              tx_hash = CASE WHEN $4 AND done_at IS NOT NULL AND NOT failed THEN tx_hash ELSE COALESCE($3, tx_hash) END,
              failed = CASE WHEN done_at IS NULL THEN $4 ELSE failed AND $4 END
        WHERE payment_id = $1 AND command_id = $2`,
      [paymentId, commandId, txHash, failed],
    );
  }

  async unfinished(limit: number): Promise<PendingSubmission[]> {
    const rows: Row[] = await this.db.query(
      'SELECT * FROM payment_action_submissions WHERE done_at IS NULL ORDER BY created_at LIMIT $1',
      [limit],
    );
    return rows.map(toSubmission);
  }
}

/** The same contract in memory (unit and chain tests that run the use cases without a database). */
export class InMemoryActionSubmissions implements ActionSubmissions {
  private readonly rows = new Map<string, KeptSubmission>();

  async save(s: PendingSubmission): Promise<void> {
    const key = `${s.paymentId}|${s.commandId}`;
    if (!this.rows.get(key)?.done) this.rows.set(key, { ...s, done: false, failed: false });
  }

  async find(paymentId: string, commandId: string) {
    return this.rows.get(`${paymentId}|${commandId}`);
  }

  async markDone(
    paymentId: string,
    commandId: string,
    _txHash: string | null,
    failed = false,
  ): Promise<void> {
    const row = this.rows.get(`${paymentId}|${commandId}`);
    if (row)
      this.rows.set(`${paymentId}|${commandId}`, {
        ...row,
        done: true,
        failed: row.done ? row.failed && failed : failed,
      });
  }

  async unfinished(limit: number): Promise<PendingSubmission[]> {
    return [...this.rows.values()].filter((r) => !r.done).slice(0, limit);
  }
}

export class CreatePaymentActionSubmissions1767500000000 implements MigrationInterface {
  name = 'CreatePaymentActionSubmissions1767500000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE IF NOT EXISTS payment_action_submissions (
      payment_id text NOT NULL,
      command_id text NOT NULL,
      chain text NOT NULL,
      call_to text NOT NULL,
      call_data text NOT NULL,
      created_at timestamptz NOT NULL,
      done_at timestamptz,
      tx_hash text,
      PRIMARY KEY (payment_id, command_id)
    )`);
    await q.query(`CREATE INDEX IF NOT EXISTS payment_action_submissions_unfinished
      ON payment_action_submissions (created_at) WHERE done_at IS NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE IF EXISTS payment_action_submissions');
  }
}

/**
 * `failed`: the kept call was refused at the broadcast or reverted on chain, so nothing moved. Its request fact
 * stays in the stream under the command id; the flag tells a retry under the same Idempotency-Key (which the API
 * did not spend on that 4xx/5xx) to run as a new attempt instead of answering the failure as done.
 */
export class AddPaymentActionSubmissionFailures1767600000200 implements MigrationInterface {
  name = 'AddPaymentActionSubmissionFailures1767600000200';

  async up(q: QueryRunner): Promise<void> {
    await q.query(
      'ALTER TABLE payment_action_submissions ADD COLUMN IF NOT EXISTS failed boolean NOT NULL DEFAULT false',
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE payment_action_submissions DROP COLUMN IF EXISTS failed');
  }
}
