import { Contract, hashMessage, JsonRpcProvider, Network } from 'ethers';

/** ERC-1271's magic value: `isValidSignature(hash, signature)` returns it when the contract approves. */
export const ERC1271_MAGIC_VALUE = '0x1626ba7e';
const ERC1271_ABI = ['function isValidSignature(bytes32 hash, bytes signature) view returns (bytes4)'];

/**
 * Proves control of a contract account (a multisig, a smart wallet) for the pause declaration: SPEC accepts a
 * contract that approves the declaration message on EVERY supported chain, since the pauser address is the same
 * on all of them and must be controlled on each. No chain configured means nothing can be proven, and so does a
 * merchant of the other mode than the chains' (`chainMode`): the test chains reuse the mainnet chain ids, so a
 * contract approving on them says nothing of who controls that address on the merchant's own chains.
 */
export class ContractSignatureVerifier {
  private readonly providers: ReadonlyArray<{ chain: string; provider: JsonRpcProvider }>;

  constructor(
    rpcUrls: Readonly<Record<string, string>>,
    private readonly chainMode: 'live' | 'test',
  ) {
    this.providers = Object.entries(rpcUrls).map(([chain, url]) => {
      const chainId = Number(chain.split(':')[1]);
      // A plain static network: ethers neither probes the node nor attaches well-known networks' public services.
      const network = new Network(`eip155-${chainId}`, chainId);
      return {
        chain,
        provider: new JsonRpcProvider(url, network, { staticNetwork: network, cacheTimeout: -1 }),
      };
    });
  }

  async approvesOnEveryChain(
    merchantMode: 'live' | 'test',
    address: string,
    message: string,
    signature: string,
  ): Promise<boolean> {
    if (this.providers.length === 0 || merchantMode !== this.chainMode) return false;
    const digest = hashMessage(message);
    const results = await Promise.all(
      this.providers.map(async ({ provider }) => {
        try {
          if ((await provider.getCode(address)) === '0x') return false;
          const contract = new Contract(address, ERC1271_ABI, provider);
          const isValidSignature = contract.getFunction('isValidSignature');
          const answer: unknown = await isValidSignature.staticCall(digest, signature);
          return typeof answer === 'string' && answer.toLowerCase() === ERC1271_MAGIC_VALUE;
        } catch {
          return false;
        }
      }),
    );
    return results.every(Boolean);
  }

  destroy(): void {
    for (const { provider } of this.providers) provider.destroy();
  }
}
