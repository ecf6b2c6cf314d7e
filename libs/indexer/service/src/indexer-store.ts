import type { DataSource, QueryRunner } from 'typeorm';
import type { BlockPoint, KnownObservation } from '@stablepay/indexer-domain';
import type { WatchedContractKind } from './log-decoder';
import { insideTransaction } from '@stablepay/node-util';

export interface Checkpoint {
  readonly chain: string;
  /** Last ingested block; null until the follower's first start on this chain. */
  readonly blockNumber: number | null;
  readonly blockHash: string | null;
  /** Last revision of the chain's observation stream acknowledged by the event store (-1: none). */
  readonly streamRevision: number;
}

export interface OutboxEvent {
  readonly eventId: string;
  readonly type: string;
  readonly data: unknown;
  readonly metadata: Record<string, unknown>;
}

export interface OutboxRow extends OutboxEvent {
  readonly seq: number;
}

export interface ObservationRow {
  readonly eventId: string;
  readonly type: string;
  readonly blockNumber: number;
  readonly blockHash: string;
  readonly txHash: string;
  readonly logIndex: number;
  readonly occurrence: number;
  /** The watched address the observation is about (watchedAddressOf): its retraction names it. */
  readonly address: string | undefined;
}

export type WatchKind =
  { readonly table: 'address' } | { readonly table: 'contract'; readonly kind: WatchedContractKind };

export interface Watch {
  readonly address: string;
  readonly table: 'address' | 'contract';
  /** For contracts: what ABI decodes its events. */
  readonly kind: WatchedContractKind | null;
  /** Null: follows the checkpoint. */
  readonly scannedThrough: number | null;
  /** Operator re-scans of the address so far (0 for contracts): part of the event id of what a re-scan finds. */
  readonly rescans: number;
}

/** An operator's re-scan of a deposit address: where its watch now stands. */
export interface Rescan {
  /** False: the address was not watched on the chain; it is now, from the re-scan's first block. */
  readonly existed: boolean;
  /** Every block up to this one counts as scanned: the re-scan covers the blocks after it up to the checkpoint. */
  readonly scannedThrough: number;
  readonly rescans: number;
}

/** A follower's write lost its lease (another process follows the chain now): the step is rolled back. */
export class LeaseLostError extends Error {
  constructor(chain: string) {
    super(`indexer lease on ${chain} was lost to another follower`);
    this.name = 'LeaseLostError';
  }
}

/** A step that writes the follower's state: the fence, then the step's own writes, in one transaction. */
export interface StepWrites {
  readonly chain: string;
  readonly owner: string;
  /** The checkpoint the step was decided from; the write fails if it moved. */
  readonly expectedBlock: number | null;
}

interface CheckpointRow {
  chain: string;
  block_number: string | null;
  block_hash: string | null;
  stream_revision: number;
}

const num = (v: string | number): number => (typeof v === 'number' ? v : Number(v));

function toCheckpoint(row: CheckpointRow): Checkpoint {
  return {
    chain: row.chain,
    blockNumber: row.block_number === null ? null : num(row.block_number),
    blockHash: row.block_hash,
    streamRevision: row.stream_revision,
  };
}

/**
 * The indexer's SQL. Every write a follower makes goes through `step`, which first re-checks the lease and the
 * expected checkpoint under a row lock: a follower whose lease expired (a long pause, a partition) can never
 * overwrite the progress of the one that took over.
 */
export class IndexerStore {
  constructor(private readonly db: DataSource) {}

  /**
   * Takes or renews the chain's lease and returns its checkpoint; null while another live follower holds it.
   * The lease is what makes "one follower per chain" hold across several indexer processes.
   */
  async acquireLease(chain: string, owner: string, ttlMs: number): Promise<Checkpoint | null> {
    const rows = (await this.db.query(
      `INSERT INTO indexer_checkpoints (chain, lease_owner, lease_expires_at)
       VALUES ($1, $2, now() + $3 * interval '1 millisecond')
       ON CONFLICT (chain) DO UPDATE
          SET lease_owner = EXCLUDED.lease_owner, lease_expires_at = EXCLUDED.lease_expires_at
        WHERE indexer_checkpoints.lease_owner IS NULL
           OR indexer_checkpoints.lease_owner = EXCLUDED.lease_owner
           OR indexer_checkpoints.lease_expires_at < now()
       RETURNING chain, block_number::text AS block_number, block_hash, stream_revision`,
      [chain, owner, ttlMs],
    )) as CheckpointRow[];
    const [row] = rows;
    return row ? toCheckpoint(row) : null;
  }

  async releaseLease(chain: string, owner: string): Promise<void> {
    await this.db.query(
      'UPDATE indexer_checkpoints SET lease_owner = NULL, lease_expires_at = NULL WHERE chain = $1 AND lease_owner = $2',
      [chain, owner],
    );
  }

  async checkpoint(chain: string): Promise<Checkpoint | null> {
    const rows = (await this.db.query(
      `SELECT chain, block_number::text AS block_number, block_hash, stream_revision
         FROM indexer_checkpoints WHERE chain = $1`,
      [chain],
    )) as CheckpointRow[];
    const [row] = rows;
    return row ? toCheckpoint(row) : null;
  }

  /** Runs `work` in one transaction after fencing on the lease and the expected checkpoint. */
  async step<T>(fence: StepWrites, work: (q: QueryRunner) => Promise<T>): Promise<T> {
    const q = this.db.createQueryRunner();
    await q.connect();
    try {
      await q.startTransaction();
      try {
        const fenced = await q.query(
          `SELECT 1 FROM indexer_checkpoints
            WHERE chain = $1 AND lease_owner = $2 AND block_number IS NOT DISTINCT FROM $3::bigint
            FOR UPDATE`,
          [fence.chain, fence.owner, fence.expectedBlock],
        );
        if ((fenced as unknown[]).length !== 1) throw new LeaseLostError(fence.chain);
        const result = await insideTransaction(() => work(q));
        await q.commitTransaction();
        return result;
      } catch (error) {
        await q.rollbackTransaction();
        throw error;
      }
    } finally {
      await q.release();
    }
  }

  /** The first pending events of a chain, in the order they must be appended. */
  async pendingOutbox(chain: string, limit: number): Promise<OutboxRow[]> {
    const rows = (await this.db.query(
      // Order by the qualified column: a bare `seq` would sort by the text alias ('10' before '7').
      `SELECT o.seq::text AS seq, o.event_id, o.type, o.data, o.metadata FROM indexer_outbox o
        WHERE o.chain = $1 ORDER BY o.seq LIMIT $2`,
      [chain, limit],
    )) as { seq: string; event_id: string; type: string; data: unknown; metadata: Record<string, unknown> }[];
    return rows.map((r) => ({
      seq: num(r.seq),
      eventId: r.event_id,
      type: r.type,
      data: r.data,
      metadata: r.metadata,
    }));
  }

  /** The event store holds these outbox rows, the last at `streamRevision`: forget them. */
  async acknowledgeOutbox(fence: StepWrites, seqs: readonly number[], streamRevision: number): Promise<void> {
    await this.step(fence, async (q) => {
      await q.query('DELETE FROM indexer_outbox WHERE chain = $1 AND seq = ANY($2::bigint[])', [
        fence.chain,
        seqs.map(String),
      ]);
      await q.query(
        'UPDATE indexer_checkpoints SET stream_revision = $2, updated_at = now() WHERE chain = $1',
        [fence.chain, streamRevision],
      );
    });
  }

  /** Stored block points at or below `below`, newest first (the reorg walk-back reads them page by page). */
  async blockPoints(chain: string, atOrBelow: number, limit: number): Promise<BlockPoint[]> {
    const rows = (await this.db.query(
      `SELECT b.block_number::text AS block_number, b.block_hash FROM indexer_blocks b
        WHERE b.chain = $1 AND b.block_number <= $2 ORDER BY b.block_number DESC LIMIT $3`,
      [chain, atOrBelow, limit],
    )) as { block_number: string; block_hash: string }[];
    return rows.map((r) => ({ number: num(r.block_number), hash: r.block_hash }));
  }

  /** What was already published from these blocks (retracted or not). */
  async knownObservations(chain: string, blockNumbers: readonly number[]): Promise<KnownObservation[]> {
    if (blockNumbers.length === 0) return [];
    const rows = (await this.db.query(
      `SELECT tx_hash, log_index, block_hash, retracted FROM indexer_observations
        WHERE chain = $1 AND block_number = ANY($2::bigint[])`,
      [chain, blockNumbers.map(String)],
    )) as { tx_hash: string; log_index: number; block_hash: string; retracted: boolean }[];
    return rows.map((r) => ({
      txHash: r.tx_hash,
      logIndex: r.log_index,
      blockHash: r.block_hash,
      retracted: r.retracted,
    }));
  }

  /** Watches the main scan covers from block `from` on: those following the checkpoint. */
  async followingWatches(chain: string, checkpoint: number): Promise<Watch[]> {
    return this.watches(chain, 'scanned_through IS NULL OR scanned_through >= $2', checkpoint);
  }

  /** Watches still catching up with the checkpoint. */
  async laggingWatches(chain: string, checkpoint: number): Promise<Watch[]> {
    return this.watches(chain, 'scanned_through < $2', checkpoint);
  }

  private async watches(chain: string, condition: string, checkpoint: number): Promise<Watch[]> {
    const rows = (await this.db.query(
      `SELECT address, 'address' AS tbl, NULL AS kind, scanned_through::text AS scanned_through, rescans
         FROM indexer_watched_addresses WHERE chain = $1 AND (${condition})
       UNION ALL
       SELECT address, 'contract' AS tbl, kind, scanned_through::text AS scanned_through, 0 AS rescans
         FROM indexer_watched_contracts WHERE chain = $1 AND (${condition})`,
      [chain, checkpoint],
    )) as {
      address: string;
      tbl: 'address' | 'contract';
      kind: WatchedContractKind | null;
      scanned_through: string | null;
      rescans: number;
    }[];
    return rows.map((r) => ({
      address: r.address,
      table: r.tbl,
      kind: r.kind,
      scannedThrough: r.scanned_through === null ? null : num(r.scanned_through),
      rescans: Number(r.rescans),
    }));
  }

  /**
   * Adds a watch. Without `fromBlock` it starts at the chain's checkpoint at the time of the call, so a deposit
   * made while the follower is in the middle of a range is still found (the watch catches up on that range).
   * Watching an address twice keeps the first watch (a second scan of old blocks would republish them).
   */
  async addWatch(chain: string, address: string, what: WatchKind, fromBlock?: number): Promise<boolean> {
    const start = fromBlock === undefined ? null : fromBlock - 1;
    const scanned = `COALESCE($3::bigint, (SELECT block_number FROM indexer_checkpoints WHERE chain = $1))`;
    const result =
      what.table === 'address'
        ? await this.db.query(
            `INSERT INTO indexer_watched_addresses (chain, address, scanned_through) VALUES ($1, $2, ${scanned})
             ON CONFLICT (chain, address) DO NOTHING RETURNING address`,
            [chain, address.toLowerCase(), start],
          )
        : await this.db.query(
            `INSERT INTO indexer_watched_contracts (chain, address, kind, scanned_through) VALUES ($1, $2, $4, ${scanned})
             ON CONFLICT (chain, address) DO NOTHING RETURNING address`,
            [chain, address.toLowerCase(), start, what.kind],
          );
    return (result as unknown[]).length > 0;
  }
}

/**
 * Scans a deposit address again from `fromBlock` (an operator's re-scan): its watch moves back to the block before
 * (never forward: a watch already behind it keeps its own start), or is added there, and catches up to the
 * checkpoint as a late watch does. What it finds goes out through the chain's stream like any observation, once:
 * a log still in `indexer_observations` (the reorg window) is not published again, and consumers take a transfer
 * once by its chain, transaction and log index. The follower's own writes of the watch's position are conditional on
 * the position they read, so a re-scan that lands while a step is in flight is not overwritten by it.
 */
export async function rescanWatchedAddress(
  db: DataSource,
  chain: string,
  address: string,
  fromBlock: number,
): Promise<Rescan> {
  const rows = (await db.query(
    `WITH before AS (
       SELECT 1 FROM indexer_watched_addresses WHERE chain = $1 AND address = $2
     )
     INSERT INTO indexer_watched_addresses AS w (chain, address, scanned_through, rescans)
     VALUES ($1, $2, $3::bigint, 1)
     ON CONFLICT (chain, address) DO UPDATE
        SET scanned_through = LEAST(
              COALESCE(w.scanned_through, (SELECT block_number FROM indexer_checkpoints WHERE chain = $1)),
              $3::bigint),
            rescans = w.rescans + 1
     RETURNING scanned_through::text AS scanned_through, rescans, EXISTS (SELECT 1 FROM before) AS existed`,
    [chain, address.toLowerCase(), fromBlock - 1],
  )) as { scanned_through: string; rescans: number; existed: boolean }[];
  const [row] = rows;
  if (!row) throw new Error(`no watch row for ${address} on ${chain} after its re-scan`);
  return { existed: row.existed, scannedThrough: num(row.scanned_through), rescans: Number(row.rescans) };
}

/** Writes of one ingested range or catch-up chunk (inside `step`). */
export async function recordObservations(
  q: QueryRunner,
  chain: string,
  observations: readonly ObservationRow[],
  outbox: readonly OutboxEvent[],
  points: readonly BlockPoint[],
): Promise<void> {
  if (observations.length > 0) {
    await q.query(
      `INSERT INTO indexer_observations
         (event_id, chain, type, block_number, block_hash, tx_hash, log_index, occurrence, address)
       SELECT t.event_id, $1, t.type, t.block_number, t.block_hash, t.tx_hash, t.log_index, t.occurrence, t.address
         FROM unnest($2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::int[], $8::int[], $9::text[])
           AS t(event_id, type, block_number, block_hash, tx_hash, log_index, occurrence, address)`,
      [
        chain,
        observations.map((o) => o.eventId),
        observations.map((o) => o.type),
        observations.map((o) => String(o.blockNumber)),
        observations.map((o) => o.blockHash),
        observations.map((o) => o.txHash),
        observations.map((o) => o.logIndex),
        observations.map((o) => o.occurrence),
        observations.map((o) => o.address ?? null),
      ],
    );
  }
  await appendOutbox(q, chain, outbox);
  if (points.length > 0) {
    // A point already stored for a height has the same hash: the step verified it is still canonical.
    await q.query(
      `INSERT INTO indexer_blocks (chain, block_number, block_hash)
       SELECT $1, t.n, t.h FROM unnest($2::bigint[], $3::text[]) AS t(n, h)
       ON CONFLICT (chain, block_number) DO NOTHING`,
      [chain, points.map((p) => String(p.number)), points.map((p) => p.hash)],
    );
  }
}

export async function appendOutbox(
  q: QueryRunner,
  chain: string,
  outbox: readonly OutboxEvent[],
): Promise<void> {
  if (outbox.length === 0) return;
  // WITH ORDINALITY + ORDER BY: the identity column follows the order the events were decided in.
  await q.query(
    `INSERT INTO indexer_outbox (chain, event_id, type, data, metadata)
     SELECT $1, t.event_id, t.type, t.data::jsonb, t.metadata::jsonb
       FROM unnest($2::text[], $3::text[], $4::text[], $5::text[]) WITH ORDINALITY AS t(event_id, type, data, metadata, ord)
      ORDER BY t.ord`,
    [
      chain,
      outbox.map((e) => e.eventId),
      outbox.map((e) => e.type),
      outbox.map((e) => JSON.stringify(e.data)),
      outbox.map((e) => JSON.stringify(e.metadata)),
    ],
  );
}
