import { Inject, Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { parseAddress, parseCaip2 } from '@stablepay/evm';
import { IndexerStore, type Rescan, rescanWatchedAddress } from './indexer-store';
import { WATCHED_CONTRACT_KINDS, type WatchedContractKind } from './log-decoder';

/**
 * What the indexer watches. The payments service registers deposit addresses (ERC-20 Transfers to them become
 * Erc20TransferObserved) and each deployed deposit contract (every event becomes PaymentDepositEventObserved), the
 * subscriptions service subscription managers (every event becomes SubscriptionManagerEventObserved). Rows may also be written straight into `indexer_watched_addresses` /
 * `indexer_watched_contracts` (lower-case addresses; scanned_through = the block before the first one to scan).
 */
@Injectable()
export class IndexerWatchList {
  private readonly store: IndexerStore;

  constructor(@Inject(DataSource) private readonly dataSource: DataSource) {
    this.store = new IndexerStore(dataSource);
  }

  /** Scans ERC-20 Transfers to `address` on `chain` again from `fromBlock` (an operator's re-scan; see rescanWatchedAddress). */
  rescanDepositAddress(chain: string, address: string, fromBlock: number): Promise<Rescan> {
    const from = validFrom(fromBlock);
    if (from === undefined) throw new RangeError('a re-scan needs its first block');
    return rescanWatchedAddress(this.dataSource, parseCaip2(chain).caip2, parseAddress(address), from);
  }

  /**
   * Watches ERC-20 Transfers to `address` on `chain` from `fromBlock` (default: the follower's checkpoint now, so
   * nothing between this call and the next range is missed). True when the watch is new.
   */
  watchDepositAddress(
    chain: string,
    address: string,
    options: { readonly fromBlock?: number } = {},
  ): Promise<boolean> {
    return this.store.addWatch(
      parseCaip2(chain).caip2,
      parseAddress(address),
      { table: 'address' },
      validFrom(options.fromBlock),
    );
  }

  /** Watches every event of a contract (a subscription manager, a payment deposit) on `chain`. True when new. */
  watchContract(
    chain: string,
    address: string,
    kind: WatchedContractKind,
    options: { readonly fromBlock?: number } = {},
  ): Promise<boolean> {
    if (!WATCHED_CONTRACT_KINDS.includes(kind))
      throw new Error(`unknown watched contract kind '${String(kind)}'`);
    return this.store.addWatch(
      parseCaip2(chain).caip2,
      parseAddress(address),
      { table: 'contract', kind },
      validFrom(options.fromBlock),
    );
  }
}

function validFrom(fromBlock: number | undefined): number | undefined {
  if (fromBlock !== undefined && (!Number.isSafeInteger(fromBlock) || fromBlock < 0)) {
    throw new RangeError(`fromBlock must be a block number, got ${fromBlock}`);
  }
  return fromBlock;
}
