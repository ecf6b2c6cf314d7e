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
