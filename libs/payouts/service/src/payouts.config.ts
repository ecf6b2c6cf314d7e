import {
  chainOperatorConfigFromEnv,
  chainsFromEnv,
  type PayoutChainConfig,
  type SupportedChains,
} from '@stablepay/chain-operator';
import { type ChainRegistry, createChainRegistry, type LocalChain } from '@stablepay/evm';
import { ConfigError, envOptional, SecretBox } from '@stablepay/util';

/**
 * What the payouts service needs of the chain layer: the chains it follows and where customers' deposit addresses
 * come from (`payouts`: the PayoutDepositFactory and the off-ramp; null: none configured). A ChainOperatorConfig
 * satisfies it.
 */
export type PayoutChains = Pick<SupportedChains, 'enabled' | 'mode' | 'chains' | 'registry'> & {
  readonly payouts: PayoutChainConfig | null;
};

/**
 * The payouts process's chain configuration. With PAYOUT_OFF_RAMP_ADDRESS the process sweeps customers' deposits to
 * the off-ramp, so it holds the operator key (a third nonce sequence beside payments' and subscriptions',
 * docs/chain-operator.md): OPERATOR_PRIVATE_KEY is required then and the whole chain layer is read
 * (PAYOUT_DEPOSIT_FACTORY_ADDRESS only overrides the factory computed from the roles). Without an off-ramp the keyless
 * chains (no deposit addresses on chain).
 */
export function payoutChainsFromEnv(env: Record<string, string | undefined>): PayoutChains {
  if (envOptional(env, 'OPERATOR_PRIVATE_KEY') !== undefined) return chainOperatorConfigFromEnv(env);
  const chains = chainsFromEnv(env);
  if (chains.enabled && envOptional(env, 'PAYOUT_OFF_RAMP_ADDRESS') !== undefined)
    throw new ConfigError(
      'environment variable OPERATOR_PRIVATE_KEY is required with PAYOUT_OFF_RAMP_ADDRESS in the payouts service (it sweeps customer deposits to the off-ramp)',
    );
  return { ...chains, payouts: null };
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

/**
 * The key sealing beneficiaries' bank account numbers: the deployment's sealing key, WEBHOOK_SECRET_ENCRYPTION_KEY
 * (older keys in WEBHOOK_SECRET_ENCRYPTION_KEY_PREVIOUS still open what they sealed), as the webhook secrets are.
 * Required: without it an account sealed now could not be opened after a restart.
 */
export function payoutsSealingFromEnv(env: Record<string, string | undefined>): SecretBox {
  const key = envOptional(env, 'WEBHOOK_SECRET_ENCRYPTION_KEY');
  if (key === undefined)
    throw new ConfigError(
      'environment variable WEBHOOK_SECRET_ENCRYPTION_KEY is required by the payouts service (it seals bank account numbers)',
    );
  const previous = (envOptional(env, 'WEBHOOK_SECRET_ENCRYPTION_KEY_PREVIOUS') ?? '')
    .split(',')
    .map((k) => k.trim())
    .filter((k) => k !== '');
  try {
    return SecretBox.fromEncodedKey(key, previous);
  } catch {
    throw new ConfigError(
      'environment variables WEBHOOK_SECRET_ENCRYPTION_KEY and WEBHOOK_SECRET_ENCRYPTION_KEY_PREVIOUS must hold keys of 32 bytes as 64 hex characters or base64',
    );
  }
}
