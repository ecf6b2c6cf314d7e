import { Controller, Inject } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import {
  INDEXER_COMMANDS,
  type RescanAddressCommand,
  type RescanAnswer,
  type WatchAddressCommand,
  type WatchAnswer,
  type WatchContractCommand,
} from '@stablepay/chain-operator';
import { CommandHandler } from '@stablepay/commands';
import { validationError } from '@stablepay/util';
import { IndexerWatchList } from './watch-list';
import type { WatchedContractKind } from './log-decoder';
import { WATCHED_CONTRACT_KINDS } from './log-decoder';

/**
 * The watch list over the command transport (owner `indexer`): a service in another process (payments:
 * deposit addresses; subscriptions: managers) asks the indexer to watch. Idempotent: watching twice answers
 * `created: false`. A watch on a chain this indexer does not follow is stored and picked up once it does.
 */
@Controller()
export class WatchCommandsHandler {
  constructor(@Inject(IndexerWatchList) private readonly watches: IndexerWatchList) {}

  @CommandHandler(INDEXER_COMMANDS.watchAddress)
  async watchAddress(@Payload() command: WatchAddressCommand): Promise<WatchAnswer> {
    return {
      created: await this.watches.watchDepositAddress(command.chain, command.address, fromBlock(command)),
    };
  }

  /** Not idempotent by design: each re-scan counts (the event ids of what it finds), and scans again. */
  @CommandHandler(INDEXER_COMMANDS.rescanAddress)
  async rescanAddress(@Payload() command: RescanAddressCommand): Promise<RescanAnswer> {
    const from = fromBlock(command).fromBlock;
    if (from === undefined) throw validationError('fromBlock', 'fromBlock must be a block number.');
    const { existed, scannedThrough } = await this.watches.rescanDepositAddress(
      command.chain,
      command.address,
      from,
    );
    return { existed, scannedThrough };
  }

  @CommandHandler(INDEXER_COMMANDS.watchContract)
  async watchContract(@Payload() command: WatchContractCommand): Promise<WatchAnswer> {
    if (!WATCHED_CONTRACT_KINDS.includes(command.kind as WatchedContractKind)) {
      throw validationError('kind', `kind must be one of ${WATCHED_CONTRACT_KINDS.join(', ')}.`);
    }
    return {
      created: await this.watches.watchContract(
        command.chain,
        command.address,
        command.kind as WatchedContractKind,
        fromBlock(command),
      ),
    };
  }
}

function fromBlock(command: WatchAddressCommand): { fromBlock?: number } {
  if (command.fromBlock === undefined || command.fromBlock === null) return {};
  if (!Number.isSafeInteger(command.fromBlock) || command.fromBlock < 0)
    throw validationError('fromBlock', 'fromBlock must be a block number.');
  return { fromBlock: command.fromBlock };
}
