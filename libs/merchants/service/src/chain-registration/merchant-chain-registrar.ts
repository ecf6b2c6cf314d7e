import { Interface, ZeroAddress, getAddress } from 'ethers';
import { StablepayRegistryAbi, connectStablepayRegistry } from '@stablepay/contracts';
import type { ChainRelayer } from '@stablepay/relayer';

const REGISTRY = new Interface(StablepayRegistryAbi);

export type RegistrationOutcome =
  | { readonly kind: 'registered'; readonly txHash: string | null }
  | { readonly kind: 'mismatch'; readonly onChain: { readonly signer: string; readonly settlement: string } }
  | { readonly kind: 'retry'; readonly error: string };

export interface RegistrationTarget {
  readonly chain: string;
  readonly onChainId: string;
  readonly signer: string;
  readonly settlement: string;
}

/**
 * One registration attempt on one chain, idempotent: read the registry first; a merchant with no signer is
 * registered by the operator; a merchant already holding exactly these values is done (also when our own earlier
 * attempt or a concurrent one landed: `MerchantAlreadyRegistered` re-reads); other values on chain are a
 * mismatch the operator cannot fix (the contract lets only the merchant's signature or the admin's delayed
 * change alter a registered merchant). Infrastructure trouble is a retry, never an exception.
 *
 * The one registration path: the registration worker (merchant_chain_registrations) and the subscriptions
 * service, which registers the merchant on a chain the worker has not reached yet before deploying its manager.
 */
export class MerchantChainRegistrar {
  constructor(
    /** The operator's relayer per chain (a RelayerSet, or a service's own lookup of the same relayers). */
    private readonly relayers: { for(chain: string): ChainRelayer },
    private readonly registryAddress: string,
  ) {}

  async register(target: RegistrationTarget): Promise<RegistrationOutcome> {
    try {
      const before = await this.onChain(target);
      if (before.signer !== ZeroAddress) return this.compare(target, before, null);
      const relayer = this.relayers.for(target.chain);
      const outcome = await relayer.submit({
        to: this.registryAddress,
        abi: REGISTRY,
        data: REGISTRY.encodeFunctionData('registerMerchant', [
          target.onChainId,
          target.signer,
          target.settlement,
        ]),
      });
      switch (outcome.kind) {
        case 'confirmed':
          return this.compare(target, await this.onChain(target), outcome.txHash);
        case 'simulation_rejected':
          if (outcome.errorName === 'MerchantAlreadyRegistered')
            return this.compare(target, await this.onChain(target), null);
          return { kind: 'retry', error: `registerMerchant rejected: ${outcome.errorName}` };
        case 'reverted':
          return {
            kind: 'retry',
            error: `registerMerchant reverted: ${outcome.revert?.errorName ?? 'unknown'}`,
          };
        case 'receipt_timeout':
          return { kind: 'retry', error: `registerMerchant ${outcome.txHash} not mined in time` };
      }
    } catch (error) {
      return { kind: 'retry', error: error instanceof Error ? error.message : String(error) };
    }
  }

  private async onChain(target: RegistrationTarget): Promise<{ signer: string; settlement: string }> {
    const registry = connectStablepayRegistry(this.registryAddress, this.relayers.for(target.chain).provider);
    const [signer, settlement] = (await registry.merchant(target.onChainId)) as unknown as [string, string];
    return { signer: getAddress(signer), settlement: getAddress(settlement) };
  }

  private compare(
    target: RegistrationTarget,
    onChain: { signer: string; settlement: string },
    txHash: string | null,
  ): RegistrationOutcome {
    const same =
      onChain.signer === getAddress(target.signer) && onChain.settlement === getAddress(target.settlement);
    return same ? { kind: 'registered', txHash } : { kind: 'mismatch', onChain };
  }
}
