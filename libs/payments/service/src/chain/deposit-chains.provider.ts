import type { Provider } from '@nestjs/common';
import { CHAIN_OPERATOR_CONFIG, type ChainOperatorConfig, OperatorRelayers } from '@stablepay/chain-operator';
import { DomainError } from '@stablepay/util';
import { DEPOSIT_CHAINS, type DepositChains } from '../actions/payment-actions';
import { DepositChain } from './deposit-chain';

function chainUnavailable(message: string): DomainError {
  return new DomainError({ type: 'api_error', status: 503, code: 'chain_unavailable', message });
}

/**
 * The deposit contracts of every configured chain, through the process's one operator RelayerSet (one nonce
 * manager per key and chain: a second set on the same key would race it).
 */
export const depositChainsProvider: Provider = {
  provide: DEPOSIT_CHAINS,
  // Optional: a payments service started without the chain layer still serves everything else.
  inject: [
    { token: CHAIN_OPERATOR_CONFIG, optional: true },
    { token: OperatorRelayers, optional: true },
  ],
  useFactory: (config?: ChainOperatorConfig, relayers?: OperatorRelayers): DepositChains => {
    const byChain = new Map<string, DepositChain>();
    return {
      for(caip2: string): DepositChain {
        const existing = byChain.get(caip2);
        if (existing) return existing;
        if (!config?.enabled || !config.addresses || !relayers?.set) {
          throw chainUnavailable(
            'No chain is configured (CHAIN_RPC_URLS): payment actions cannot be submitted.',
          );
        }
        if (!relayers.set.chains().includes(caip2)) {
          throw chainUnavailable(`No RPC endpoint is configured for ${caip2}.`);
        }
        const chain = new DepositChain(
          relayers.set.for(caip2),
          config.addresses.registry,
          config.chains.find((c) => c.caip2 === caip2)?.logRange,
        );
        byChain.set(caip2, chain);
        return chain;
      },
    };
  },
};
