import { Inject, Injectable, Logger } from '@nestjs/common';
import { type DueRow, ReadModelTimer } from '@stablepay/runtime';
import { SUBSCRIPTIONS_CONFIG, type SubscriptionsConfig } from '../subscriptions.config';
import { ChainTime } from './chain-access';
import { ChainObservationLog, type ObservedManagerLog, SubscriptionChainFacts } from './chain-facts';
import { SubscriptionCommands } from './subscription.commands';
import { SubscriptionManagers } from './subscription-managers';

/** How often (real time) the open API-path receipts are checked against the chain. */
const POLL_INTERVAL_MS = 1_000;

interface OpenReceipt extends DueRow {
  readonly observed: ObservedManagerLog;
}

/**
 * The API path records a charge or a subscribe from the receipt it read (SPEC: the receipt is persisted
 * synchronously), at one confirmation. The indexer undoes a fact when a reorg orphans the block of its own
 * observation; but it reads `INDEXER_CONFIRMATIONS` blocks behind the head, so a reorg that takes a block out
 * before the indexer read it retracts nothing, and the API path's fact stood for good (a charge on no chain:
 * `charge_nonce`, `spent_this_period`, the ledger row `succeeded`, the webhooks).
 *
 * Each receipt log the API path records is remembered (`subscription_chain_observations`, `written_by` `api`, with
 * its block hash) and checked here until it is settled:
 * - the indexer reported the same transaction from the same block: from then on its retraction covers it;
 * - the block at that height is still the receipt's: checked again later (the indexer has not read it yet);
 * - the block was replaced and the transaction is mined in a canonical block of the new fork: the fact stands on
 *   chain (the indexer reads it there and records nothing twice); the row follows it to that block, still open;
 * - the block was replaced and the node holds the transaction pending (a node re-queues an orphaned block's
 *   transactions): kept, from the first pass that found it so, for RECEIPT_REINCLUSION_WINDOW_SECONDS;
 * - the block was replaced and the transaction is dropped, reverted on the new fork, or still pending after that
 *   window: the fact is undone exactly as the indexer's retraction undoes it (`SubscriptionChainFacts.retract`: the
 *   charge `charge_lost_to_reorg`, the subscribe's subscription and the completion of its intent). A transaction
 *   mined later is a new observation of the indexer and is recorded again.
 */
@Injectable()
export class SubscriptionReceiptChecks extends ReadModelTimer<OpenReceipt> {
  protected readonly logger = new Logger('subscriptions.receipt-checks');

  constructor(
    @Inject(ChainObservationLog) private readonly observations: ChainObservationLog,
    @Inject(SubscriptionChainFacts) private readonly facts: SubscriptionChainFacts,
    @Inject(SubscriptionManagers) private readonly managers: SubscriptionManagers,
    @Inject(ChainTime) private readonly chains: ChainTime,
    @Inject(SubscriptionCommands) private readonly commands: SubscriptionCommands,
    @Inject(SUBSCRIPTIONS_CONFIG)
    private readonly config: Pick<SubscriptionsConfig, 'receiptReinclusionWindowMs'>,
  ) {
    super(() => POLL_INTERVAL_MS);
  }

  /** Block hashes read in the running pass: the receipts of one block (a busy one) cost one read. */
  private readonly blockHashes = new Map<string, Promise<string | null>>();

  /** Managers read in the running pass: the receipts of one manager cost one lookup. */
  private readonly managerRows = new Map<string, ReturnType<SubscriptionManagers['findByAddress']>>();

  override async tick(): Promise<number> {
    this.blockHashes.clear();
    this.managerRows.clear();
    try {
      // What the indexer has read is handed over at once, in one statement: only the receipts it has not read yet
      // (those of the last INDEXER_CONFIRMATIONS blocks) are looked at one by one, by block.
      const settled = await this.observations.settleSeenByIndexer();
      return settled + (await super.tick());
    } finally {
      this.blockHashes.clear();
      this.managerRows.clear();
    }
  }

  private manager(chain: string, contract: string): ReturnType<SubscriptionManagers['findByAddress']> {
    const key = `${chain}:${contract.toLowerCase()}`;
    let row = this.managerRows.get(key);
    if (!row) {
      row = this.managers.findByAddress(chain, contract);
      row.catch(() => this.managerRows.delete(key));
      this.managerRows.set(key, row);
    }
    return row;
  }

  protected now(): Date {
    return this.commands.now();
  }

  private blockHash(
    provider: { getBlock(n: number): Promise<{ readonly hash: string | null } | null> },
    chain: string,
    blockNumber: number,
  ): Promise<string | null> {
    const key = `${chain}:${blockNumber}`;
    let hash = this.blockHashes.get(key);
    if (!hash) {
      hash = provider.getBlock(blockNumber).then((b) => b?.hash?.toLowerCase() ?? null);
      hash.catch(() => this.blockHashes.delete(key));
      this.blockHashes.set(key, hash);
    }
    return hash;
  }

  protected async due(_now: Date, limit: number, after?: DueRow): Promise<OpenReceipt[]> {
    const rows = await this.observations.openReceipts(
      limit,
      after ? { at: after.dueAt, id: after.id } : undefined,
    );
    return rows.map((observed) => ({
      id: observed.observation_id,
      dueAt: new Date(observed.remembered_at),
      observed,
    }));
  }

  protected async fire({ observed }: OpenReceipt): Promise<boolean> {
    const blockHash = observed.block_hash;
    const blockNumber = observed.block_number;
    if (!blockHash || blockNumber === null) return false;
    const manager = await this.manager(observed.chain, observed.contract);
    const provider = manager ? this.chains.provider(manager.mode, observed.chain) : null;
    if (!provider) return false;
    const canonical = await this.blockHash(provider, observed.chain, Number(blockNumber));
    // No block at that height is no evidence of a reorg: a node behind the one that gave the receipt (a load-balanced
    // RPC, a restarted node) knows no block there yet, nor the receipt, and the charge was undone for good.
    if (canonical === null || canonical === blockHash.toLowerCase()) return false;
    // The block is gone: the indexer may have read it since the pass began (its retraction then covers the fact).
    if (await this.observations.indexerSaw(observed.tx_hash, blockHash)) {
      await this.observations.markSettled(observed.observation_id);
      return true;
    }
    const receipt = await provider.getTransactionReceipt(observed.tx_hash);
    // Why the fact is undone now; null while the transaction may still be mined on the new fork.
    let lost: string | null = null;
    if (receipt && receipt.status === 1) {
      const its = await this.blockHash(provider, observed.chain, receipt.blockNumber);
      if (its === null) return false;
      if (its === receipt.blockHash.toLowerCase()) {
        // Mined again on the new fork: the fact stands, and the row moves to that block (a reorg of it before the
        // indexer read it is found as this one was).
        await this.observations.followReceipt(observed.observation_id, receipt.blockNumber, its);
        return true;
      }
      // A receipt from a block the same node no longer holds canonical: an answer from before the reorg reached it.
    } else if (receipt) lost = 'reverted on the new fork';
    else if (!(await provider.getTransaction(observed.tx_hash)))
      lost = 'dropped: the node knows no such transaction';
    if (lost === null) {
      // Back in the node's pool (a node re-queues an orphaned block's transactions), or an answer still catching up:
      // it may be mined again any block now, and undoing the fact first told the merchant charge_failed (or the
      // intent reorged), then success once re-mined. Kept for a bounded time from the first pass that found it so.
      const now = this.now();
      if (!observed.pending_since) {
        await this.observations.markPending(observed.observation_id, now);
        return false;
      }
      const since = new Date(observed.pending_since).getTime();
      if (now.getTime() - since < this.config.receiptReinclusionWindowMs) return false;
      lost = 'not mined again within RECEIPT_REINCLUSION_WINDOW_SECONDS';
    }
    // The same key as the indexer's retraction would use for this row: a retry appends nothing twice.
    await this.facts.retract(observed, `retract:${observed.observation_id}`);
    await this.observations.markRetracted(observed.observation_id);
    this.logger.warn({
      msg: 'a reorg took out the block of a receipt the API path recorded, before the indexer read it: fact undone',
      event: observed.event,
      subscriptionId: observed.subscription_id,
      txHash: observed.tx_hash,
      blockNumber,
      transaction: lost,
    });
    return true;
  }
}
