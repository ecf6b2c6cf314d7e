import type { EntityManager } from 'typeorm';

/** Anything that runs a query: a DataSource or a transaction's EntityManager. */
type Queryable = Pick<EntityManager, 'query'>;

/**
 * The settlement addresses a merchant's settings held, each with its validity interval [valid_from, valid_to)
 * (`merchant_settlement_addresses`, from SettlementAddressChanged.v1; valid_to null for the one held now). Only the
 * last change's time was kept before: a charge that paid A between the changes A -> B and B -> C, read after C, was
 * compared with C and the change to C, and was missed. The history answers which address was in force when the
 * charge was made, however late its log is read.
 */
export async function recordSettlementAddressChange(
  em: Queryable,
  merchantId: string,
  change: { readonly settlementAddress: string; readonly changedAt: string },
): Promise<void> {
  // Idempotent: a redelivered change closes nothing more (the interval it opened starts at its own time) and its
  // row exists.
  await em.query(
    `UPDATE merchant_settlement_addresses SET valid_to = $2
     WHERE merchant_id = $1 AND valid_to IS NULL AND valid_from < $2`,
    [merchantId, change.changedAt],
  );
  await em.query(
    `INSERT INTO merchant_settlement_addresses (merchant_id, settlement_address, valid_from)
     VALUES ($1, $2, $3) ON CONFLICT (merchant_id, valid_from) DO NOTHING`,
    [merchantId, change.settlementAddress, change.changedAt],
  );
}

/**
 * The settlement address the settings held at `at` and since when (ISO), or null when none is known for that time
 * (before the first address, or before the history begins: rows that existed before it start at the last change).
 */
export async function settlementAddressAt(
  db: Queryable,
  merchantId: string,
  at: string,
): Promise<{ readonly address: string; readonly validFrom: string } | null> {
  const rows: Array<{ settlement_address: string; valid_from: Date | string }> = await db.query(
    `SELECT settlement_address, valid_from FROM merchant_settlement_addresses
     WHERE merchant_id = $1 AND valid_from <= $2 AND (valid_to IS NULL OR valid_to > $2)
     ORDER BY valid_from DESC LIMIT 1`,
    [merchantId, at],
  );
  const row = rows[0];
  return row ? { address: row.settlement_address, validFrom: new Date(row.valid_from).toISOString() } : null;
}

/**
 * The settlement address in force at `at` (a charge's block time) that a charge paying `paidTo` then had replaced, or
 * null when it paid no replaced address: the one in force, or the one that replaced it next. A block's clock is not
 * the service's (whole seconds, a node's skew): a charge that paid the new address right after POST /settings and
 * the registry update can carry a block time before the change, where the address in force is the old one, and
 * was announced as paying a replaced address (its fiat settlement failed `settlement_address_replaced`).
 */
export async function replacedSettlementAddressPaid(
  db: Queryable,
  merchantId: string,
  at: string,
  paidTo: string,
): Promise<{ readonly address: string; readonly validFrom: string } | null> {
  const rows: Array<{ settlement_address: string; valid_from: Date | string; next_address: string | null }> =
    await db.query(
      `SELECT h.settlement_address, h.valid_from, n.settlement_address AS next_address
         FROM merchant_settlement_addresses h
         LEFT JOIN merchant_settlement_addresses n ON n.merchant_id = h.merchant_id AND n.valid_from = h.valid_to
        WHERE h.merchant_id = $1 AND h.valid_from <= $2 AND (h.valid_to IS NULL OR h.valid_to > $2)
        ORDER BY h.valid_from DESC LIMIT 1`,
      [merchantId, at],
    );
  const row = rows[0];
  const paid = paidTo.toLowerCase();
  if (!row || paid === row.settlement_address.toLowerCase() || paid === row.next_address?.toLowerCase())
    return null;
  return { address: row.settlement_address, validFrom: new Date(row.valid_from).toISOString() };
}
