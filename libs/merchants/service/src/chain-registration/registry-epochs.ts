import { JsonRpcProvider, Network, ZeroAddress } from 'ethers';
import { connectStablepayRegistry, toOnChainId } from '@stablepay/contracts';

/** How long settings wait for a chain's answer before showing its epoch as unknown (null). */
export const REGISTRY_EPOCH_READ_TIMEOUT_MS = 2_000;

/**
 * The merchant's current epoch in each chain's registry, read from the chain on every settings answer: the registry
 * bumps it on paths the service never sees (the signer's own `revokeAuthorizations`, an admin-proposed change
 * executed by anyone), so a stored copy could name an epoch every signature made for it would fail on. A chain that
 * holds no signer for the merchant, or does not answer in time, gives null: settings must not fail for it.
 */
export class RegistryEpochs {
  private readonly providers = new Map<string, JsonRpcProvider>();

  constructor(
    private readonly rpcUrls: Readonly<Record<string, string>>,
    private readonly registryAddress: string | null,
    private readonly timeoutMs = REGISTRY_EPOCH_READ_TIMEOUT_MS,
  ) {}

  /** The epoch per chain of `chains` (decimal string), null where unknown. */
  async read(merchantId: string, chains: readonly string[]): Promise<ReadonlyMap<string, string | null>> {
    const onChainId = toOnChainId(merchantId);
    const answers = await Promise.all(
      chains.map(async (chain) => [chain, await this.epochOn(chain, onChainId)] as const),
    );
    return new Map(answers);
  }

  private async epochOn(chain: string, onChainId: string): Promise<string | null> {
    const provider = this.provider(chain);
    if (!provider || !this.registryAddress) return null;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<null>((resolve) => {
      timer = setTimeout(() => resolve(null), this.timeoutMs);
    });
    const read = connectStablepayRegistry(this.registryAddress, provider)
      .merchantAuth(onChainId)
      .then((auth) => (auth.signer === ZeroAddress ? null : BigInt(auth.epoch).toString()))
      .catch(() => null);
    try {
      return await Promise.race([read, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  private provider(chain: string): JsonRpcProvider | null {
    const url = this.rpcUrls[chain];
    if (url === undefined) return null;
    let provider = this.providers.get(chain);
    if (!provider) {
      const chainId = Number(chain.split(':')[1]);
      // A plain static network: ethers neither probes the node nor attaches well-known networks' public services.
      const network = new Network(`eip155-${chainId}`, chainId);
      // No 10 ms batching stall: every settings answer waits for this read.
      provider = new JsonRpcProvider(url, network, {
        staticNetwork: network,
        cacheTimeout: -1,
        batchStallTime: 0,
      });
      this.providers.set(chain, provider);
    }
    return provider;
  }

  onModuleDestroy(): void {
    for (const provider of this.providers.values()) provider.destroy();
    this.providers.clear();
  }
}
