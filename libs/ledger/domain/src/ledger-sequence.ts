/**
 * The charge ledger's cursor order: every row gets the next value of one monotonic ledger sequence when it is FIRST
 * written, whichever path wrote it, and keeps it through every merge (backfill, settlement). Lists page newest first on
 * that sequence (keyset), so a row the indexer writes late appears at the head without shifting pages already read, and
 * a merged row never moves. In the service the sequence is the read model's `seq` column (a database sequence).
 */
export interface LedgerRow<T> {
  readonly seq: bigint;
  readonly row: T;
}

export function upsertLedgerRow<T>(
  existing: LedgerRow<T> | null,
  row: T,
  nextSeq: () => bigint,
): LedgerRow<T> {
  return existing ? { seq: existing.seq, row } : { seq: nextSeq(), row };
}
