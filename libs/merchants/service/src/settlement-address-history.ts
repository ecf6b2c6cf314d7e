import type { EntityManager } from 'typeorm';
import { CHAIN_CLOCK_LAG_SECONDS } from '@stablepay/evm';

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
  // Once per change, in stream order (the projection's revision guard): the stream says which address replaced which,
  // `changedAt` only when. A change appended after another can carry an earlier or equal time (a command retried after
  // losing the append race keeps the time it was decided at; replicas' clocks differ): it still replaces the open
  // address, from just after that one's start, so exactly one address stays open and it is the one the settings hold.
  await em.query(
    `WITH closed AS (
       UPDATE merchant_settlement_addresses
          SET valid_to = GREATEST($3::timestamptz, valid_from + interval '1 millisecond')
        WHERE merchant_id = $1 AND valid_to IS NULL
        RETURNING valid_to)
     INSERT INTO merchant_settlement_addresses (merchant_id, settlement_address, valid_from)
     SELECT $1, $2, COALESCE((SELECT max(valid_to) FROM closed), $3::timestamptz)
     ON CONFLICT (merchant_id, valid_from) DO NOTHING`,
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
 * null when it paid no replaced address: the one in force, or the one that replaced it next when `at` lies within
 * CHAIN_CLOCK_LAG_SECONDS before that change. A block's clock is not the service's (whole seconds, a node's skew): a
 * charge that paid the new address right after POST /settings and the registry update can carry a block time before
 * the change, where the address in force is the old one, and was announced as paying a replaced address (its fiat
 * settlement failed `settlement_address_replaced`). Only that close to the change: after A -> B -> A, a charge that
 * paid A well inside B's interval paid the address B had replaced, though A came back next.
 */
export async function replacedSettlementAddressPaid(
  db: Queryable,
  merchantId: string,
  at: string,
  paidTo: string,
): Promise<{ readonly address: string; readonly validFrom: string } | null> {
  const rows: Array<{
    settlement_address: string;
    valid_from: Date | string;
    valid_to: Date | string | null;
    next_address: string | null;
  }> = await db.query(
    `SELECT h.settlement_address, h.valid_from, h.valid_to, n.settlement_address AS next_address
       FROM merchant_settlement_addresses h
       LEFT JOIN merchant_settlement_addresses n ON n.merchant_id = h.merchant_id AND n.valid_from = h.valid_to
      WHERE h.merchant_id = $1 AND h.valid_from <= $2 AND (h.valid_to IS NULL OR h.valid_to > $2)
      ORDER BY h.valid_from DESC LIMIT 1`,
    [merchantId, at],
  );
  const row = rows[0];
  const paid = paidTo.toLowerCase();
  if (!row || paid === row.settlement_address.toLowerCase()) return null;
  const paidNext =
    row.valid_to !== null &&
    paid === row.next_address?.toLowerCase() &&
    Date.parse(at) >= new Date(row.valid_to).getTime() - CHAIN_CLOCK_LAG_SECONDS * 1000;
  if (paidNext) return null;
  return { address: row.settlement_address, validFrom: new Date(row.valid_from).toISOString() };
}
