import { type JsonRpcProvider, Wallet } from 'ethers';
import { ANVIL_DEV_PRIVATE_KEYS, type LocalChain, localChainProvider } from '@stablepay/local-chains';
import type { EmbeddedStack } from '../embedded';

/** One local anvil chain of an embedded stack, with the helpers tests drive it by. */
export interface AnvilChain {
  readonly local: LocalChain;
  provider(): JsonRpcProvider;
  /** The anvil dev account `index` connected to this chain. */
  wallet(index: number): Wallet;
  /** The latest block's timestamp. */
  now(): Promise<bigint>;
  /** Moves chain time on by `seconds` and mines a block. */
  increaseTime(seconds: number): Promise<void>;
  mine(blocks?: number): Promise<void>;
}

export function anvilChain(stack: () => EmbeddedStack, caip2: string): AnvilChain {
  const local = () => {
    const chain = stack().chains?.chains.find((c) => c.caip2 === caip2);
    if (!chain) throw new Error(`no local chain ${caip2}`);
    return chain;
  };
  let cached: JsonRpcProvider | undefined;
  // The chain's stop destroys the providers built for it: a stack started again gets a fresh one.
  const provider = () =>
    cached && !cached.destroyed ? cached : (cached = localChainProvider(local().rpcUrl, local().chainId));
  const mine = async (blocks = 1) => {
    for (let i = 0; i < blocks; i++) await provider().send('evm_mine', []);
  };
  return {
    get local() {
      return local();
    },
    provider,
    wallet: (index) => new Wallet(ANVIL_DEV_PRIVATE_KEYS[index] ?? '', provider()),
    now: async () => BigInt((await provider().getBlock('latest'))?.timestamp ?? 0),
    increaseTime: async (seconds) => {
      await provider().send('evm_increaseTime', [seconds]);
      await mine();
    },
    mine,
  };
}

/** Transactions waiting in the node's pool (automine off). */
export async function pooled(chain: AnvilChain): Promise<number> {
  const content = (await chain.provider().send('txpool_content', [])) as {
    pending: Record<string, Record<string, unknown>>;
  };
  return Object.values(content.pending).reduce((n, byNonce) => n + Object.keys(byNonce).length, 0);
}

/** Runs `body` with automine off (transactions wait in the pool until the test mines), restoring it after. */
export async function withoutAutomine<T>(chain: AnvilChain, body: () => Promise<T>): Promise<T> {
  await chain.provider().send('evm_setAutomine', [false]);
  try {
    return await body();
  } finally {
    await chain.provider().send('evm_setAutomine', [true]);
  }
}

/**
 * A reorg back to `snapshot` (taken at block `forkBlock`) that loses the transactions sent by `lost`: the orphaned
 * blocks' other transactions (the service's own) are sent again, as a real node puts them back in its pool (evm_revert
 * drops them, and the service's next nonce would have nothing under it), then a longer fork is mined, so the follower
 * sees the parent hashes change. Answers the lost transactions as signed, to put back on the new fork later.
 */
export async function reorgLosing(
  chain: AnvilChain,
  snapshot: string,
  forkBlock: number,
  lost: string,
): Promise<string[]> {
  const p = chain.provider();
  const dropped: string[] = [];
  const resent: string[] = [];
  for (let n = forkBlock + 1; n <= (await p.getBlockNumber()); n++) {
    const block = await p.getBlock(n, true);
    for (const tx of block?.prefetchedTransactions ?? []) {
      const raw = (await p.send('eth_getRawTransactionByHash', [tx.hash])) as string;
      (tx.from.toLowerCase() === lost.toLowerCase() ? dropped : resent).push(raw);
    }
  }
  if (!(await p.send('evm_revert', [snapshot]))) throw new Error(`evm_revert ${snapshot} failed`);
  for (const raw of resent) await p.send('eth_sendRawTransaction', [raw]);
  await p.send('anvil_mine', ['0x8']);
  return dropped;
}
