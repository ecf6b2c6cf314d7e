import { ChainRelayer, type RelayerOptions } from './relayer';

/** The part of a chain-registry entry a relayer needs (structurally a `ChainInfo` of @stablepay/evm). */
export interface RelayableChain {
  readonly caip2: string;
  readonly chainId: bigint;
  readonly rpcUrl: string | null;
}

/** One relayer per chain, looked up by CAIP-2 id. */
export class RelayerSet {
  private readonly relayers: ReadonlyMap<string, ChainRelayer>;

  constructor(chains: readonly RelayableChain[], options: Omit<RelayerOptions, 'chainId' | 'rpcUrl'>) {
    const missing = chains.filter((c) => c.rpcUrl === null).map((c) => c.caip2);
    if (missing.length > 0) throw new Error(`no RPC URL configured for ${missing.join(', ')}`);
    this.relayers = new Map(
      chains.map((c) => [
        c.caip2,
        new ChainRelayer({ ...options, chainId: c.chainId, rpcUrl: c.rpcUrl ?? '' }),
      ]),
    );
  }

  /** Throws when the chain has no relayer: callers validate chains against the registry first. */
  for(caip2: string): ChainRelayer {
    const relayer = this.relayers.get(caip2);
    if (relayer === undefined) throw new Error(`no relayer for chain ${caip2}`);
    return relayer;
  }

  chains(): readonly string[] {
    return [...this.relayers.keys()];
  }

  async verifyChains(): Promise<void> {
    await Promise.all([...this.relayers.values()].map((r) => r.verifyChain()));
  }

  destroy(): void {
    for (const relayer of this.relayers.values()) relayer.destroy();
  }
}
