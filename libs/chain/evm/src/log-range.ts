import { ConfigError, envOptional } from '@stablepay/util';
import { parseChainMap } from './chain-env';

type Env = Record<string, string | undefined>;

/** Blocks per eth_getLogs window when `CHAIN_LOG_RANGE` names no other for a chain (what most providers accept). */
export const DEFAULT_CHAIN_LOG_RANGE = 2_000;

/**
 * How far back a log lookup reads when the block it could start from is unknown (a record older than the fact that
 * gives it): windows of the chain's range up to this many blocks below the head, never the chain from block 0.
 */
export const UNKNOWN_START_LOOKBACK_BLOCKS = 200_000;

// The wording providers use when a log query is too big (geth: "query returned more than 10000 results";
// Alchemy, Infura, QuickNode and others: "block range", "limit exceeded", "response size exceeded").
const RANGE_LIMIT =
  /more than \d+ results|too many|limit|exceed|block range|range is too|response size|timeout/i;

/** True when a node's error says the log query covered too many blocks or results (retry it in halves). */
export function looksLikeRangeLimit(error: unknown): boolean {
  const parts: string[] = [];
  if (error instanceof Error) parts.push(error.message);
  if (typeof error === 'object' && error !== null) {
    try {
      parts.push(JSON.stringify(error, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)));
    } catch {
      // a cyclic error object: the message alone decides
    }
  }
  return RANGE_LIMIT.test(parts.join(' '));
}

/**
 * The logs of `from..to` read by `read`; a range the node refuses as too large is read as its two halves instead,
 * recursively, down to single blocks. Any other error is thrown.
 */
export async function readLogsSplitting<T>(
  read: (from: number, to: number) => Promise<readonly T[]>,
  from: number,
  to: number,
): Promise<T[]> {
  try {
    return [...(await read(from, to))];
  } catch (error) {
    if (to <= from || !looksLikeRangeLimit(error)) throw error;
    const mid = Math.floor((from + to) / 2);
    const low = await readLogsSplitting(read, from, mid);
    const high = await readLogsSplitting(read, mid + 1, to);
    return [...low, ...high];
  }
}

/** What a bounded log lookup needs of a provider (ethers' Provider has both). */
export interface LogLookupProvider<T> {
  getBlockNumber(): Promise<number>;
  getLogs(filter: {
    address: string;
    topics: (string | null)[];
    fromBlock: number;
    toBlock: number;
  }): Promise<readonly T[]>;
}

/**
 * eth_getLogs of one contract and topics from a known block to the head, in windows of at most `maxRange` blocks
 * (each halved again while the node refuses it as too large): public and commercial RPC providers refuse or time
 * out on a query from block 0. `fromBlock` null: the start is unknown, and the lookup reads the last
 * `UNKNOWN_START_LOOKBACK_BLOCKS` (or `lookback`) blocks.
 */
export async function findLogsSince<T>(
  provider: LogLookupProvider<T>,
  query: { address: string; topics: (string | null)[]; fromBlock: number | null },
  options: { maxRange: number; lookback?: number },
): Promise<T[]> {
  const head = await provider.getBlockNumber();
  const lookback = options.lookback ?? UNKNOWN_START_LOOKBACK_BLOCKS;
  const start = Math.max(0, query.fromBlock ?? head - lookback);
  const window = Math.max(1, options.maxRange);
  const found: T[] = [];
  for (let from = start; from <= head; from += window) {
    const to = Math.min(head, from + window - 1);
    found.push(
      ...(await readLogsSplitting(
        (f, t) =>
          provider.getLogs({ address: query.address, topics: query.topics, fromBlock: f, toBlock: t }),
        from,
        to,
      )),
    );
  }
  return found;
}

/** What finding a block by its time needs of a provider (ethers' Provider has both). */
export interface BlockTimeProvider {
  getBlockNumber(): Promise<number>;
  getBlock(block: number): Promise<{ readonly timestamp: number } | null>;
}

/**
 * The newest block mined at or before `unixSeconds` (0 when none is): a log lookup's start for a record that is
 * known to come after a time (what it names did not exist before), however long ago, where a fixed lookback below
 * the head would miss it. A binary search over the chain's non-decreasing block timestamps: about log2(head) reads.
 */
export async function blockAtOrBefore(provider: BlockTimeProvider, unixSeconds: number): Promise<number> {
  let low = 0;
  let high = await provider.getBlockNumber();
  const time = async (block: number): Promise<number> => {
    const found = await provider.getBlock(block);
    if (!found) throw new Error(`block ${block} not found while looking for the block at ${unixSeconds}`);
    return found.timestamp;
  };
  if ((await time(high)) <= unixSeconds) return high;
  while (low < high) {
    const mid = Math.ceil((low + high) / 2);
    if ((await time(mid)) <= unixSeconds) low = mid;
    else high = mid - 1;
  }
  return low;
}

/**
 * `CHAIN_LOG_RANGE`: the most blocks one eth_getLogs window of a service's log lookup covers, for every chain
 * (`10000`) or per chain with an optional default first (`10000,eip155:137=2000`; default
 * `DEFAULT_CHAIN_LOG_RANGE`). Set it to what the chain's RPC provider accepts; a refused window is halved anyway.
 */
export function chainLogRangeFromEnv(env: Env): (chain: string) => number {
  const name = 'CHAIN_LOG_RANGE';
  const blocks = (value: string, what: string): number => {
    if (!/^[0-9]+$/.test(value) || Number(value) < 1 || Number(value) > 1_000_000)
      throw new ConfigError(
        `environment variable ${name}: ${what} must be a block count between 1 and 1000000, got '${value}'`,
      );
    return Number(value);
  };
  const entries = (envOptional(env, name) ?? '')
    .split(',')
    .map((e) => e.trim())
    .filter(Boolean);
  const defaults = entries.filter((e) => !e.includes('='));
  if (defaults.length > 1)
    throw new ConfigError(`environment variable ${name} gives the default range twice`);
  const fallback = defaults[0] === undefined ? DEFAULT_CHAIN_LOG_RANGE : blocks(defaults[0], 'the default');
  const perChain = parseChainMap({ [name]: entries.filter((e) => e.includes('=')).join(',') }, name, blocks);
  return (chain) => perChain.get(chain) ?? fallback;
}
