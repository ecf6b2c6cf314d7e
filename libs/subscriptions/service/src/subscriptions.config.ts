import { type ChainMode, chainsFromEnv, servedChainMode } from '@stablepay/chain-operator';
import {
  chainLogRangeFromEnv,
  chainRpcUrlsFromEnv,
  createChainRegistry,
  parseAddress,
  type ChainRegistry,
  type LocalChain,
} from '@stablepay/evm';
import { ConfigError, envInt, envOptional } from '@stablepay/util';
import { parseRateTable, type RateTable } from './rates/sandbox-rate-source';

export interface SubscriptionsConfig {
  /**
   * `{hosted_url}`: the public address of the hosted customer pages (HOSTED_URL). The gateway serves them under
   * `/hosted`; when unset, checkout_url is built from the address the API was called on plus `/hosted`.
   */
  readonly hostedUrl: string | null;
  /** How often the durable expiry timer looks for due intents (SUBSCRIPTION_EXPIRY_POLL_MS, default 1000). */
  readonly expiryPollIntervalMs: number;
  /**
   * How long a charge call waits for its receipt before answering 503 `charge_pending` (the transaction stays pending
   * on its nonce). Below the gateway's COMMAND_TIMEOUT_MS, so the owner answers before the caller gives up.
   */
  readonly chargeReceiptTimeoutMs: number;
  /**
   * How long an API-path receipt whose block a reorg replaced is kept while the node holds its transaction pending
   * (RECEIPT_REINCLUSION_WINDOW_SECONDS, default 600): a real node re-queues the transactions of an orphaned block and
   * mines them again; only a transaction dropped, or still pending after this, has its fact undone.
   */
  readonly receiptReinclusionWindowMs: number;
  /** Most blocks one eth_getLogs window of a charge-log lookup covers, per chain (CHAIN_LOG_RANGE). */
  readonly chainLogRange: (chain: string) => number;
  /** The sandbox rate table (built-in ARS plus SANDBOX_RATES). */
  readonly sandboxRates: RateTable;
  /**
   * The chains and stablecoins offered, per merchant mode. Live: the mainnet registry. Test: the local chains the
   * launcher started (createChainRegistry({ mode: 'test', localChains }), their runtime token addresses); else, in a
   * test deployment (CHAIN_MODE=test with CHAIN_RPC_URLS), the chain layer's test stablecoins at their
   * deterministic addresses; otherwise the registry's mainnet token addresses too.
   */
  readonly chains: { readonly live: ChainRegistry; readonly test: ChainRegistry };
  /**
   * The mode of the chains this deployment acts on (CHAIN_MODE once CHAIN_RPC_URLS names chains; null without
   * chains). Only merchants of this mode are offered chains, get managers deployed and authorizations signed: the
   * other mode's registry resolves to the same chain ids, hence to this deployment's RPC endpoints.
   */
  readonly chainMode: ChainMode | null;
  /** Narrows the offered chains (SUPPORTED_CHAINS, comma-separated CAIP-2, shared with the merchants config). */
  readonly supportedChains: readonly string[] | null;
  /**
   * The operator's hot key (OPERATOR_PRIVATE_KEY): deploys subscription managers, signs SubscribeAuthorizations and
   * submits merchant-signed cancels. Unset: subscribe and cancel answer 503 chain_unavailable.
   */
  readonly operatorPrivateKey: string | null;
  /** SUBSCRIPTION_MANAGER_FACTORY_ADDRESS and REGISTRY_ADDRESS: the same on every chain (deterministic deployment). */
  readonly subscriptionManagerFactory: string | null;
  readonly registry: string | null;
}

export const SUBSCRIPTIONS_CONFIG = Symbol('SUBSCRIPTIONS_CONFIG');
/** Set by subscriptionsService(config) for the whole process; read by the core module when present. */
export const SUBSCRIPTIONS_CONFIG_OVERRIDE = Symbol('SUBSCRIPTIONS_CONFIG_OVERRIDE');

/**
 * `localChains`: the local nodes the embedded launcher started (test mode offers their stablecoins at their
 * runtime addresses); without them test mode offers the registry's mainnet addresses.
 */
export function subscriptionsConfigFromEnv(
  env: Record<string, string | undefined>,
  options: { readonly localChains?: readonly LocalChain[] } = {},
): SubscriptionsConfig {
  const hosted = envOptional(env, 'HOSTED_URL');
  let hostedUrl: string | null = null;
  if (hosted !== undefined) {
    let url: URL;
    try {
      url = new URL(hosted);
    } catch {
      throw new ConfigError(
        `environment variable HOSTED_URL must be an absolute http(s) URL, got '${hosted}'`,
      );
    }
    if (url.protocol !== 'https:' && url.protocol !== 'http:')
      throw new ConfigError('environment variable HOSTED_URL must use http or https');
    hostedUrl = hosted.replace(/\/+$/, '');
  }
  // The chain layer's reading of CHAIN_RPC_URLS / SUPPORTED_CHAINS / CHAIN_MODE (no key needed): a test
  // deployment (CHAIN_MODE=test, e.g. docker-compose's anvil) offers the test stablecoins at their deterministic
  // addresses, in the gateway that presents the options as in the service that acts on them.
  const deployment = chainsFromEnv(env, options);
  const live = createChainRegistry({ mode: 'live', rpcUrls: Object.fromEntries(chainRpcUrlsFromEnv(env)) });
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
  return {
    hostedUrl,
    expiryPollIntervalMs: envInt(env, 'SUBSCRIPTION_EXPIRY_POLL_MS', 1000, 10, 3_600_000),
    chargeReceiptTimeoutMs: envInt(env, 'CHARGE_RECEIPT_TIMEOUT_MS', 8000, 100, 600_000),
    receiptReinclusionWindowMs: envInt(env, 'RECEIPT_REINCLUSION_WINDOW_SECONDS', 600, 0, 86_400) * 1000,
    chainLogRange: chainLogRangeFromEnv(env),
    sandboxRates: parseRateTable(envOptional(env, 'SANDBOX_RATES')),
    chains: {
      live,
      test: options.localChains?.length
        ? createChainRegistry({ mode: 'test', localChains: options.localChains })
        : deployment.enabled && deployment.mode === 'test'
          ? deployment.registry
          : live,
    },
    chainMode: servedChainMode(deployment),
    supportedChains,
    operatorPrivateKey: privateKey(envOptional(env, 'OPERATOR_PRIVATE_KEY')),
    subscriptionManagerFactory: address(env, 'SUBSCRIPTION_MANAGER_FACTORY_ADDRESS'),
    registry: address(env, 'REGISTRY_ADDRESS'),
  };
}

function privateKey(raw: string | undefined): string | null {
  if (raw === undefined) return null;
  if (!/^0x[0-9a-fA-F]{64}$/.test(raw))
    throw new ConfigError('environment variable OPERATOR_PRIVATE_KEY must be a 0x-prefixed 32-byte hex key');
  return raw;
}

function address(env: Record<string, string | undefined>, name: string): string | null {
  const raw = envOptional(env, name);
  if (raw === undefined) return null;
  try {
    return parseAddress(raw, name);
  } catch {
    throw new ConfigError(`environment variable ${name} must be a 20-byte hex address`);
  }
}
