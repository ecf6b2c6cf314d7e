import { Wallet, getAddress, isAddress } from 'ethers';
import {
  TEST_STABLECOINS,
  computeStablepayAddresses,
  computeTestStablecoinAddresses,
  type StablepayAddresses,
  type StablepayRoles,
} from '@stablepay/contracts';
import {
  chainLogRangeFromEnv,
  chainRpcUrlsFromEnv,
  configChain,
  createChainRegistry,
  formatCaip2,
  parseCaip2,
  type ChainRegistry,
  type LocalChain,
  type Stablecoin,
} from '@stablepay/evm';
import { ConfigError, envOptional } from '@stablepay/util';
import { chainModeFromEnv } from './chain-mode';

/** One chain the service acts on: where to reach it, what it accepts, how deep a deposit must be buried. */
export interface OperatorChain {
  /** Canonical CAIP-2 id. */
  readonly caip2: string;
  readonly chainId: bigint;
  readonly name: string;
  readonly rpcUrl: string;
  /** Blocks on top of (and including) a deposit's block before it counts as confirmed. */
  readonly confirmations: number;
  /** Most blocks one eth_getLogs window of a service's log lookup covers (CHAIN_LOG_RANGE, default 2000). */
  readonly logRange: number;
  /** Accepted stablecoins on this chain (the chain registry's, or the local test tokens). */
  readonly stablecoins: readonly Stablecoin[];
}

/** The operator's hot key. Never the registry admin (that cold key signs nothing in the service). */
export interface OperatorKey {
  readonly address: string;
  readonly privateKey: string;
}

export interface ChainOperatorConfig {
  /**
   * False when no chain is configured (no CHAIN_RPC_URLS): the services boot and serve what needs no chain;
   * nothing is registered, deployed or watched.
   */
  readonly enabled: boolean;
  /** `live`: the mainnet registry's tokens; `test`: the test stablecoins at their deterministic addresses. */
  readonly mode: 'live' | 'test';
  /** The supported chains, in SPEC order (SUPPORTED_CHAINS narrowed to those with an RPC URL). */
  readonly chains: readonly OperatorChain[];
  /** The registry view of the same chains (CAIP parsing, `unsupported_chain` / `unsupported_asset` errors). */
  readonly registry: ChainRegistry;
  readonly operator: OperatorKey | null;
  /** admin (cold, public address only), operator, operatorPauser: they fix every contract address. */
  readonly roles: StablepayRoles | null;
  /** Registry, PaymentFactory, ...: identical on every chain, computed offline from the roles. */
  readonly addresses: StablepayAddresses | null;
  /**
   * Payouts (beta): where customers' deposit addresses come from and where their sweeps go; null when no chain is
   * configured or no PAYOUT_OFF_RAMP_ADDRESS is set (customers then get no deposit address).
   */
  readonly payouts: PayoutChainConfig | null;
}

export interface PayoutChainConfig {
  /** The PayoutDepositFactory: `addresses.payoutDepositFactory` unless PAYOUT_DEPOSIT_FACTORY_ADDRESS says otherwise. */
  readonly factory: string;
  /** The off-ramp's receiving address, bound into every customer's deposit address (one on every chain). */
  readonly offRamp: string;
}

type Env = Record<string, string | undefined>;

export const DEFAULT_CHAIN_CONFIRMATIONS = 12;

export interface ChainOperatorConfigOptions {
  /**
   * Local anvil chains the embedded launcher started: test mode uses their tokens unless the environment names
   * others. They do not choose the mode (CHAIN_MODE does; the launcher sets it to test).
   */
  readonly localChains?: readonly LocalChain[];
}

/**
 * Reads and validates the chain configuration shared by every service that acts on chain (payments,
 * subscriptions). Every error is a ConfigError naming the variable (exit 78 at start).
 *
 * - `CHAIN_RPC_URLS`: `eip155:8453=https://...,eip155:137=https://...` (absent: chains disabled).
 * - `SUPPORTED_CHAINS`: comma-separated CAIP-2 ids (default: every chain with an RPC URL); each needs an RPC URL.
 * - `CHAIN_MODE`: `live` (default; the mainnet stablecoins of the chain registry) or `test` (the test stablecoins
 *   USDC/USDT/DAI at their deterministic addresses, as on the local chains and the compose anvil).
 * - `CHAIN_CONFIRMATIONS`: `12` for every chain, or `12,eip155:137=64,eip155:8453=3` (default 12).
 * - `CHAIN_LOG_RANGE`: `eip155:8453=10000,eip155:137=2000`, the most blocks per eth_getLogs window of a log
 *   lookup (default 2000; what the chain's RPC provider accepts).
 * - `OPERATOR_PRIVATE_KEY` (secret): the hot relayer key, 0x + 64 hex. Required with chains.
 * - `REGISTRY_ADMIN_ADDRESS`: the registry admin's public address (the cold key stays offline; it must differ
 *   from the operator). `OPERATOR_PAUSER_ADDRESS`: the operator pauser. Both required with chains: with the
 *   operator they fix the contract addresses (`computeStablepayAddresses`).
 * - `OPERATOR_ADDRESS` (optional here): the operator's public address, as the gateway reads it
 *   (`publicRolesFromEnv`); when set it must be the address of OPERATOR_PRIVATE_KEY.
 * - `PAYOUT_OFF_RAMP_ADDRESS`, `PAYOUT_DEPOSIT_FACTORY_ADDRESS`: payout deposit addresses (`payouts`, optional).
 */
export function chainOperatorConfigFromEnv(
  env: Env,
  options: ChainOperatorConfigOptions = {},
): ChainOperatorConfig {
  const chains = chainsFromEnv(env, options);
  if (!chains.enabled) {
    return { ...chains, operator: null, roles: null, addresses: null, payouts: null };
  }
  const operator = parseOperatorKey(env);
  // The gateway computes the addresses it shows merchants from the public OPERATOR_ADDRESS, never from the key: a
  // key holder given another one would sign for contracts other than those the merchants are shown.
  if (envOptional(env, 'OPERATOR_ADDRESS') !== undefined) {
    const declared = requiredAddress(env, 'OPERATOR_ADDRESS');
    if (declared !== operator.address)
      throw new ConfigError(
        `environment variable OPERATOR_ADDRESS (${declared}) is not the address of OPERATOR_PRIVATE_KEY (${operator.address}): both must name the one operator`,
      );
  }
  const roles = rolesWithOperator(env, operator.address, 'when CHAIN_RPC_URLS is set');
  const addresses = computeStablepayAddresses(roles);
  return { ...chains, operator, roles, addresses, payouts: payoutsFromEnv(env, addresses) };
}

/**
 * The three roles as public addresses, read without any key: what a process that shows the contract addresses but
 * never signs (the gateway: settings' registry and payment factory) needs to compute them. `OPERATOR_ADDRESS` is the
 * operator's public address (a process holding OPERATOR_PRIVATE_KEY refuses to start when it names another key).
 * Null when OPERATOR_ADDRESS is unset; with it, REGISTRY_ADMIN_ADDRESS and OPERATOR_PAUSER_ADDRESS are required.
 */
export function publicRolesFromEnv(env: Env): StablepayRoles | null {
  if (envOptional(env, 'OPERATOR_ADDRESS') === undefined) return null;
  const operator = requiredAddress(env, 'OPERATOR_ADDRESS');
  return rolesWithOperator(env, operator, 'with OPERATOR_ADDRESS');
}

function rolesWithOperator(env: Env, operator: string, when: string): StablepayRoles {
  const admin = requiredAddress(env, 'REGISTRY_ADMIN_ADDRESS', when);
  const operatorPauser = requiredAddress(env, 'OPERATOR_PAUSER_ADDRESS', when);
  if (admin === operator) {
    throw new ConfigError(
      'environment variable REGISTRY_ADMIN_ADDRESS must not be the operator: the admin is the cold key',
    );
  }
  return { admin, operator, operatorPauser };
}

/**
 * `PAYOUT_OFF_RAMP_ADDRESS` (the off-ramp's receiving address; absent: no payout deposit addresses) and
 * `PAYOUT_DEPOSIT_FACTORY_ADDRESS` (default: the factory computed from the roles). Changing the off-ramp changes
 * every customer's deposit address; the old addresses still sweep only to the old off-ramp.
 */
function payoutsFromEnv(env: Env, addresses: StablepayAddresses): PayoutChainConfig | null {
  if (envOptional(env, 'PAYOUT_OFF_RAMP_ADDRESS') === undefined) return null;
  const offRamp = requiredAddress(env, 'PAYOUT_OFF_RAMP_ADDRESS');
  const factory =
    envOptional(env, 'PAYOUT_DEPOSIT_FACTORY_ADDRESS') === undefined
      ? addresses.payoutDepositFactory
      : requiredAddress(env, 'PAYOUT_DEPOSIT_FACTORY_ADDRESS');
  return { factory, offRamp };
}

/** The chains a deployment acts on, read without any key (what a process that only reads the chains needs). */
export type SupportedChains = Pick<ChainOperatorConfig, 'enabled' | 'mode' | 'chains' | 'registry'>;

/**
 * The keyless half of the chain configuration (CHAIN_RPC_URLS, SUPPORTED_CHAINS, CHAIN_MODE, CHAIN_CONFIRMATIONS):
 * the supported chains with their RPC URLs, tokens and depths, and the registry answering for them. Processes that
 * read chains but never sign (the gateway presenting stablecoin options and chain time) use this, so the operator
 * key stays where transactions are sent.
 */
export function chainsFromEnv(env: Env, options: ChainOperatorConfigOptions = {}): SupportedChains {
  const mode = chainModeFromEnv(env);
  const rpcUrls = chainRpcUrlsFromEnv(env);
  const live = createChainRegistry({ mode: 'live' });
  for (const chain of rpcUrls.keys()) {
    if (!live.isSupported(chain))
      throw new ConfigError(`environment variable CHAIN_RPC_URLS: ${chain} is not a supported chain`);
  }
  const supported = parseSupportedChains(env, live, rpcUrls);
  const confirmations = parseConfirmations(env, supported);
  const logRange = chainLogRangeFromEnv(env);
  if (supported.length === 0) {
    return {
      enabled: false,
      mode,
      chains: [],
      registry: createChainRegistry({ mode: 'test', localChains: [] }),
    };
  }
  const localByCaip2 = new Map((options.localChains ?? []).map((c) => [formatCaip2(c.chainId), c]));
  const testTokens = computeTestStablecoinAddresses();
  const registry =
    mode === 'live'
      ? createChainRegistry({
          mode: 'live',
          rpcUrls: Object.fromEntries(supported.map((c) => [c, rpcUrls.get(c) ?? ''])),
        })
      : createChainRegistry({
          mode: 'test',
          localChains: supported.map((caip2) => ({
            chainId: parseCaip2(caip2).chainId,
            rpcUrl: rpcUrls.get(caip2) ?? '',
            stablecoins:
              localByCaip2.get(caip2)?.stablecoins ??
              TEST_STABLECOINS.map((t) => ({
                symbol: t.symbol,
                decimals: t.decimals,
                address: testTokens[t.symbol],
              })),
          })),
        });
  const chains = supported.map((caip2): OperatorChain => {
    const info = registry.get(caip2);
    return {
      caip2,
      chainId: info.chainId,
      name: info.name,
      rpcUrl: rpcUrls.get(caip2) ?? '',
      confirmations: confirmations.perChain.get(caip2) ?? confirmations.fallback,
      logRange: logRange(caip2),
      stablecoins: info.stablecoins,
    };
  });
  return { enabled: true, mode, chains, registry: narrowRegistry(registry, supported) };
}

/** The same registry, answering only for the supported chains (a live registry lists every SPEC chain). */
function narrowRegistry(registry: ChainRegistry, supported: readonly string[]): ChainRegistry {
  if (registry.list().every((c) => supported.includes(c.caip2))) return registry;
  const local = registry.list().filter((c) => supported.includes(c.caip2));
  return {
    mode: registry.mode,
    list: () => local,
    find: (caip2) => (supported.includes(caip2) ? registry.find(caip2) : undefined),
    isSupported: (caip2) => supported.includes(caip2),
    get: (caip2, param) => {
      const chain = registry.get(caip2, param);
      if (!supported.includes(chain.caip2))
        return createChainRegistry({ mode: 'test', localChains: [] }).get(caip2, param);
      return chain;
    },
    getAsset: (assetId, param) => {
      const resolved = registry.getAsset(assetId, param);
      if (!supported.includes(resolved.chain.caip2))
        return createChainRegistry({ mode: 'test', localChains: [] }).getAsset(assetId, param);
      return resolved;
    },
    findStablecoin: (caip2, symbolOrAddress) =>
      supported.includes(caip2) ? registry.findStablecoin(caip2, symbolOrAddress) : undefined,
  };
}

function parseSupportedChains(env: Env, live: ChainRegistry, rpcUrls: ReadonlyMap<string, string>): string[] {
  const raw = envOptional(env, 'SUPPORTED_CHAINS');
  if (raw === undefined)
    return live
      .list()
      .map((c) => c.caip2)
      .filter((c) => rpcUrls.has(c));
  const chains: string[] = [];
  for (const entry of raw
    .split(',')
    .map((c) => c.trim())
    .filter(Boolean)) {
    const caip2 = configChain('SUPPORTED_CHAINS', entry);
    if (!live.isSupported(caip2))
      throw new ConfigError(`environment variable SUPPORTED_CHAINS: ${caip2} is not a supported chain`);
    if (chains.includes(caip2))
      throw new ConfigError(`environment variable SUPPORTED_CHAINS lists ${caip2} twice`);
    chains.push(caip2);
  }
  // Chains without an RPC URL cannot be acted on; with no chain at all the deployment runs without chains.
  if (rpcUrls.size === 0) return [];
  const missing = chains.filter((c) => !rpcUrls.has(c));
  if (missing.length > 0) {
    throw new ConfigError(
      `environment variable CHAIN_RPC_URLS has no URL for ${missing.join(', ')}, which SUPPORTED_CHAINS lists`,
    );
  }
  // SPEC order, whatever order the variable gave.
  return live
    .list()
    .map((c) => c.caip2)
    .filter((c) => chains.includes(c));
}

function parseOperatorKey(env: Env): OperatorKey {
  const raw = envOptional(env, 'OPERATOR_PRIVATE_KEY');
  if (raw === undefined) {
    throw new ConfigError(
      'environment variable OPERATOR_PRIVATE_KEY is required when CHAIN_RPC_URLS is set (the hot relayer key)',
    );
  }
  if (!/^0x[0-9a-fA-F]{64}$/.test(raw))
    throw new ConfigError(
      'environment variable OPERATOR_PRIVATE_KEY must be 0x followed by 64 hex characters',
    );
  try {
    const wallet = new Wallet(raw);
    return { address: wallet.address, privateKey: raw };
  } catch {
    // The message never repeats the key.
    throw new ConfigError('environment variable OPERATOR_PRIVATE_KEY is not a valid secp256k1 private key');
  }
}

function requiredAddress(env: Env, name: string, when = 'when CHAIN_RPC_URLS is set'): string {
  const raw = envOptional(env, name);
  if (raw === undefined) throw new ConfigError(`environment variable ${name} is required ${when}`);
  if (!isAddress(raw))
    throw new ConfigError(`environment variable ${name} must be an EVM address, got '${raw}'`);
  const address = getAddress(raw);
  if (address === '0x0000000000000000000000000000000000000000')
    throw new ConfigError(`environment variable ${name} must not be the zero address`);
  return address;
}

function parseConfirmations(
  env: Env,
  supported: readonly string[],
): { fallback: number; perChain: Map<string, number> } {
  const name = 'CHAIN_CONFIRMATIONS';
  const raw = envOptional(env, name);
  const perChain = new Map<string, number>();
  let fallback = DEFAULT_CHAIN_CONFIRMATIONS;
  if (raw === undefined) return { fallback, perChain };
  const depth = (value: string, what: string): number => {
    if (!/^[0-9]+$/.test(value) || Number(value) < 1 || Number(value) > 10_000) {
      throw new ConfigError(
        `environment variable ${name}: ${what} must be an integer between 1 and 10000, got '${value}'`,
      );
    }
    return Number(value);
  };
  let sawDefault = false;
  for (const entry of raw
    .split(',')
    .map((e) => e.trim())
    .filter(Boolean)) {
    const eq = entry.indexOf('=');
    if (eq < 0) {
      if (sawDefault) throw new ConfigError(`environment variable ${name} gives the default depth twice`);
      sawDefault = true;
      fallback = depth(entry, 'the default depth');
      continue;
    }
    const chain = configChain(name, entry.slice(0, eq).trim());
    if (perChain.has(chain)) throw new ConfigError(`environment variable ${name} lists ${chain} twice`);
    if (supported.length > 0 && !supported.includes(chain))
      throw new ConfigError(
        `environment variable ${name} names ${chain}, which is not a supported chain here`,
      );
    perChain.set(chain, depth(entry.slice(eq + 1).trim(), chain));
  }
  return { fallback, perChain };
}
