import type { ChainInfo } from '@stablepay/evm';
import type { SupportedStablecoin } from '@stablepay/payments-domain';
import type { PaymentsConfig } from '../payments.config';

/**
 * The fiat currency each accepted stablecoin is pegged to 1:1 (one-time payments convert nothing: the order's
 * currency must be a peg of the token the customer sends). A registry symbol missing here is not accepted.
 */
export const STABLECOIN_PEGS: Readonly<Record<string, string>> = { USDC: 'USD', USDT: 'USD', DAI: 'USD' };

/** The chains accepted for a merchant of this mode: the registry, narrowed by SUPPORTED_CHAINS. */
export function acceptedChains(config: PaymentsConfig, mode: 'test' | 'live'): readonly ChainInfo[] {
  const all = config.chains[mode].list();
  const only = config.supportedChains;
  return only ? all.filter((c) => only.includes(c.caip2)) : all;
}

export function supportedStablecoins(config: PaymentsConfig, mode: 'test' | 'live'): SupportedStablecoin[] {
  return acceptedChains(config, mode).flatMap((chain) =>
    chain.stablecoins.flatMap((s) => {
      const peg = STABLECOIN_PEGS[s.symbol];
      return peg
        ? [{ asset: s.assetId, chain: chain.caip2, symbol: s.symbol, decimals: s.decimals, pegCurrency: peg }]
        : [];
    }),
  );
}
