import { getAddress } from 'ethers';
import { validationError } from '@stablepay/util';
import { formatCaip19, formatCaip2, parseCaip19, parseCaip2 } from './caip';

/**
 * The chains of SPEC.md and the stablecoins the service accepts on each.
 *
 * One registry shape serves both modes:
 * - `live`: the built-in mainnet definitions below (token addresses are the issuers' canonical deployments);
 *   RPC URLs come from configuration.
 * - `test`: every chain is backed by a local node (anvil) that runs with the SAME chain id as the mainnet it stands
 *   in for, so CAIP ids, EIP-712 domains and merchant code are identical in both modes. The local-chains tool
 *   deploys the test stablecoins and injects their addresses and the node's RPC URL at runtime
 *   (`createChainRegistry({ mode: 'test', localChains })`). Chains with no local node are not supported in that
 *   registry (a run may start only the chains it needs).
 */
export type ChainMode = 'live' | 'test';

export interface NativeCurrency {
  readonly name: string;
  readonly symbol: string;
  readonly decimals: number;
}

export interface StablecoinDefinition {
  readonly symbol: string;
  readonly decimals: number;
  readonly address: string;
}

export interface Stablecoin extends StablecoinDefinition {
  /** EIP-55 checksummed. */
  readonly address: string;
  /** Canonical CAIP-19 id. */
  readonly assetId: string;
}

export interface ChainInfo {
  /** Canonical CAIP-2 id, e.g. `eip155:8453`. */
  readonly caip2: string;
  readonly chainId: bigint;
  readonly name: string;
  readonly nativeCurrency: NativeCurrency;
  readonly stablecoins: readonly Stablecoin[];
  /** Null in live mode when no RPC URL was configured for the chain. */
  readonly rpcUrl: string | null;
  readonly mode: ChainMode;
}

interface LiveChainDefinition {
  readonly chainId: bigint;
  readonly name: string;
  readonly nativeCurrency: NativeCurrency;
  readonly stablecoins: readonly StablecoinDefinition[];
}

const ETHER: NativeCurrency = { name: 'Ether', symbol: 'ETH', decimals: 18 };

/**
 * Mainnet definitions. Only addresses verified against the issuers' published deployments are listed (Circle's
 * native USDC, Tether's USDT); bridged variants (USDC.e and similar) are deliberately not accepted.
 * See UNVERIFIED_STABLECOINS for what is left out and why.
 */
export const LIVE_CHAINS: readonly LiveChainDefinition[] = [
  {
    chainId: 1n,
    name: 'Ethereum',
    nativeCurrency: ETHER,
    stablecoins: [
      { symbol: 'USDC', decimals: 6, address: '0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48' },
      { symbol: 'USDT', decimals: 6, address: '0xdAC17F958D2ee523a2206206994597C13D831ec7' },
    ],
  },
  {
    chainId: 137n,
    name: 'Polygon',
    nativeCurrency: { name: 'POL', symbol: 'POL', decimals: 18 },
    stablecoins: [
      { symbol: 'USDC', decimals: 6, address: '0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359' },
      { symbol: 'USDT', decimals: 6, address: '0xc2132D05D31c914a87C6611C10748AEb04B58e8F' },
    ],
  },
  {
    chainId: 42161n,
    name: 'Arbitrum One',
    nativeCurrency: ETHER,
    stablecoins: [
      { symbol: 'USDC', decimals: 6, address: '0xaf88d065e77c8cC2239327C5EDb3A432268e5831' },
      { symbol: 'USDT', decimals: 6, address: '0xFd086bC7CD5C481DCC9C85ebE478A1C0b69FCbb9' },
    ],
  },
  {
    chainId: 8453n,
    name: 'Base',
    nativeCurrency: ETHER,
    stablecoins: [{ symbol: 'USDC', decimals: 6, address: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913' }],
  },
  {
    chainId: 10n,
    name: 'Optimism',
    nativeCurrency: ETHER,
    stablecoins: [
      { symbol: 'USDC', decimals: 6, address: '0x0b2C639c533813f4Aa9D7837CAf62653d097Ff85' },
      { symbol: 'USDT', decimals: 6, address: '0x94b008aA00579c1307B0EF2c499aD98a8ce58e58' },
    ],
  },
];

const FILTERABLE_CHAINS: ReadonlySet<string> = new Set(LIVE_CHAINS.map((c) => formatCaip2(c.chainId)));

/**
 * A list or export filter naming a chain (`chain`, `detected_chain`): a CAIP-2 id (parseCaip2's codes) of a chain
 * the service supports at all, else 400 `unsupported_chain` on `param`. Such a filter can never match, so it is a
 * typo (`eip155:8543`), and an empty list would read as "none there". Checked against LIVE_CHAINS, not this
 * deployment's configured chains: a test chain stands in under the same id, and records on a chain the operator no
 * longer runs stay findable. Answers the canonical id (records store it so).
 */
export function parseChainFilter(value: unknown, param = 'chain'): string {
  const { caip2 } = parseCaip2(value, param);
  if (!FILTERABLE_CHAINS.has(caip2))
    throw validationError(
      param,
      `${param} ${caip2} is not a chain Stablepay supports (supported: ${[...FILTERABLE_CHAINS].join(', ')}).`,
      'unsupported_chain',
    );
  return caip2;
}

/** Stablecoins intentionally missing from LIVE_CHAINS until someone verifies an address against the issuer. */
export const UNVERIFIED_STABLECOINS: readonly {
  readonly caip2: string;
  readonly symbol: string;
  readonly reason: string;
}[] = [
  {
    caip2: 'eip155:8453',
    symbol: 'USDT',
    reason: 'Tether publishes no native USDT deployment on Base; bridged variants are not accepted',
  },
];

/** A local node standing in for one supported chain in test mode; supplied by the local-chains tool at runtime. */
export interface LocalChain {
  /** Must be one of the supported chain ids: the node runs with the chain id of the chain it stands in for. */
  readonly chainId: bigint | number;
  readonly rpcUrl: string;
  /** The test stablecoins deployed on that node. */
  readonly stablecoins: readonly StablecoinDefinition[];
}

export type ChainRegistryOptions =
  | { readonly mode: 'live'; readonly rpcUrls?: Readonly<Record<string, string>> }
  | { readonly mode: 'test'; readonly localChains: readonly LocalChain[] };

export interface ResolvedAsset {
  readonly chain: ChainInfo;
  readonly stablecoin: Stablecoin;
}

export interface ChainRegistry {
  readonly mode: ChainMode;
  /** Supported chains in SPEC.md order. */
  list(): readonly ChainInfo[];
  /** The chain, or validation_error `unsupported_chain` (and the CAIP-2 parse errors) on `param`. */
  get(caip2: unknown, param?: string): ChainInfo;
  find(caip2: string): ChainInfo | undefined;
  isSupported(caip2: string): boolean;
  /** The accepted stablecoin for a CAIP-19 id, or validation_error `unsupported_asset` / `unsupported_chain`. */
  getAsset(assetId: unknown, param?: string): ResolvedAsset;
  findStablecoin(caip2: string, symbolOrAddress: string): Stablecoin | undefined;
}

/** Builds the registry for one mode. Throws a plain Error on a bad configuration (fail fast at start). */
export function createChainRegistry(options: ChainRegistryOptions): ChainRegistry {
  const chains =
    options.mode === 'live' ? liveChains(options.rpcUrls ?? {}) : testChains(options.localChains);
  return new StaticChainRegistry(options.mode, chains);
}

function liveChains(rpcUrls: Readonly<Record<string, string>>): ChainInfo[] {
  const known = new Set(LIVE_CHAINS.map((c) => formatCaip2(c.chainId)));
  for (const key of Object.keys(rpcUrls)) {
    if (!known.has(key))
      throw new Error(`rpcUrls: ${key} is not a supported chain (keys are canonical CAIP-2 ids)`);
  }
  return LIVE_CHAINS.map((definition) => {
    const caip2 = formatCaip2(definition.chainId);
    return {
      caip2,
      chainId: definition.chainId,
      name: definition.name,
      nativeCurrency: definition.nativeCurrency,
      stablecoins: toStablecoins(definition.chainId, definition.stablecoins, caip2),
      rpcUrl: rpcUrls[caip2] ?? null,
      mode: 'live',
    };
  });
}

function testChains(localChains: readonly LocalChain[]): ChainInfo[] {
  const byCaip2 = new Map<string, LocalChain>();
  for (const local of localChains) {
    const caip2 = formatCaip2(local.chainId);
    if (!LIVE_CHAINS.some((c) => formatCaip2(c.chainId) === caip2)) {
      throw new Error(`localChains: ${caip2} does not stand in for a supported chain`);
    }
    if (byCaip2.has(caip2)) throw new Error(`localChains: ${caip2} is given twice`);
    if (!/^https?:\/\//.test(local.rpcUrl))
      throw new Error(`localChains: ${caip2} rpcUrl must be an http(s) URL`);
    byCaip2.set(caip2, local);
  }
  return LIVE_CHAINS.flatMap((definition) => {
    const caip2 = formatCaip2(definition.chainId);
    const local = byCaip2.get(caip2);
    if (local === undefined) return [];
    return [
      {
        caip2,
        chainId: definition.chainId,
        name: `${definition.name} (local test chain)`,
        nativeCurrency: definition.nativeCurrency,
        stablecoins: toStablecoins(definition.chainId, local.stablecoins, caip2),
        rpcUrl: local.rpcUrl,
        mode: 'test' as const,
      },
    ];
  });
}

function toStablecoins(
  chainId: bigint,
  definitions: readonly StablecoinDefinition[],
  caip2: string,
): Stablecoin[] {
  const seen = new Set<string>();
  return definitions.map((token) => {
    if (!/^[A-Za-z0-9.]{1,16}$/.test(token.symbol))
      throw new Error(`${caip2}: bad stablecoin symbol ${JSON.stringify(token.symbol)}`);
    if (!Number.isInteger(token.decimals) || token.decimals < 0 || token.decimals > 36) {
      throw new Error(`${caip2} ${token.symbol}: decimals must be an integer in 0..36`);
    }
    const address = getAddress(token.address);
    for (const key of [token.symbol.toUpperCase(), address]) {
      if (seen.has(key)) throw new Error(`${caip2}: stablecoin ${key} is listed twice`);
      seen.add(key);
    }
    return {
      symbol: token.symbol,
      decimals: token.decimals,
      address,
      assetId: formatCaip19(chainId, address),
    };
  });
}

class StaticChainRegistry implements ChainRegistry {
  private readonly byCaip2: ReadonlyMap<string, ChainInfo>;

  constructor(
    readonly mode: ChainMode,
    private readonly chains: readonly ChainInfo[],
  ) {
    this.byCaip2 = new Map(chains.map((c) => [c.caip2, c]));
  }

  list(): readonly ChainInfo[] {
    return this.chains;
  }

  find(caip2: string): ChainInfo | undefined {
    return this.byCaip2.get(caip2);
  }

  isSupported(caip2: string): boolean {
    return this.byCaip2.has(caip2);
  }

  get(caip2: unknown, param = 'chain'): ChainInfo {
    const parsed = parseCaip2(caip2, param);
    const chain = this.byCaip2.get(parsed.caip2);
    if (chain === undefined) {
      const supported = this.chains.map((c) => c.caip2).join(', ');
      throw validationError(
        param,
        `Chain ${parsed.caip2} is not supported (supported: ${supported || 'none'})`,
        'unsupported_chain',
      );
    }
    return chain;
  }

  getAsset(assetId: unknown, param = 'asset'): ResolvedAsset {
    const parsed = parseCaip19(assetId, param);
    const chain = this.get(parsed.chain.caip2, param);
    const stablecoin = chain.stablecoins.find((s) => s.address === parsed.address);
    if (stablecoin === undefined) {
      throw validationError(
        param,
        `Asset ${parsed.caip19} is not an accepted stablecoin on ${chain.name}`,
        'unsupported_asset',
      );
    }
    return { chain, stablecoin };
  }

  findStablecoin(caip2: string, symbolOrAddress: string): Stablecoin | undefined {
    const chain = this.byCaip2.get(caip2);
    if (chain === undefined) return undefined;
    const wanted = symbolOrAddress.toLowerCase();
    return chain.stablecoins.find(
      (s) => s.address.toLowerCase() === wanted || s.symbol.toLowerCase() === wanted,
    );
  }
}
