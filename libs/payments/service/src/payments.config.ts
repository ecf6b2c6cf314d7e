import { getAddress } from 'ethers';
import { type ChainMode, chainsFromEnv, servedChainMode } from '@stablepay/chain-operator';
import { createChainRegistry, type ChainRegistry, type LocalChain } from '@stablepay/evm';
import { type SandboxSettlementConfig, sandboxSettlementConfigFromEnv } from '@stablepay/fiat-settlement';
import { ConfigError, envInt, envOptional } from '@stablepay/util';

export interface PaymentsConfig {
  /** `{hosted_url}` (HOSTED_URL): checkout_url is `{hosted_url}/pay/<checkout id>`; unset: `<API origin>/hosted`. */
  readonly hostedUrl: string | null;
  /** How often the durable expiry timer looks for due payments (PAYMENT_EXPIRY_POLL_MS, default 1000). */
  readonly expiryPollIntervalMs: number;
  /** The chains and stablecoins accepted, per merchant mode (as the subscriptions scope offers them). */
  readonly chains: { readonly live: ChainRegistry; readonly test: ChainRegistry };
  /** Narrows the accepted chains (SUPPORTED_CHAINS, comma-separated CAIP-2, shared with the other scopes). */
  readonly supportedChains: readonly string[] | null;
  /**
   * The mode of the chains this deployment acts on (CHAIN_MODE once CHAIN_RPC_URLS names chains; null without
   * chains), read as the chain layer reads it. The gateway has no chain layer of its own: the hosted page needs it
   * to withhold the deposit address of a payment of the other mode (recorded before such checkouts were refused).
   */
  readonly chainMode: ChainMode | null;
  /**
   * The PaymentFactory every deposit address is derived from (PAYMENT_FACTORY_ADDRESS; one address on every chain).
   * Null: checkouts are refused with 503 until it is configured (a deposit address from a guessed factory would
   * receive funds nothing can move).
   */
  readonly paymentFactoryAddress: string | null;
  /** The sandbox settlement provider's timing (SANDBOX_SETTLEMENT_DELAY_MS / _POLL_MS, the charge ledger's too). */
  readonly sandboxSettlement: SandboxSettlementConfig;
}

export const PAYMENTS_CONFIG = Symbol('PAYMENTS_CONFIG');
/** Set by paymentsService(config) for the whole process; read by the core module when present. */
export const PAYMENTS_CONFIG_OVERRIDE = Symbol('PAYMENTS_CONFIG_OVERRIDE');

function hostedUrlFrom(env: Record<string, string | undefined>): string | null {
  const hosted = envOptional(env, 'HOSTED_URL');
  if (hosted === undefined) return null;
  let url: URL;
  try {
    url = new URL(hosted);
  } catch {
    throw new ConfigError(`environment variable HOSTED_URL must be an absolute http(s) URL, got '${hosted}'`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    throw new ConfigError('environment variable HOSTED_URL must use http or https');
  return hosted.replace(/\/+$/, '');
}

export interface PaymentsConfigOptions {
  /** The local nodes the embedded launcher started (test mode accepts their stablecoins). */
  readonly localChains?: readonly LocalChain[];
  /**
   * The test-mode registry of the process's chain layer (@stablepay/chain-operator with CHAIN_MODE=test: the test
   * stablecoins at their deterministic addresses), so test merchants are offered the tokens the chain really holds.
   */
  readonly testRegistry?: ChainRegistry;
  /** The PaymentFactory the chain layer computed from its roles; PAYMENT_FACTORY_ADDRESS may only repeat it. */
  readonly defaultPaymentFactory?: string | null;
}

export function paymentsConfigFromEnv(
  env: Record<string, string | undefined>,
  options: PaymentsConfigOptions = {},
): PaymentsConfig {
  const live = createChainRegistry({ mode: 'live' });
  const chainsRaw = envOptional(env, 'SUPPORTED_CHAINS');
  const supportedChains = chainsRaw
    ? chainsRaw
        .split(',')
        .map((c) => c.trim())
        .filter(Boolean)
    : null;
  for (const chain of supportedChains ?? []) {
    if (!live.isSupported(chain))
      throw new ConfigError(`environment variable SUPPORTED_CHAINS: ${chain} is not a supported chain`);
  }
  const factory = envOptional(env, 'PAYMENT_FACTORY_ADDRESS');
  let paymentFactoryAddress: string | null = options.defaultPaymentFactory
    ? getAddress(options.defaultPaymentFactory)
    : null;
  if (factory !== undefined) {
    let configured: string;
    try {
      configured = getAddress(factory);
    } catch {
      throw new ConfigError(
        `environment variable PAYMENT_FACTORY_ADDRESS must be a 0x-prefixed 20-byte address, got '${factory}'`,
      );
    }
    // The deposit flow deploys through the factory the roles fix and refuses a payment whose address another one
    // computed: checkouts derived from a different factory would never deploy.
    if (paymentFactoryAddress !== null && configured !== paymentFactoryAddress)
      throw new ConfigError(
        `environment variable PAYMENT_FACTORY_ADDRESS (${configured}) is not the PaymentFactory the chain layer's roles fix (${paymentFactoryAddress}): unset it, or correct the roles`,
      );
    paymentFactoryAddress = configured;
  }
  return {
    hostedUrl: hostedUrlFrom(env),
    expiryPollIntervalMs: envInt(env, 'PAYMENT_EXPIRY_POLL_MS', 1000, 10, 3_600_000),
    chains: {
      live,
      test:
        options.testRegistry ??
        (options.localChains?.length
          ? createChainRegistry({ mode: 'test', localChains: options.localChains })
          : live),
    },
    supportedChains,
    chainMode: servedChainMode(chainsFromEnv(env)),
    paymentFactoryAddress,
    sandboxSettlement: sandboxSettlementConfigFromEnv(env),
  };
}
