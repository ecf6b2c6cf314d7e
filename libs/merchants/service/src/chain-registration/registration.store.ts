import type { ClientBase } from 'pg';
import type { DataSource, MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Where each merchant stands on each chain (`merchant_chain_registrations`): what the operator is to register
 * (the merchant's signer and settlement address as of the merchant stream), and what happened. A row is the
 * durable work item of the registration worker: it survives restarts and is retried until it settles.
 *
 * status: `pending` (to do or retrying; `attempts`, `last_error`, `next_attempt_at`), `registered` (the chain
 * holds exactly these values), `change_requires_merchant_signature` (the chain holds another signer or settlement:
 * the operator cannot change a registered merchant, see docs/chain-operator.md).
 */
export type RegistrationStatus = 'pending' | 'registered' | 'change_requires_merchant_signature';

export interface RegistrationRow {
  readonly merchant_id: string;
  readonly chain: string;
  readonly on_chain_id: string;
  readonly signer: string;
  readonly settlement: string;
  readonly status: RegistrationStatus;
  readonly tx_hash: string | null;
  readonly attempts: number;
  readonly last_error: string | null;
  readonly next_attempt_at: Date;
  readonly updated_at: Date;
}

export class CreateMerchantChainRegistrations1767400000000 implements MigrationInterface {
  name = 'CreateMerchantChainRegistrations1767400000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE IF NOT EXISTS merchant_chain_registrations (
      merchant_id text NOT NULL,
      chain text NOT NULL,
      on_chain_id text NOT NULL,
      signer text NOT NULL,
      settlement text NOT NULL,
      status text NOT NULL CHECK (status IN ('pending', 'registered', 'change_requires_merchant_signature')),
      tx_hash text,
      attempts integer NOT NULL DEFAULT 0,
      last_error text,
      next_attempt_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL,
      PRIMARY KEY (merchant_id, chain)
    )`);
    await q.query(`CREATE INDEX IF NOT EXISTS merchant_chain_registrations_due
      ON merchant_chain_registrations (next_attempt_at) WHERE status = 'pending'`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE IF EXISTS merchant_chain_registrations');
  }
}

export class RegistrationStore {
  constructor(private readonly db: DataSource) {}

  /**
   * Records what the merchant wants on `chain`. A row whose values did not change is left alone (a redelivered
   * event or an unrelated merchant event changes nothing); new values make it pending again.
   */
  async want(row: {
    merchantId: string;
    chain: string;
    onChainId: string;
    signer: string;
    settlement: string;
    now: Date;
  }): Promise<boolean> {
    const result: unknown[] = await this.db.query(
      `INSERT INTO merchant_chain_registrations
         (merchant_id, chain, on_chain_id, signer, settlement, status, attempts, next_attempt_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, 'pending', 0, $6, $6)
       ON CONFLICT (merchant_id, chain) DO UPDATE
         SET signer = EXCLUDED.signer, settlement = EXCLUDED.settlement, status = 'pending', attempts = 0,
             last_error = NULL, tx_hash = NULL, next_attempt_at = EXCLUDED.next_attempt_at,
             updated_at = EXCLUDED.updated_at
         WHERE merchant_chain_registrations.signer <> EXCLUDED.signer
            OR merchant_chain_registrations.settlement <> EXCLUDED.settlement
       RETURNING merchant_id`,
      [row.merchantId, row.chain, row.onChainId, row.signer, row.settlement, row.now],
    );
    return result.length > 0;
  }

  async due(now: Date, limit: number): Promise<RegistrationRow[]> {
    return this.db.query(
      `SELECT * FROM merchant_chain_registrations
        WHERE status = 'pending' AND next_attempt_at <= $1
        ORDER BY next_attempt_at LIMIT $2`,
      [now, limit],
    );
  }

  /** Writes an outcome only if the row still asks for the values that were tried (a newer want wins). */
  async settle(
    row: RegistrationRow,
    outcome: {
      status: RegistrationStatus;
      txHash?: string | null;
      error?: string | null;
      nextAttemptAt?: Date;
      now: Date;
    },
  ): Promise<void> {
    await this.db.query(
      `UPDATE merchant_chain_registrations
          SET status = $5, tx_hash = COALESCE($6, tx_hash), last_error = $7,
              attempts = attempts + CASE WHEN $5 = 'pending' THEN 1 ELSE 0 END,
              next_attempt_at = $8, updated_at = $9
        WHERE merchant_id = $1 AND chain = $2 AND signer = $3 AND settlement = $4`,
      [
        row.merchant_id,
        row.chain,
        row.signer,
        row.settlement,
        outcome.status,
        outcome.txHash ?? null,
        outcome.error ?? null,
        outcome.nextAttemptAt ?? outcome.now,
        outcome.now,
      ],
    );
  }

  /**
   * The chain holds these values now (a relayed MerchantChange, or found there by the change route): the row asks
   * for them and is `registered`. Inserted when the worker has not made the row yet; a row asking for other values
   * (newer settings) is left to the worker.
   */
  async recordOnChain(row: {
    merchantId: string;
    chain: string;
    onChainId: string;
    signer: string;
    settlement: string;
    txHash: string | null;
    now: Date;
  }): Promise<void> {
    await this.db.query(
      `INSERT INTO merchant_chain_registrations
         (merchant_id, chain, on_chain_id, signer, settlement, status, tx_hash, attempts, next_attempt_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, 'registered', $6, 0, $7, $7)
       ON CONFLICT (merchant_id, chain) DO UPDATE
         SET status = 'registered', tx_hash = COALESCE(EXCLUDED.tx_hash, merchant_chain_registrations.tx_hash),
             last_error = NULL, updated_at = EXCLUDED.updated_at
         WHERE lower(merchant_chain_registrations.signer) = lower(EXCLUDED.signer)
           AND lower(merchant_chain_registrations.settlement) = lower(EXCLUDED.settlement)
           AND (merchant_chain_registrations.status <> 'registered' OR EXCLUDED.tx_hash IS NOT NULL)`,
      [row.merchantId, row.chain, row.onChainId, row.signer, row.settlement, row.txHash, row.now],
    );
  }

  async forMerchant(merchantId: string): Promise<RegistrationRow[]> {
    return this.db.query('SELECT * FROM merchant_chain_registrations WHERE merchant_id = $1 ORDER BY chain', [
      merchantId,
    ]);
  }
}

/**
 * A local test chain that came back without the history the database recorded (the embedded run's recovery of its
 * own anvil chains, never a real chain): its registry no longer holds the merchants registered on it, so every row
 * of that chain is pending again from now, whatever it said (`registered`, or a mismatch with values the chain no
 * longer has), and the worker registers the merchants' current values anew. Runs in the caller's transaction,
 * before the services start; answers how many rows it reset.
 */
export async function reregisterMerchantsOnLostLocalChain(
  client: ClientBase,
  chain: string,
): Promise<number> {
  const exists = await client.query<{ t: string | null }>(
    "SELECT to_regclass('merchant_chain_registrations')::text AS t",
  );
  if (!exists.rows[0]?.t) return 0;
  const reset = await client.query(
    `UPDATE merchant_chain_registrations
        SET status = 'pending', attempts = 0, tx_hash = NULL, last_error = NULL, next_attempt_at = now(),
            updated_at = now()
      WHERE chain = $1`,
    [chain],
  );
  return reset.rowCount ?? 0;
}
