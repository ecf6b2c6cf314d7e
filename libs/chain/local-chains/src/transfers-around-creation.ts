import { type JsonRpcProvider, Wallet } from 'ethers';
import { ANVIL_DEV_PRIVATE_KEYS } from './anvil';

/** A transfer's block. */
export interface MinedTransfer {
  readonly blockNumber: number;
  readonly timestamp: number;
}

/**
 * The chain a deposit-address watch registered late must cover, for its int tests: a transfer to `to` hours before
 * the record that made the address (`old`: the watch need not scan that far), one in the block of its creation
 * (`created`, whose time stands for the record's `createdAt`), the payer's right after (`paid`: mined before the
 * watch is asked for), and blocks on top (the indexer's follower has moved past them). Native transfers from an anvil
 * dev account: only their blocks and times matter.
 */
export async function transfersAroundCreation(
  provider: JsonRpcProvider,
  to: string,
): Promise<{ readonly old: MinedTransfer; readonly created: MinedTransfer; readonly paid: MinedTransfer }> {
  const sender = new Wallet(ANVIL_DEV_PRIVATE_KEYS[1], provider);
  const send = async (): Promise<MinedTransfer> => {
    const receipt = await (await sender.sendTransaction({ to, value: 1n })).wait();
    if (!receipt) throw new Error('no receipt');
    const block = await provider.getBlock(receipt.blockNumber);
    if (!block) throw new Error('no block');
    return { blockNumber: receipt.blockNumber, timestamp: block.timestamp };
  };
  await provider.send('anvil_mine', ['0xa']);
  const old = await send();
  await provider.send('evm_increaseTime', [3 * 3_600]);
  const created = await send();
  const paid = await send();
  await provider.send('anvil_mine', ['0x5']);
  return { old, created, paid };
}
