import { getAddress } from 'ethers';
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

  /**
   * Who sent a transfer to a deposit address: the log's `from`, or, for tokens minted straight to the address (a
   * bridge such as CCTP, an issuer's mint: the log's `from` is the zero address), the account that sent the minting
   * transaction, with `minted` set. That account is screened and listed as the sender, but it need not be the payer
   * (a bridge's mint is sent by whoever relays the message), so nothing is returned to it (docs/payments.md, The
   * payer). Throws when the chain's node does not know the transaction (the caller's message is redelivered).
   */
  async transferOrigin(transfer: {
    readonly chain: string;
    readonly txHash: string;
    readonly from: string;
  }): Promise<{ readonly from: string; readonly minted: boolean }> {
    if (!/^0x0{40}$/i.test(transfer.from)) return { from: transfer.from, minted: false };
    const tx = await this.for(transfer.chain).provider.getTransaction(transfer.txHash);
    if (!tx) throw new Error(`transaction ${transfer.txHash} on ${transfer.chain} is unknown to its node`);
    return { from: getAddress(tx.from), minted: true };
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
