import { type ChainRegistry, createChainRegistry, type LocalChain } from '@stablepay/evm';
import { ConfigError, envOptional } from '@stablepay/util';

/** The payouts service's configuration, validated at start (docs/payouts.md). */
export interface PayoutsConfig {
  /** `{hosted_url}` (HOSTED_URL); null: `<origin of the API call>/hosted`. */
  readonly hostedUrl: string | null;
  /** The chains and stablecoins a payout may be funded with, per merchant mode (as the payments scope accepts them). */
  readonly chains: { readonly live: ChainRegistry; readonly test: ChainRegistry };
  /** Narrows the chains (SUPPORTED_CHAINS, shared with the other scopes). */
  readonly supportedChains: readonly string[] | null;
}

export const PAYOUTS_CONFIG = Symbol('PAYOUTS_CONFIG');

export function payoutsConfigFromEnv(
  env: Record<string, string | undefined>,
  /** `testRegistry`: the chain layer's test-mode registry (its tokens); else the local chains', else the live one. */
  options: { readonly localChains?: readonly LocalChain[]; readonly testRegistry?: ChainRegistry } = {},
): PayoutsConfig {
  const live = createChainRegistry({ mode: 'live' });
  const supportedChains =
    envOptional(env, 'SUPPORTED_CHAINS')
      ?.split(',')
      .map((c) => c.trim())
      .filter(Boolean) ?? null;
  for (const chain of supportedChains ?? [])
    if (!live.isSupported(chain))
      throw new ConfigError(`environment variable SUPPORTED_CHAINS: ${chain} is not a supported chain`);
  const hosted = envOptional(env, 'HOSTED_URL');
  if (hosted !== undefined && !/^https?:\/\/[^/]/.test(hosted))
    throw new ConfigError(`environment variable HOSTED_URL must be an absolute http(s) URL, got '${hosted}'`);
  return {
    hostedUrl: hosted?.replace(/\/+$/, '') ?? null,
    chains: {
      live,
      test:
        options.testRegistry ??
        (options.localChains?.length
          ? createChainRegistry({ mode: 'test', localChains: options.localChains })
          : live),
    },
    supportedChains,
  };
}
