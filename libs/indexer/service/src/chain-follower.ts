import { randomUUID } from 'node:crypto';
import type { QueryRunner } from 'typeorm';
import { deterministicEventId } from '@stablepay/aggregate';
import { InterruptibleSleep, backoffDelay, type EventStore, type NewEvent } from '@stablepay/event-store';
import {
  OBSERVATION_RETRACTED,
  chainStreamId,
  findForkPoint,
  followerStallReason,
  nextCatchUpChunk,
  nextRange,
  observationKey,
  planNewObservations,
  retractionKey,
  type BlockPoint,
  type BlockRange,
  type ObservationRetractedData,
  watchedAddressOf,
} from '@stablepay/indexer-domain';
import { type Clock, type JsonLogger, systemClock } from '@stablepay/util';
import type { BlockHeader, ChainLog, ChainRpc } from './chain-rpc';
import type { FollowedChain } from './indexer.config';
import {
  appendOutbox,
  recordObservations,
  type Checkpoint,
  type IndexerStore,
  type ObservationRow,
  type OutboxEvent,
  type StepWrites,
  type Watch,
} from './indexer-store';
import {
  ERC20_TRANSFER_TOPIC,
  addressTopic,
  decodeContractEvent,
  decodeErc20Transfer,
  isObservedType,
  type DecodedObservation,
} from './log-decoder';

export interface FollowerSettings {
  readonly chain: FollowedChain;
  readonly pollMs: number;
  readonly batchBlocks: number;
  readonly reorgWindow: number;
  /** How long a follower's claim on its chain lasts without renewal (default: max(30 s, 10 polls)). */
  readonly leaseMs?: number;
  /**
   * Who holds the chain's lease (default: a fresh id per follower). A follower re-takes a lease held under its own
   * owner at once, so a stable owner lets a restart after a kill -9 follow without waiting for the dead run's lease
   * to expire. Only for a deployment where one process at a time uses the value (the embedded run, under its data
   * directory's lock): two live followers sharing it would both follow the chain.
   */
  readonly leaseOwner?: string;
  /** Events per event-store append when draining the outbox (default 500). */
  readonly appendBatch?: number;
  /** Addresses per eth_getLogs filter (default 500; nodes limit the size of topic and address lists). */
  readonly filterChunk?: number;
  /** Time without a completed step after which the follower counts as stalled (default: see defaultStalledAfterMs). */
  readonly stalledAfterMs?: number;
}

/** A few polls, at least 30 s: a node slower than that for one call is already a problem worth a look. */
export function defaultStalledAfterMs(pollMs: number): number {
  return Math.max(30_000, pollMs * 3);
}

/** What one step of the follower did. */
export type StepOutcome = 'progressed' | 'idle' | 'not-leader';

/** The follower cannot go on without an operator (wrong chain behind the URL, a reorg deeper than the window). */
export class FollowerHaltedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'FollowerHaltedError';
  }
}

/** The chain changed while a range was being read; the step is dropped and retried (the next step sees the reorg). */
class ChainMovedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ChainMovedError';
  }
}

export interface FollowerStatus {
  readonly chain: string;
  readonly running: boolean;
  readonly checkpoint: number | null;
  readonly halted: string | null;
  readonly lastError: string | null;
  /** The chain head the node last reported (null before its first answer). */
  readonly head: number | null;
  /** Since the last completed step, or the start before the first one (null while not running). */
  readonly secondsSinceLastPoll: number | null;
  /** Why the follower counts as stalled (no completed step for `stalledAfterMs`), or null. */
  readonly stalled: string | null;
}

/**
 * Follows one chain and publishes what it sees to the chain's observation stream (`chain-<caip2>`).
 *
 * Each step, under a lease on the chain:
 * 1. drain the outbox: append pending events to the stream with the expected revision, then forget them;
 * 2. check the checkpoint block is still canonical (the next block's parent hash, or the checkpoint's own hash
 *    when there is nothing new); if not, walk the stored block hashes back to the fork point, queue a retraction
 *    of every observation above it and rewind the checkpoint there (one transaction);
 * 3. let a watch added late catch up with the checkpoint, one range at a time;
 * 4. read the next range up to `head - confirmations`: logs of watched addresses and contracts, the headers of the
 *    blocks they came from (their hashes are verified against the logs), then record observations, outbox events,
 *    block hashes and the new checkpoint in one transaction; then drain again.
 *
 * Safety: the database transaction is the commit point, the event store append comes after it and is idempotent
 * (deterministic event ids, appended in outbox order at the expected revision; an append that landed before a
 * crash is recognised by reading the stream tail). So a crash anywhere loses nothing and publishes nothing twice,
 * and a restart resumes from the checkpoint, re-checking it against the chain first (a reorg while down is found).
 */
export class ChainFollower {
  private readonly owner: string;
  private readonly streamId: string;
  private readonly leaseMs: number;
  private readonly appendBatch: number;
  private readonly filterChunk: number;
  private readonly stalledAfterMs: number;
  private readonly rpc: ChainRpc;
  private readonly sleeper = new InterruptibleSleep();
  private loop: Promise<void> | undefined;
  private stopping = false;
  private chainIdChecked = false;
  private halted: FollowerHaltedError | null = null;
  private lastError: string | null = null;
  private lastCheckpoint: number | null = null;
  private head: number | null = null;
  /** When the last step completed, or the loop started (ms, injected clock). */
  private lastPollAt: number | null = null;
  private lastAnswerAt: number | null = null;

  constructor(
    private readonly settings: FollowerSettings,
    rpc: ChainRpc,
    private readonly store: IndexerStore,
    private readonly events: EventStore,
    private readonly logger: Pick<JsonLogger, 'log' | 'warn' | 'error'>,
    private readonly clock: Clock = systemClock,
  ) {
    this.streamId = chainStreamId(settings.chain.caip2);
    this.owner = settings.leaseOwner ?? randomUUID();
    this.leaseMs = settings.leaseMs ?? Math.max(30_000, settings.pollMs * 10);
    this.appendBatch = settings.appendBatch ?? 500;
    this.filterChunk = settings.filterChunk ?? 500;
    this.stalledAfterMs = settings.stalledAfterMs ?? defaultStalledAfterMs(settings.pollMs);
    this.rpc = recordingAnswers(rpc, () => {
      this.lastAnswerAt = this.clock.now().getTime();
    });
  }

  get chain(): string {
    return this.settings.chain.caip2;
  }

  status(): FollowerStatus {
    const running = this.loop !== undefined;
    const now = this.clock.now().getTime();
    const lastPollAt = running ? this.lastPollAt : null;
    const stalled =
      lastPollAt === null || this.halted !== null
        ? null
        : followerStallReason(this.chain, {
            now,
            lastPollAt,
            lastAnswerAt: this.lastAnswerAt,
            lastError: this.lastError,
            stalledAfterMs: this.stalledAfterMs,
          });
    return {
      chain: this.chain,
      running,
      checkpoint: this.lastCheckpoint,
      halted: this.halted?.message ?? null,
      lastError: this.lastError,
      head: this.head,
      secondsSinceLastPoll: lastPollAt === null ? null : Math.max(0, now - lastPollAt) / 1000,
      stalled,
    };
  }

  /** Starts the polling loop (idempotent). */
  start(): void {
    if (this.loop) return;
    this.stopping = false;
    // A follower that never completes a step is stalled counting from its start.
    this.lastPollAt = this.clock.now().getTime();
    this.loop = this.run();
  }

  /** Stops the loop after the current step and hands the chain's lease back, so a successor starts at once. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.sleeper.wake();
    await this.loop;
    this.loop = undefined;
    await this.store.releaseLease(this.chain, this.owner).catch(() => undefined);
  }

  /** Steps until the follower has ingested everything confirmed at the time of the call (tests, benchmarks). */
  async catchUp(maxSteps = 10_000): Promise<void> {
    for (let i = 0; i < maxSteps; i++) {
      const outcome = await this.step();
      if (outcome === 'not-leader') throw new Error(`${this.chain}: another follower holds the lease`);
      if (outcome === 'idle') return;
    }
    throw new Error(`${this.chain}: not caught up after ${maxSteps} steps`);
  }

  private async run(): Promise<void> {
    let failures = 0;
    while (!this.stopping) {
      let outcome: StepOutcome;
      try {
        outcome = await this.step();
        failures = 0;
        this.lastError = null;
      } catch (error) {
        if (error instanceof FollowerHaltedError) {
          this.halted = error;
          this.logger.error({ msg: 'chain follower halted', chain: this.chain, error: error.message });
          return;
        }
        failures++;
        this.lastError = error instanceof Error ? error.message : String(error);
        // Transient (node or database unreachable, chain moved mid-read): back off and retry the same step.
        this.logger.warn({
          msg: 'chain follower step failed',
          chain: this.chain,
          attempt: failures,
          error: this.lastError,
        });
        await this.sleeper.sleep(
          backoffDelay({ initialMs: Math.min(this.settings.pollMs, 200), maxMs: 30_000 }, failures - 1),
        );
        continue;
      }
      if (outcome !== 'progressed') await this.sleeper.sleep(this.settings.pollMs);
    }
  }

  /**
   * One step (see the class comment). 'progressed': there is more to do at once. A completed step is a successful
   * poll, 'not-leader' included: another member follows the chain, and this one did what it had to.
   */
  async step(): Promise<StepOutcome> {
    const outcome = await this.poll();
    this.lastPollAt = this.clock.now().getTime();
    return outcome;
  }

  private async poll(): Promise<StepOutcome> {
    if (this.halted) throw this.halted;
    const checkpoint = await this.store.acquireLease(this.chain, this.owner, this.leaseMs);
    if (checkpoint === null) return 'not-leader';
    await this.checkChainId();
    let cp = await this.drain(checkpoint);
    this.lastCheckpoint = cp.blockNumber;
    const head = await this.rpc.blockNumber();
    this.head = head;
    const confirmations = this.settings.chain.confirmations;

    if (cp.blockNumber === null) {
      await this.initialise(cp, head);
      return 'progressed';
    }
    const range = nextRange(cp.blockNumber, head, confirmations, this.settings.batchBlocks);

    // Is the checkpoint still on the canonical chain?
    let first: BlockHeader | null = null;
    if (range) {
      first = await this.rpc.header(range.from);
      if (first === null) return 'idle'; // the node's head moved back under us; look again next poll
      if (cp.blockHash !== null && first.parentHash !== cp.blockHash) {
        await this.rewindToForkPoint(cp, head);
        await this.drain(await this.requireCheckpoint());
        return 'progressed';
      }
    } else if (cp.blockHash !== null) {
      const tip = cp.blockNumber <= head ? await this.rpc.header(cp.blockNumber) : null;
      if (tip === null || tip.hash !== cp.blockHash) {
        await this.rewindToForkPoint(cp, head);
        await this.drain(await this.requireCheckpoint());
        return 'progressed';
      }
    }

    if (await this.catchUpLaggingWatches(cp)) {
      await this.drain(await this.requireCheckpoint());
      return 'progressed';
    }
    if (range === null || first === null) return 'idle';

    await this.ingest(cp, range, first);
    cp = await this.drain(await this.requireCheckpoint());
    this.lastCheckpoint = cp.blockNumber;
    return range.to < head - confirmations ? 'progressed' : 'idle';
  }

  // ------------------------------------------------------------------------------------------------ checkpoint

  private async checkChainId(): Promise<void> {
    if (this.chainIdChecked) return;
    const actual = await this.rpc.chainId();
    if (actual !== this.settings.chain.chainId) {
      throw new FollowerHaltedError(
        `the RPC URL configured for ${this.chain} serves chain id ${actual}: refusing to index another chain under its name`,
      );
    }
    this.chainIdChecked = true;
  }

  /** First start on this chain: the checkpoint becomes the block before the start block. */
  private async initialise(cp: Checkpoint, head: number): Promise<void> {
    const configured = this.settings.chain.startBlock;
    const start =
      configured === 'latest' ? Math.max(0, head - this.settings.chain.confirmations) : configured;
    const before = start - 1;
    const header = before >= 0 ? await this.rpc.header(before) : null;
    if (before >= 0 && header === null) {
      // A node still syncing, or a start block set ahead of time: retried until the chain gets there.
      throw new Error(
        `${this.chain}: waiting for block ${before} (start block ${start}; the node's head is ${head})`,
      );
    }
    await this.store.step(this.fence(cp), async (q) => {
      await q.query(
        'UPDATE indexer_checkpoints SET block_number = $2, block_hash = $3, updated_at = now() WHERE chain = $1',
        [this.chain, before, header?.hash ?? null],
      );
      // Watches added before the first start (no checkpoint then) follow from the start block.
      if (header) {
        await q.query(
          'INSERT INTO indexer_blocks (chain, block_number, block_hash) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING',
          [this.chain, header.number, header.hash],
        );
      }
    });
    this.logger.log({ msg: 'chain follower initialised', chain: this.chain, startBlock: start });
  }

  private async requireCheckpoint(): Promise<Checkpoint> {
    const cp = await this.store.checkpoint(this.chain);
    if (cp === null) throw new Error(`${this.chain}: checkpoint row disappeared`);
    return cp;
  }

  private fence(cp: Checkpoint): StepWrites {
    return { chain: this.chain, owner: this.owner, expectedBlock: cp.blockNumber };
  }

  // ------------------------------------------------------------------------------------------------ publishing

  /**
   * Appends the outbox to the stream in order. The expected revision makes the append exact: a retry of an
   * append that already landed (crash before the acknowledgement) is recognised by reading the stream tail.
   */
  private async drain(checkpoint: Checkpoint): Promise<Checkpoint> {
    let revision = checkpoint.streamRevision;
    for (;;) {
      const rows = await this.store.pendingOutbox(this.chain, this.appendBatch);
      const last = rows[rows.length - 1];
      if (last === undefined) return { ...checkpoint, streamRevision: revision };
      const events: NewEvent[] = rows.map((r) => ({
        id: r.eventId,
        type: r.type,
        data: r.data,
        metadata: r.metadata,
      }));
      try {
        const result = await this.events.appendToStream(this.streamId, events, {
          expectedRevision: revision < 0 ? 'no_stream' : revision,
        });
        revision = result.nextExpectedRevision;
        await this.store.acknowledgeOutbox(
          this.fence(checkpoint),
          rows.map((r) => r.seq),
          revision,
        );
      } catch (error) {
        const reconciled = await this.reconcileStreamTail(checkpoint, revision);
        if (reconciled === null) throw error;
        revision = reconciled;
      }
    }
  }

  /**
   * The stream holds events past the acknowledged revision: appends that landed before the follower could record
   * them. They must be exactly the head of the outbox, in order; they are acknowledged and draining goes on.
   * Anything else means another writer uses this chain's stream, and the follower halts. Null: the stream has no
   * such tail (the append failed for another reason).
   */
  private async reconcileStreamTail(checkpoint: Checkpoint, revision: number): Promise<number | null> {
    const tail = await this.events.readStream(this.streamId, { fromRevision: revision + 1 });
    if (tail.length === 0) return null;
    const rows = await this.store.pendingOutbox(this.chain, tail.length);
    tail.forEach((event, i) => {
      if (rows[i]?.eventId !== event.id) {
        throw new FollowerHaltedError(
          `stream ${this.streamId} holds event ${event.id} at revision ${event.revision} that this follower did not ` +
            'queue: is another indexer writing this chain?',
        );
      }
    });
    const lastEvent = tail[tail.length - 1];
    if (lastEvent === undefined) return null;
    await this.store.acknowledgeOutbox(
      this.fence(checkpoint),
      rows.slice(0, tail.length).map((r) => r.seq),
      lastEvent.revision,
    );
    this.logger.log({
      msg: 'acknowledged events appended before a restart',
      chain: this.chain,
      events: tail.length,
    });
    return lastEvent.revision;
  }

  // ------------------------------------------------------------------------------------------------ reorgs

  /**
   * Walks the stored block hashes back from the checkpoint to the highest one still canonical, then, in one
   * transaction: queues a retraction of every live observation above it, forgets the orphaned blocks, rewinds
   * watches that had scanned past it and moves the checkpoint there. Re-ingestion follows in the next steps.
   */
  private async rewindToForkPoint(cp: Checkpoint, head: number): Promise<void> {
    const from = cp.blockNumber;
    if (from === null) return;
    let fork: BlockPoint | null = null;
    let below = from;
    for (;;) {
      const page = await this.store.blockPoints(this.chain, below, 64);
      if (page.length === 0) break;
      const canonical = await this.rpc.headers(page.filter((p) => p.number <= head).map((p) => p.number));
      fork = findForkPoint(page, new Map([...canonical].map(([n, h]) => [n, h?.hash ?? null])));
      if (fork) break;
      const lowest = page[page.length - 1];
      if (lowest === undefined || lowest.number === 0) break;
      below = lowest.number - 1;
    }
    if (fork === null) {
      throw new FollowerHaltedError(
        `${this.chain}: reorg deeper than the stored window (no stored block at or below ${from} is canonical); ` +
          'INDEXER_REORG_WINDOW may be too small. Resolve by hand before restarting.',
      );
    }
    const forkPoint = fork;
    const occurredAt = this.clock.now().toISOString();
    const retracted = await this.store.step(this.fence(cp), async (q) => {
      const live = (await q.query(
        `UPDATE indexer_observations SET retracted = true
          WHERE chain = $1 AND block_number > $2 AND NOT retracted
          RETURNING event_id, type, block_number::text AS block_number, block_hash, tx_hash, log_index, address`,
        [this.chain, forkPoint.number],
      )) as unknown;
      const rows = updatedRows<{
        event_id: string;
        type: string;
        block_number: string;
        block_hash: string;
        tx_hash: string;
        log_index: number;
        address: string | null;
      }>(live).sort((a, b) => Number(a.block_number) - Number(b.block_number) || a.log_index - b.log_index);
      const outbox: OutboxEvent[] = rows.map((r) => {
        const observationType = r.type;
        if (!isObservedType(observationType))
          throw new Error(`unexpected observation type ${observationType}`);
        const data: ObservationRetractedData = {
          chain: this.chain,
          observationId: r.event_id,
          observationType,
          txHash: r.tx_hash,
          logIndex: r.log_index,
          blockNumber: String(Number(r.block_number)),
          blockHash: r.block_hash,
          reason: 'reorg',
          forkBlockNumber: String(forkPoint.number),
          forkBlockHash: forkPoint.hash,
          ...(r.address !== null ? { address: r.address } : {}),
        };
        return {
          eventId: deterministicEventId(this.streamId, retractionKey(r.event_id), 0),
          type: OBSERVATION_RETRACTED,
          data,
          metadata: { occurredAt },
        };
      });
      await appendOutbox(q, this.chain, outbox);
      await q.query('DELETE FROM indexer_blocks WHERE chain = $1 AND block_number > $2', [
        this.chain,
        forkPoint.number,
      ]);
      for (const table of ['indexer_watched_addresses', 'indexer_watched_contracts']) {
        await q.query(
          `UPDATE ${table} SET scanned_through = $2 WHERE chain = $1 AND scanned_through > $2 AND scanned_through <= $3`,
          [this.chain, forkPoint.number, from],
        );
      }
      await q.query(
        'UPDATE indexer_checkpoints SET block_number = $2, block_hash = $3, updated_at = now() WHERE chain = $1',
        [this.chain, forkPoint.number, forkPoint.hash],
      );
      return outbox.length;
    });
    this.logger.warn({
      msg: 'chain reorganisation: retracted observations above the fork point',
      chain: this.chain,
      checkpoint: from,
      forkBlock: forkPoint.number,
      depth: from - forkPoint.number,
      retracted,
    });
  }

  // ------------------------------------------------------------------------------------------------ ingestion

  /** Reads one range for the watches that follow the checkpoint and records it (see the class comment, 4). */
  private async ingest(cp: Checkpoint, range: BlockRange, first: BlockHeader): Promise<void> {
    const checkpoint = cp.blockNumber ?? -1;
    const watches = await this.store.followingWatches(this.chain, checkpoint);
    const logs = await this.fetchLogs(
      range,
      // Blocks no watch has scanned yet (or above a fork point, whose observations are still known): plain ids.
      watches.map((w) => ({
        watch: { ...w, rescans: 0 },
        from: Math.max(range.from, (w.scannedThrough ?? -1) + 1),
      })),
    );
    const headers = await this.rpc.headers([range.from, range.to, ...logs.map((l) => l.log.blockNumber)]);
    const again = headers.get(range.from);
    const last = headers.get(range.to);
    if (!again || again.hash !== first.hash || !last) {
      throw new ChainMovedError(
        `${this.chain}: blocks ${range.from}..${range.to} changed while they were read`,
      );
    }
    const { observations, outbox, points } = await this.decide(logs, headers);
    points.push({ number: first.number, hash: first.hash }, { number: last.number, hash: last.hash });
    // Watches that joined with a start block ahead of the checkpoint now follow it.
    const joined = watches.filter((w) => w.scannedThrough !== null && w.scannedThrough <= range.to);
    await this.store.step(this.fence(cp), async (q) => {
      await recordObservations(q, this.chain, observations, outbox, points);
      await this.markFollowing(q, joined, checkpoint);
      await q.query(
        'UPDATE indexer_checkpoints SET block_number = $2, block_hash = $3, updated_at = now() WHERE chain = $1',
        [this.chain, range.to, last.hash],
      );
      await this.prune(q, range.to);
    });
  }

  /**
   * One chunk of catch-up for watches behind the checkpoint. The checkpoint was verified canonical by this step;
   * it is verified again after the logs are read, and every log's block hash against the chain, so nothing from
   * another fork is recorded. Returns false when no watch lags.
   */
  private async catchUpLaggingWatches(cp: Checkpoint): Promise<boolean> {
    const checkpoint = cp.blockNumber;
    if (checkpoint === null || cp.blockHash === null) return false;
    const lagging = await this.store.laggingWatches(this.chain, checkpoint);
    // Keyed by table too: the same address may be watched as a deposit address and as a contract.
    const key = (w: Watch): string => `${w.table}:${w.address}`;
    const byKey = new Map(lagging.map((w) => [key(w), w]));
    const chunk = nextCatchUpChunk(
      lagging.map((w) => ({ address: key(w), scannedThrough: w.scannedThrough ?? checkpoint })),
      checkpoint,
      this.settings.batchBlocks,
    );
    if (chunk === null) return false;
    const scans = chunk.watches.flatMap((c) => {
      const watch = byKey.get(c.address);
      return watch ? [{ watch, from: c.from }] : [];
    });
    const logs = await this.fetchLogs(chunk, scans);
    const headers = await this.rpc.headers([checkpoint, ...logs.map((l) => l.log.blockNumber)]);
    if (headers.get(checkpoint)?.hash !== cp.blockHash) {
      throw new ChainMovedError(`${this.chain}: the checkpoint block changed while watches caught up`);
    }
    const { observations, outbox, points } = await this.decide(logs, headers);
    const done = chunk.to >= checkpoint;
    await this.store.step(this.fence(cp), async (q) => {
      await recordObservations(q, this.chain, observations, outbox, points);
      for (const table of ['address', 'contract'] as const) {
        const mine = scans.filter((s) => s.watch.table === table);
        if (mine.length === 0) continue;
        // Only where the watch still stands where this chunk read it: an operator's re-scan moved back meanwhile
        // must not be overwritten by the position this chunk reached.
        await q.query(
          `UPDATE ${table === 'address' ? 'indexer_watched_addresses' : 'indexer_watched_contracts'} w
              SET scanned_through = $4
             FROM unnest($2::text[], $3::bigint[]) AS r(address, scanned_through)
            WHERE w.chain = $1 AND w.address = r.address AND w.scanned_through = r.scanned_through`,
          [
            this.chain,
            mine.map((s) => s.watch.address),
            mine.map((s) => String(s.watch.scannedThrough ?? checkpoint)),
            done ? null : chunk.to,
          ],
        );
      }
    });
    // Every new deposit address goes through here once; only a catch-up that found something is worth a line.
    if (outbox.length > 0) {
      this.logger.log({
        msg: 'late watches caught up',
        chain: this.chain,
        from: chunk.from,
        to: chunk.to,
        watches: scans.length,
        observed: outbox.length,
      });
    }
    return true;
  }

  private async markFollowing(q: QueryRunner, watches: readonly Watch[], checkpoint: number): Promise<void> {
    for (const table of ['address', 'contract'] as const) {
      const addresses = watches.filter((w) => w.table === table).map((w) => w.address);
      if (addresses.length === 0) continue;
      // Not a watch an operator's re-scan moved behind the checkpoint meanwhile: it catches up first.
      await q.query(
        `UPDATE ${table === 'address' ? 'indexer_watched_addresses' : 'indexer_watched_contracts'}
            SET scanned_through = NULL WHERE chain = $1 AND address = ANY($2::text[]) AND scanned_through >= $3`,
        [this.chain, addresses, checkpoint],
      );
    }
  }

  /**
   * Drops block hashes and observation records below the reorg window: those blocks are final for the indexer.
   * Both go by the same floor, so a fork point the walk-back can still find never has pruned observations above it.
   */
  private async prune(q: QueryRunner, checkpoint: number): Promise<void> {
    const floor = checkpoint - this.settings.reorgWindow;
    if (floor <= 0) return;
    await q.query('DELETE FROM indexer_blocks WHERE chain = $1 AND block_number < $2', [this.chain, floor]);
    await q.query('DELETE FROM indexer_observations WHERE chain = $1 AND block_number < $2', [
      this.chain,
      floor,
    ]);
  }

  /** eth_getLogs for the given watches over a range: Transfers to watched addresses, every event of watched contracts. */
  private async fetchLogs(
    range: BlockRange,
    scans: readonly { readonly watch: Watch; readonly from: number }[],
  ): Promise<ScannedLog[]> {
    const addresses = scans.filter((s) => s.watch.table === 'address');
    const contracts = scans.filter((s) => s.watch.table === 'contract');
    const addressScans = new Map(addresses.map((s) => [s.watch.address, s]));
    const contractScans = new Map(contracts.map((s) => [s.watch.address, s]));
    const requests: Promise<ChainLog[]>[] = [];
    for (const part of chunks(addresses, this.filterChunk)) {
      requests.push(
        this.rpc.getLogs({
          fromBlock: range.from,
          toBlock: range.to,
          topics: [ERC20_TRANSFER_TOPIC, null, part.map((s) => addressTopic(s.watch.address))],
        }),
      );
    }
    for (const part of chunks(contracts, this.filterChunk)) {
      requests.push(
        this.rpc.getLogs({
          fromBlock: range.from,
          toBlock: range.to,
          address: part.map((s) => s.watch.address),
        }),
      );
    }
    const { caip2, chainId } = this.settings.chain;
    const out: ScannedLog[] = [];
    for (const log of (await Promise.all(requests)).flat()) {
      if (log.blockNumber < range.from || log.blockNumber > range.to) continue;
      let decoded: DecodedObservation | null = null;
      let scan: { readonly watch: Watch; readonly from: number } | undefined;
      const contractScan = contractScans.get(log.address.toLowerCase());
      if (contractScan?.watch.kind) {
        decoded = decodeContractEvent(contractScan.watch.kind, caip2, log);
        scan = contractScan;
        if (decoded === null && log.topics[0] !== ERC20_TRANSFER_TOPIC) {
          this.logger.warn({
            msg: 'log not in the watched contract ABI; skipped',
            chain: caip2,
            tx: log.txHash,
            logIndex: log.logIndex,
          });
        }
      }
      if (decoded === null) {
        // Topic 2 of an ERC-20 Transfer is the recipient, left-padded to 32 bytes.
        const recipient = log.topics[2];
        scan = recipient === undefined ? undefined : addressScans.get(`0x${recipient.slice(26)}`);
        decoded = scan ? decodeErc20Transfer(caip2, chainId, log) : null;
      }
      if (!decoded || !scan || log.blockNumber < scan.from) continue;
      out.push({ log, decoded, rescans: scan.watch.rescans });
    }
    // Block order, then log order: the stream lists observations as the chain ordered them.
    return out.sort((a, b) => a.log.blockNumber - b.log.blockNumber || a.log.logIndex - b.log.logIndex);
  }

  /** Verifies each log against its block header and turns the new ones into observation rows and outbox events. */
  private async decide(
    logs: readonly ScannedLog[],
    headers: ReadonlyMap<number, BlockHeader | null>,
  ): Promise<{ observations: ObservationRow[]; outbox: OutboxEvent[]; points: BlockPoint[] }> {
    const points = new Map<number, BlockPoint>();
    for (const { log } of logs) {
      const header = headers.get(log.blockNumber);
      if (!header || header.hash !== log.blockHash) {
        throw new ChainMovedError(`${this.chain}: block ${log.blockNumber} changed while its logs were read`);
      }
      points.set(header.number, { number: header.number, hash: header.hash });
    }
    const known = await this.store.knownObservations(this.chain, [...points.keys()]);
    const planned = planNewObservations(
      logs.map((l) => ({ ...l, txHash: l.log.txHash, logIndex: l.log.logIndex, blockHash: l.log.blockHash })),
      known,
    );
    const occurredAt = this.clock.now().toISOString();
    const observations: ObservationRow[] = [];
    const outbox: OutboxEvent[] = [];
    for (const { candidate, occurrence } of planned) {
      const { log, decoded, rescans } = candidate;
      const header = headers.get(log.blockNumber);
      if (!header) continue;
      const key = observationKey(this.chain, log.txHash, log.logIndex, log.blockHash, occurrence);
      // A re-scan may find a log published before and pruned from the observations since (below the reorg
      // window): its own id keeps the append from colliding with that first event (consumers take it once anyway).
      const eventId = deterministicEventId(this.streamId, rescans > 0 ? `${key}@rescan-${rescans}` : key, 0);
      const data = { ...decoded.data, blockTime: new Date(header.timestamp * 1000).toISOString() };
      observations.push({
        eventId,
        type: decoded.type,
        blockNumber: log.blockNumber,
        blockHash: log.blockHash,
        txHash: log.txHash,
        logIndex: log.logIndex,
        occurrence,
        address: watchedAddressOf(decoded.type, decoded.data),
      });
      outbox.push({ eventId, type: decoded.type, data, metadata: { occurredAt } });
    }
    return { observations, outbox, points: [...points.values()] };
  }
}

/** A log found for a watch; `rescans` > 0 only while a re-scanned watch catches up (see decide). */
interface ScannedLog {
  readonly log: ChainLog;
  readonly decoded: DecodedObservation;
  readonly rescans: number;
}

/**
 * The same calls, each result reported to `answered`. Only results count: an error reply (rate limited, overloaded)
 * serves the follower no better than silence, and the stall reason carries the last error anyway.
 */
function recordingAnswers(rpc: ChainRpc, answered: () => void): ChainRpc {
  const track = async <T>(call: Promise<T>): Promise<T> => {
    const result = await call;
    answered();
    return result;
  };
  return {
    chainId: () => track(rpc.chainId()),
    blockNumber: () => track(rpc.blockNumber()),
    header: (n) => track(rpc.header(n)),
    headers: (ns) => track(rpc.headers(ns)),
    getLogs: (filter) => track(rpc.getLogs(filter)),
    close: () => rpc.close(),
  };
}

function chunks<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/** TypeORM returns `[rows, count]` for UPDATE ... RETURNING and the rows alone otherwise. */
function updatedRows<T>(result: unknown): T[] {
  if (
    Array.isArray(result) &&
    result.length === 2 &&
    Array.isArray(result[0]) &&
    typeof result[1] === 'number'
  ) {
    return result[0] as T[];
  }
  return Array.isArray(result) ? (result as T[]) : [];
}
