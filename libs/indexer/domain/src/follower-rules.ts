/**
 * The pure rules of a chain follower: which blocks to read next, where two forks meet, which logs are new, and
 * how a late-added watch catches up. The follower (libs/indexer/service) does the I/O around them.
 */

export interface BlockRange {
  /** Inclusive. */
  readonly from: number;
  /** Inclusive. */
  readonly to: number;
}

/**
 * The next range to ingest: blocks after the checkpoint up to `head - confirmations`, at most `batchBlocks` of
 * them. A block is only read once `confirmations` blocks sit on top of it (0 = as soon as it is the head).
 * `checkpoint` is the last ingested block (-1 before block 0).
 */
export function nextRange(
  checkpoint: number,
  head: number,
  confirmations: number,
  batchBlocks: number,
): BlockRange | null {
  const target = head - confirmations;
  if (target <= checkpoint) return null;
  return { from: checkpoint + 1, to: Math.min(target, checkpoint + Math.max(1, batchBlocks)) };
}

export interface BlockPoint {
  readonly number: number;
  readonly hash: string;
}

/**
 * The fork point: the highest stored block whose hash is still the canonical hash at its height. A block hash
 * commits to every ancestor, so everything at or below it is unchanged and everything the follower stored above
 * it is orphaned. `canonical` maps heights to the chain's current hashes (absent or null: no block there now).
 * Null when none of the given points is canonical (the fork is deeper than them).
 */
export function findForkPoint(
  stored: readonly BlockPoint[],
  canonical: ReadonlyMap<number, string | null>,
): BlockPoint | null {
  let best: BlockPoint | null = null;
  for (const point of stored) {
    const now = canonical.get(point.number);
    if (now !== undefined && now !== null && now.toLowerCase() === point.hash.toLowerCase()) {
      if (best === null || point.number > best.number) best = point;
    }
  }
  return best;
}

export interface LogIdentity {
  readonly txHash: string;
  readonly logIndex: number;
  readonly blockHash: string;
}

export interface KnownObservation extends LogIdentity {
  /** Retracted observations no longer count as published, but they do count towards the occurrence. */
  readonly retracted: boolean;
}

/**
 * Which candidate logs to publish, each with its occurrence number (see observationKey): a log already published
 * from the same block and not retracted is skipped (a re-scan after a restart or a crash publishes nothing twice),
 * as is a log listed twice among the candidates.
 */
export function planNewObservations<C extends LogIdentity>(
  candidates: readonly C[],
  known: readonly KnownObservation[],
): { readonly candidate: C; readonly occurrence: number }[] {
  const key = (l: LogIdentity): string =>
    `${l.txHash.toLowerCase()}:${l.logIndex}:${l.blockHash.toLowerCase()}`;
  const live = new Set<string>();
  const retractedCount = new Map<string, number>();
  for (const k of known) {
    const id = key(k);
    if (k.retracted) retractedCount.set(id, (retractedCount.get(id) ?? 0) + 1);
    else live.add(id);
  }
  const planned: { candidate: C; occurrence: number }[] = [];
  for (const candidate of candidates) {
    const id = key(candidate);
    if (live.has(id)) continue;
    live.add(id);
    planned.push({ candidate, occurrence: retractedCount.get(id) ?? 0 });
  }
  return planned;
}

export interface WatchCursor {
  readonly address: string;
  /** Every block up to this one has been scanned for this watch. */
  readonly scannedThrough: number;
}

export interface CatchUpChunk extends BlockRange {
  /** The watches this chunk scans, each from the first block it still needs (logs below that are ignored). */
  readonly watches: readonly { readonly address: string; readonly from: number }[];
}

/**
 * A watch added late (or with a start block in the past) lags behind the checkpoint; it is scanned on its own,
 * `batchBlocks` at a time, until it reaches the checkpoint and joins the main scan. The chunk starts at the
 * lowest lagging cursor; watches whose cursor lies inside the chunk are scanned from their own cursor on.
 */
export function nextCatchUpChunk(
  lagging: readonly WatchCursor[],
  checkpoint: number,
  batchBlocks: number,
): CatchUpChunk | null {
  const behind = lagging.filter((w) => w.scannedThrough < checkpoint);
  if (behind.length === 0) return null;
  const from = Math.max(0, Math.min(...behind.map((w) => w.scannedThrough + 1)));
  const to = Math.min(checkpoint, from + Math.max(1, batchBlocks) - 1);
  const watches = behind
    .filter((w) => w.scannedThrough + 1 <= to)
    .map((w) => ({ address: w.address, from: Math.max(from, w.scannedThrough + 1) }));
  return { from, to, watches };
}

export interface FollowerLiveness {
  /** Milliseconds since the epoch, as the injected clock tells it. */
  readonly now: number;
  /** When a step last completed (or the follower started, before its first one). */
  readonly lastPollAt: number;
  /** When the chain's node last answered a call with a result; null: never since the start. */
  readonly lastAnswerAt: number | null;
  readonly lastError: string | null;
  readonly stalledAfterMs: number;
}

/**
 * Why a follower counts as stalled, or null. A node that hangs fails nothing while its calls wait (until the
 * request deadline, and then the next call hangs again), so counting failures never shows it: what shows it is
 * time without a completed step. The reason says whether the node is silent (no result to any call for that long,
 * with the last error if a call failed) or answers while steps still fail (a database that does not answer).
 */
export function followerStallReason(chain: string, liveness: FollowerLiveness): string | null {
  const { now, lastPollAt, lastAnswerAt, lastError, stalledAfterMs } = liveness;
  if (now - lastPollAt < stalledAfterMs) return null;
  const silentSince = Math.max(lastPollAt, lastAnswerAt ?? lastPollAt);
  const seconds = (ms: number): number => Math.floor(ms / 1000);
  if (now - silentSince >= stalledAfterMs) {
    return `${chain} RPC unanswered for ${seconds(now - silentSince)} s${lastError ? ` (last error: ${lastError})` : ''}`;
  }
  return `${chain} no successful poll for ${seconds(now - lastPollAt)} s: ${lastError ?? 'a step still running'}`;
}
