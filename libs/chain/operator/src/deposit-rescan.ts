import { blockMinedBefore, type BlockTimeProvider } from '@stablepay/evm';
import { conflict, validationError } from '@stablepay/util';
import type { RescanAddressCommand, RescanAnswer } from './indexer-watch.commands';

/**
 * An operator's re-scan of a deposit address (a payment's, a payout customer's), as the owning service receives it
 * from the gateway's operator route. The merchant is named so that an object of another merchant is 404, as for
 * every merchant-scoped read.
 */
export interface DepositRescanCommand {
  readonly merchantId: string;
  /** The payment (`pay_...`) or customer (`cus_...`) id. */
  readonly id: string;
  /** CAIP-2 id of one chain to scan; absent: every chain the address is watched on. */
  readonly chain?: string;
  /** First block to scan; absent: the block mined CHAIN_CLOCK_LAG_SECONDS before the object's creation. */
  readonly fromBlock?: number;
}

/**
 * A movement out of the deposit address that the re-scan found on chain (a payment's deposit: its capture, refund,
 * reclaim, recover and rescue logs), and what became of it.
 */
export interface RescannedOutflow {
  readonly txHash: string;
  readonly logIndex: number;
  readonly blockNumber: number;
  readonly blockHash: string;
  readonly kind: string;
  /** Token address; the zero address for the native coin. */
  readonly token: string;
  readonly to: string;
  /** Base units, as a decimal string. */
  readonly amount: string;
  /**
   * `already_recorded`: the object holds this log (nothing done). `queued`: handed to the path the indexer's
   * sightings take, recorded once its block has the chain's confirmations (and still is the chain's block).
   */
  readonly status: 'already_recorded' | 'queued';
}

export interface DepositRescanAnswer {
  readonly address: string;
  readonly rescans: readonly {
    readonly chain: string;
    readonly fromBlock: number;
    /** False: the address had no watch on that chain; it has one now. */
    readonly wasWatched: boolean;
    /** The outflows found from `fromBlock` to the head; absent when the owner scans none (payout customers). */
    readonly outflows?: readonly RescannedOutflow[];
  }[];
}

/** The owner's scan of the movements out of `address` on `chain`, from `fromBlock` to the head `toBlock`. */
export type OutflowRescan = (scan: {
  readonly chain: string;
  readonly address: string;
  readonly fromBlock: number;
  readonly toBlock: number;
}) => Promise<readonly RescannedOutflow[]>;

type Rescanner = { rescanAddress(command: RescanAddressCommand): Promise<RescanAnswer> };

/**
 * Asks the indexer to scan `addresses` again on `chains` (those the object's deposits are watched on) from the
 * requested block, or from the one before the object's creation. The indexer publishes what it finds through the
 * chain's observation stream, where the owner's usual consumer takes each transfer once (by chain, transaction and
 * log index): a re-scan adds what was missed and nothing twice.
 */
export async function rescanDeposits(
  request: DepositRescanCommand,
  target: {
    readonly addresses: readonly string[];
    readonly chains: readonly string[];
    readonly createdAt: string;
    readonly provider: (chain: string) => BlockTimeProvider;
    readonly indexer: Rescanner;
    /** Payments: the deposit's outflows are found here (the indexer's re-scan covers transfers in only). */
    readonly outflows?: OutflowRescan;
  },
): Promise<DepositRescanAnswer[]> {
  if (request.chain !== undefined && !target.chains.includes(request.chain)) {
    throw validationError(
      'chain',
      target.chains.length === 0
        ? 'chain names no chain this object has a deposit address watched on.'
        : `chain must be one of the chains this object's deposit address is watched on: ${target.chains.join(', ')}.`,
    );
  }
  const chains = request.chain !== undefined ? [request.chain] : target.chains;
  if (chains.length === 0) {
    throw conflict(
      'deposit_not_watched',
      "None of this object's chains is followed by this deployment: there is nothing to re-scan.",
    );
  }
  // Every chain's head first, so a refused from_block changes nothing anywhere. A block past the head would be
  // accepted by the indexer and scan nothing (a watch never moves forward): the operator is told instead.
  const heads = new Map<string, number>();
  for (const chain of chains) {
    const head = await target.provider(chain).getBlockNumber();
    if (request.fromBlock !== undefined && request.fromBlock > head) {
      throw validationError(
        'from_block',
        `from_block ${request.fromBlock} is past the head of ${chain} (block ${head}): there is nothing to scan there yet.`,
      );
    }
    heads.set(chain, head);
  }
  const answers = new Map<string, DepositRescanAnswer['rescans'][number][]>();
  for (const chain of chains) {
    const fromBlock = request.fromBlock ?? (await blockMinedBefore(target.provider(chain), target.createdAt));
    for (const address of target.addresses) {
      const { existed } = await target.indexer.rescanAddress({ chain, address, fromBlock });
      const outflows = target.outflows
        ? await target.outflows({ chain, address, fromBlock, toBlock: heads.get(chain) ?? fromBlock })
        : undefined;
      answers.set(address, [
        ...(answers.get(address) ?? []),
        { chain, fromBlock, wasWatched: existed, ...(outflows ? { outflows } : {}) },
      ]);
    }
  }
  return [...answers].map(([address, rescans]) => ({ address, rescans }));
}
