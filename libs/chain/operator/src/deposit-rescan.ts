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

export interface DepositRescanAnswer {
  readonly address: string;
  readonly rescans: readonly {
    readonly chain: string;
    readonly fromBlock: number;
    /** False: the address had no watch on that chain; it has one now. */
    readonly wasWatched: boolean;
  }[];
}

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
  const answers = new Map<string, DepositRescanAnswer['rescans'][number][]>();
  for (const chain of chains) {
    const fromBlock = request.fromBlock ?? (await blockMinedBefore(target.provider(chain), target.createdAt));
    for (const address of target.addresses) {
      const { existed } = await target.indexer.rescanAddress({ chain, address, fromBlock });
      answers.set(address, [...(answers.get(address) ?? []), { chain, fromBlock, wasWatched: existed }]);
    }
  }
  return [...answers].map(([address, rescans]) => ({ address, rescans }));
}
