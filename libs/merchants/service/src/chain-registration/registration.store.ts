import { queryWithBoundedLockWait } from '@stablepay/database';
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
  /**
   * What the chain's registry held when last read or written (null: not known yet). `signer`/`settlement` are what
   * is asked for; after a change they differ from these until the chain takes the change.
   */
  readonly chain_signer: string | null;
  readonly chain_settlement: string | null;
  /** The transaction that put chain_signer/chain_settlement there, when the service sent or relayed it. */
  readonly chain_tx_hash: string | null;
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

/**
 * What the chain holds, kept apart from what is asked for: a changed settlement address made the row ask for new
 * values and forgot that the registry still held the signer (settings showed the signer `pending`). Old rows: a
 * `registered` row held what it asked for; a mismatch row named the registry's values in `last_error` (the worker's
 * own words, 'the registry holds signer 0x.. and settlement 0x..'); any other is unknown until the worker reads the
 * chain again. Idempotent: the registration worker's process and the gateway both run it.
 */
export class AddMerchantChainHoldings1796140800000 implements MigrationInterface {
  name = 'AddMerchantChainHoldings1796140800000';

  async up(q: QueryRunner): Promise<void> {
    // Bounded lock wait: the gateway reads this table for every settings call (queryWithBoundedLockWait).
    await queryWithBoundedLockWait(
      q,
      `ALTER TABLE merchant_chain_registrations
      ADD COLUMN IF NOT EXISTS chain_signer text,
      ADD COLUMN IF NOT EXISTS chain_settlement text,
      ADD COLUMN IF NOT EXISTS chain_tx_hash text`,
    );
    await q.query(`UPDATE merchant_chain_registrations
        SET chain_signer = signer, chain_settlement = settlement, chain_tx_hash = tx_hash
      WHERE status = 'registered' AND chain_signer IS NULL`);
    await q.query(`UPDATE merchant_chain_registrations
        SET chain_signer = substring(last_error from 'holds signer (0x[0-9a-fA-F]{40})'),
            chain_settlement = substring(last_error from 'and settlement (0x[0-9a-fA-F]{40})')
      WHERE status = 'change_requires_merchant_signature' AND chain_signer IS NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    // Idempotent as up: both migration sets (the worker's and the gateway's) list it.
    await queryWithBoundedLockWait(
      q,
      `ALTER TABLE merchant_chain_registrations
      DROP COLUMN IF EXISTS chain_signer, DROP COLUMN IF EXISTS chain_settlement, DROP COLUMN IF EXISTS chain_tx_hash`,
    );
  }
}

/** The registration table's migrations, in order (the worker's process and the gateway both run them). */
export const MERCHANT_CHAIN_REGISTRATION_MIGRATIONS = [
  CreateMerchantChainRegistrations1767400000000,
  AddMerchantChainHoldings1796140800000,
];

// The row asks for the values the chain was found or made to hold.
const ASKS = `lower(merchant_chain_registrations.signer) = lower(EXCLUDED.signer)
  AND lower(merchant_chain_registrations.settlement) = lower(EXCLUDED.settlement)`;

// The transaction of what the chain holds now: the new one, else the one kept while the holdings stay the same.
const HELD_TX = (signer: string, settlement: string, tx: string) => `COALESCE(${tx},
  CASE WHEN lower(merchant_chain_registrations.chain_signer) = lower(${signer})
        AND lower(merchant_chain_registrations.chain_settlement) = lower(${settlement})
       THEN merchant_chain_registrations.chain_tx_hash END)`;

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
      /** What the registry was read to hold (a mismatch); a `registered` outcome holds the row's values. */
      held?: { readonly signer: string; readonly settlement: string };
      now: Date;
    },
  ): Promise<void> {
    const held =
      outcome.status === 'registered' ? { signer: row.signer, settlement: row.settlement } : outcome.held;
    await this.db.query(
      `UPDATE merchant_chain_registrations
          SET status = $5, tx_hash = COALESCE($6, tx_hash), last_error = $7,
              attempts = attempts + CASE WHEN $5 = 'pending' THEN 1 ELSE 0 END,
              next_attempt_at = $8, updated_at = $9,
              chain_tx_hash = CASE WHEN $10::text IS NULL THEN chain_tx_hash
                                   ELSE ${HELD_TX('$10', '$11', '$6::text')} END,
              chain_signer = COALESCE($10, chain_signer), chain_settlement = COALESCE($11, chain_settlement)
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
        held?.signer ?? null,
        held?.settlement ?? null,
      ],
    );
  }

  /**
   * The chain holds these values now (a relayed MerchantChange, or found there by the change route): the row asks
   * for them and is `registered`. Inserted when the worker has not made the row yet; a row asking for other values
   * (newer settings) is left to the worker, but records what the chain holds.
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
         (merchant_id, chain, on_chain_id, signer, settlement, status, tx_hash, attempts, next_attempt_at, updated_at,
          chain_signer, chain_settlement, chain_tx_hash)
       VALUES ($1, $2, $3, $4, $5, 'registered', $6, 0, $7, $7, $4, $5, $6)
       ON CONFLICT (merchant_id, chain) DO UPDATE
         SET status = CASE WHEN ${ASKS} THEN 'registered' ELSE merchant_chain_registrations.status END,
             tx_hash = CASE WHEN ${ASKS} THEN COALESCE(EXCLUDED.tx_hash, merchant_chain_registrations.tx_hash)
                            ELSE merchant_chain_registrations.tx_hash END,
             last_error = CASE WHEN ${ASKS} THEN NULL ELSE merchant_chain_registrations.last_error END,
             updated_at = EXCLUDED.updated_at,
             chain_tx_hash = ${HELD_TX('EXCLUDED.signer', 'EXCLUDED.settlement', 'EXCLUDED.tx_hash')},
             chain_signer = EXCLUDED.signer, chain_settlement = EXCLUDED.settlement
         WHERE ((${ASKS}) AND (merchant_chain_registrations.status <> 'registered' OR EXCLUDED.tx_hash IS NOT NULL))
            OR lower(merchant_chain_registrations.chain_signer) IS DISTINCT FROM lower(EXCLUDED.signer)
            OR lower(merchant_chain_registrations.chain_settlement) IS DISTINCT FROM lower(EXCLUDED.settlement)
            OR (EXCLUDED.tx_hash IS NOT NULL
                AND merchant_chain_registrations.chain_tx_hash IS DISTINCT FROM EXCLUDED.tx_hash)`,
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
  // Before the services start, so possibly before AddMerchantChainHoldings ran on an older data directory.
  const holdings = await client.query(
    `SELECT 1 FROM information_schema.columns
      WHERE table_name = 'merchant_chain_registrations' AND column_name = 'chain_signer'`,
  );
  const forget =
    holdings.rows.length > 0 ? ', chain_signer = NULL, chain_settlement = NULL, chain_tx_hash = NULL' : '';
  const reset = await client.query(
    `UPDATE merchant_chain_registrations
        SET status = 'pending', attempts = 0, tx_hash = NULL, last_error = NULL, next_attempt_at = now(),
            updated_at = now()${forget}
      WHERE chain = $1`,
    [chain],
  );
  return reset.rowCount ?? 0;
}
