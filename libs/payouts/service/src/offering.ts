import { type ChainInfo, LIVE_CHAINS } from '@stablepay/evm';
import type { DepositAddress, PayoutToken } from '@stablepay/payouts-domain';
import type { PayoutsConfig } from './payouts.config';

/** Ours: the stablecoins a payout can be funded with (USD-pegged; the off-ramp sells them). */
const PAYOUT_TOKENS = new Set(['USDC', 'USDT']);

/** The chains a merchant of this mode can fund payouts on: the registry, narrowed by SUPPORTED_CHAINS. */
export function payoutChains(config: PayoutsConfig, mode: 'test' | 'live'): readonly ChainInfo[] {
  const all = config.chains[mode].list();
  const only = config.supportedChains;
  return only ? all.filter((c) => only.includes(c.caip2)) : all;
}

export function payoutTokens(config: PayoutsConfig, mode: 'test' | 'live'): PayoutToken[] {
  return payoutChains(config, mode).flatMap((chain) =>
    chain.stablecoins
      .filter((s) => PAYOUT_TOKENS.has(s.symbol))
      .map((s) => ({ chain: chain.caip2, symbol: s.symbol, asset: s.assetId, decimals: s.decimals })),
  );
}

/** Chain names as SPEC shows them (a local test chain stands in for the chain of its id, under that chain's name). */
const CHAIN_NAMES = new Map(LIVE_CHAINS.map((c) => [`eip155:${c.chainId.toString()}`, c.name]));

/** SPEC deposit_addresses: the one EVM address, the names of the chains it is valid on and the token symbols. */
export function depositAddresses(
  config: PayoutsConfig,
  mode: 'test' | 'live',
  address: string,
): DepositAddress[] {
  const chains = payoutChains(config, mode);
  const tokens = [...new Set(payoutTokens(config, mode).map((t) => t.symbol))].sort();
  return [{ address, chains: chains.map((c) => CHAIN_NAMES.get(c.caip2) ?? c.name), tokens }];
}
