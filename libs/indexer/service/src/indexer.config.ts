import { chainRpcUrlsFromEnv, configChain, parseCaip2, parseChainMap } from '@stablepay/evm';
import { ConfigError, envInt, envOptional } from '@stablepay/util';
import { defaultStalledAfterMs } from './chain-follower';

/** One chain the indexer follows. */
export interface FollowedChain {
  /** Canonical CAIP-2 id, e.g. `eip155:8453`. */
  readonly caip2: string;
  readonly chainId: bigint;
  readonly rpcUrl: string;
  /** Blocks that must sit on top of a block before it is read (0: the head itself is read). */
  readonly confirmations: number;
  /** Where a follower starts the first time it runs on this chain: a block number, or the confirmed head. */
  readonly startBlock: number | 'latest';
}

export interface IndexerConfig {
  /** Empty: the indexer boots, reports ready and follows nothing (embedded mode without chains). */
  readonly chains: readonly FollowedChain[];
  /** Pause between polls once a follower has caught up with the confirmed head. */
  readonly pollMs: number;
  /** Most blocks read by one eth_getLogs range (ranges a node refuses as too large are split further). */
  readonly batchBlocks: number;
  /**
   * How far below the checkpoint block hashes are kept to find a fork point. A reorg deeper than this stops the
   * follower with an error instead of guessing; it must exceed the deepest reorg a chain may have below the
   * confirmation depth.
   */
  readonly reorgWindow: number;
  /**
   * Time without a successful poll after which /ready reports a chain's follower degraded (default: 30 s, or 3
   * polls when that is longer).
   */
  readonly stalledAfterMs?: number;
  /**
   * The followers' lease owner (INDEXER_LEASE_OWNER; default: a fresh id per follower). Only for a deployment where
   * one process at a time uses the value: a restart then re-takes its own leases at once instead of waiting for a
   * killed predecessor's to expire (see FollowerSettings.leaseOwner).
   */
  readonly leaseOwner?: string;
}

export const DEFAULT_CONFIRMATIONS = 12;

type Env = Record<string, string | undefined>;

/**
 * Reads and validates the indexer's configuration; every error names the variable.
 *
 * - `CHAIN_RPC_URLS`: `eip155:8453=http://...,eip155:137=http://...` (absent: no chain is followed).
 * - `INDEXER_CONFIRMATIONS`: `12` for every chain, or per chain with an optional default first:
 *   `12,eip155:137=64,eip155:8453=5`.
 * - `INDEXER_START_BLOCKS`: `eip155:8453=19000000,eip155:137=latest` (default `latest`: the confirmed head at the
 *   follower's first start; later starts resume from the checkpoint).
 * - `INDEXER_POLL_MS` (default 2000), `INDEXER_BATCH_BLOCKS` (default 500), `INDEXER_REORG_WINDOW` (default 256).
 * - `INDEXER_STALLED_AFTER_MS` (default max(30000, 3 polls)): no successful poll for that long degrades /ready.
 * - `INDEXER_LEASE_OWNER` (default: a fresh id per follower): a stable lease owner, only for a deployment where one
 *   process at a time uses the value; a restart after a kill -9 then follows at once instead of after the lease.
 */
export function indexerConfigFromEnv(env: Env): IndexerConfig {
  const rpcUrls = chainRpcUrlsFromEnv(env);
  const confirmations = parseConfirmations(env);
  for (const chain of confirmations.perChain.keys()) {
    if (!rpcUrls.has(chain)) {
      throw new ConfigError(
        `environment variable INDEXER_CONFIRMATIONS names ${chain}, which CHAIN_RPC_URLS does not list`,
      );
    }
  }
  const startBlocks = parseChainMap(env, 'INDEXER_START_BLOCKS', (value, chain): number | 'latest' => {
    if (value === 'latest') return 'latest';
    if (!/^[0-9]+$/.test(value) || !Number.isSafeInteger(Number(value))) {
      throw new ConfigError(
        `environment variable INDEXER_START_BLOCKS: ${chain} must be a block number or 'latest', got '${value}'`,
      );
    }
    return Number(value);
  });
  for (const chain of startBlocks.keys()) {
    if (!rpcUrls.has(chain)) {
      throw new ConfigError(
        `environment variable INDEXER_START_BLOCKS names ${chain}, which CHAIN_RPC_URLS does not list`,
      );
    }
  }
  const chains = [...rpcUrls].map(([caip2, rpcUrl]): FollowedChain => ({
    caip2,
    chainId: parseCaip2(caip2).chainId,
    rpcUrl,
    confirmations: confirmations.perChain.get(caip2) ?? confirmations.fallback,
    startBlock: startBlocks.get(caip2) ?? 'latest',
  }));
  const pollMs = envInt(env, 'INDEXER_POLL_MS', 2_000, 10, 3_600_000);
  const stalledAfterMs = envInt(
    env,
    'INDEXER_STALLED_AFTER_MS',
    defaultStalledAfterMs(pollMs),
    1,
    86_400_000,
  );
  // Every idle follower waits a whole poll between steps: a shorter threshold would call each of them stalled.
  if (stalledAfterMs <= pollMs) {
    throw new ConfigError(
      `environment variable INDEXER_STALLED_AFTER_MS (${stalledAfterMs}) must exceed INDEXER_POLL_MS (${pollMs})`,
    );
  }
  const leaseOwner = envOptional(env, 'INDEXER_LEASE_OWNER')?.trim();
  if (leaseOwner !== undefined && !/^[\x21-\x7e]{1,200}$/.test(leaseOwner)) {
    throw new ConfigError(
      'environment variable INDEXER_LEASE_OWNER must be 1 to 200 printable ASCII characters without spaces',
    );
  }
  return {
    chains,
    pollMs,
    batchBlocks: envInt(env, 'INDEXER_BATCH_BLOCKS', 500, 1, 100_000),
    reorgWindow: envInt(env, 'INDEXER_REORG_WINDOW', 256, 1, 1_000_000),
    stalledAfterMs,
    ...(leaseOwner !== undefined ? { leaseOwner } : {}),
  };
}

function parseConfirmations(env: Env): { fallback: number; perChain: Map<string, number> } {
  const name = 'INDEXER_CONFIRMATIONS';
  const raw = envOptional(env, name);
  const perChain = new Map<string, number>();
  let fallback = DEFAULT_CONFIRMATIONS;
  if (raw === undefined) return { fallback, perChain };
  const depth = (value: string, what: string): number => {
    if (!/^[0-9]+$/.test(value) || Number(value) > 100_000) {
      throw new ConfigError(
        `environment variable ${name}: ${what} must be an integer between 0 and 100000, got '${value}'`,
      );
    }
    return Number(value);
  };
  let sawDefault = false;
  for (const entry of raw
    .split(',')
    .map((e) => e.trim())
    .filter(Boolean)) {
    if (!entry.includes('=')) {
      if (sawDefault) throw new ConfigError(`environment variable ${name} gives the default depth twice`);
      sawDefault = true;
      fallback = depth(entry, 'the default depth');
      continue;
    }
    const eq = entry.indexOf('=');
    const chain = configChain(name, entry.slice(0, eq).trim());
    const value = entry.slice(eq + 1).trim();
    if (perChain.has(chain)) throw new ConfigError(`environment variable ${name} lists ${chain} twice`);
    perChain.set(chain, depth(value, chain));
  }
  return { fallback, perChain };
}
