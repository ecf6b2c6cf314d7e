import {
  chainOperatorConfigFromEnv,
  chainsFromEnv,
  type PayoutChainConfig,
  type SupportedChains,
} from '@stablepay/chain-operator';
import { type ChainRegistry, createChainRegistry, type LocalChain, parseAddress } from '@stablepay/evm';
import { ConfigError, envOptional } from '@stablepay/util';

/**
 * What the payouts service needs of the chain layer: the chains it follows and where customers' deposit addresses
 * come from (`payouts`: the PayoutDepositFactory and the off-ramp; null: none configured). A ChainOperatorConfig
 * satisfies it.
 */
export type PayoutChains = Pick<SupportedChains, 'enabled' | 'mode' | 'chains' | 'registry'> & {
  readonly payouts: PayoutChainConfig | null;
};

/**
 * The payouts process's chain configuration without the operator key (it sends no transaction): the keyless chains,
 * and with PAYOUT_OFF_RAMP_ADDRESS the factory, PAYOUT_DEPOSIT_FACTORY_ADDRESS (required then: without the operator's
 * address the factory cannot be computed here). A process that holds the key anyway (OPERATOR_PRIVATE_KEY set) reads
 * the whole chain layer's.
 */
export function payoutChainsFromEnv(env: Record<string, string | undefined>): PayoutChains {
  if (envOptional(env, 'OPERATOR_PRIVATE_KEY') !== undefined) return chainOperatorConfigFromEnv(env);
  const chains = chainsFromEnv(env);
  const offRamp = envOptional(env, 'PAYOUT_OFF_RAMP_ADDRESS');
  if (!chains.enabled || offRamp === undefined) return { ...chains, payouts: null };
  const factory = envOptional(env, 'PAYOUT_DEPOSIT_FACTORY_ADDRESS');
  if (factory === undefined)
    throw new ConfigError(
      'environment variable PAYOUT_DEPOSIT_FACTORY_ADDRESS is required with PAYOUT_OFF_RAMP_ADDRESS in the payouts service',
    );
  const address = (name: string, value: string) => {
    try {
      return parseAddress(value, name, { nonZero: true });
    } catch {
      throw new ConfigError(`environment variable ${name} must be a non-zero 0x-prefixed 20-byte address`);
    }
  };
  return {
    ...chains,
    payouts: {
      factory: address('PAYOUT_DEPOSIT_FACTORY_ADDRESS', factory),
      offRamp: address('PAYOUT_OFF_RAMP_ADDRESS', offRamp),
    },
  };
}

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
