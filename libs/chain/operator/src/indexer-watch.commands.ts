import { Inject, Injectable } from '@nestjs/common';
import { CommandClient, defineCommands } from '@stablepay/commands';

/**
 * The indexer's commands (owner `indexer`): other services ask it to watch a deposit address (ERC-20 Transfers
 * to it become Erc20TransferObserved on `chain-<caip2>`) or a contract (every event of a subscription manager
 * becomes SubscriptionManagerEventObserved, of a deployed payment deposit PaymentDepositEventObserved). The contract lives here, in the chain scope, because every service
 * scope may depend on it while none may depend on the indexer's.
 */
export const INDEXER_COMMANDS = defineCommands('indexer', {
  watchAddress: 'indexer.watch.address',
  watchContract: 'indexer.watch.contract',
  rescanAddress: 'indexer.watch.rescan_address',
});

export interface WatchAddressCommand {
  /** CAIP-2 id of a chain the indexer follows. */
  readonly chain: string;
  readonly address: string;
  /** First block to scan (default: the follower's checkpoint when the watch arrives). Block number as a decimal. */
  readonly fromBlock?: number;
}

export interface WatchContractCommand extends WatchAddressCommand {
  /** Contract kind, decoding its logs: `subscription_manager` or `payment_deposit`. */
  readonly kind: string;
}

/** An operator's re-scan of a deposit address from a block (docs/chain-operator.md, "Re-scanning a deposit address"). */
export interface RescanAddressCommand {
  readonly chain: string;
  readonly address: string;
  /** First block to scan again. */
  readonly fromBlock: number;
}

export interface RescanAnswer {
  /** False: the address had no watch on the chain; it has one now, from `fromBlock`. */
  readonly existed: boolean;
  /** The watch's position after the command: the blocks after it up to the indexer's checkpoint are scanned again. */
  readonly scannedThrough: number;
}

/** True when the watch is new (false: it already existed; the command is idempotent). */
export interface WatchAnswer {
  readonly created: boolean;
}

/** Sends watch commands to the indexer over the configured command transport (in-process when embedded). */
@Injectable()
export class IndexerWatchClient {
  constructor(@Inject(CommandClient) private readonly commands: CommandClient) {}

  watchAddress(command: WatchAddressCommand): Promise<WatchAnswer> {
    return this.commands.send<WatchAnswer>('indexer', INDEXER_COMMANDS.watchAddress, command);
  }

  watchContract(command: WatchContractCommand): Promise<WatchAnswer> {
    return this.commands.send<WatchAnswer>('indexer', INDEXER_COMMANDS.watchContract, command);
  }

  rescanAddress(command: RescanAddressCommand): Promise<RescanAnswer> {
    return this.commands.send<RescanAnswer>('indexer', INDEXER_COMMANDS.rescanAddress, command);
  }
}
