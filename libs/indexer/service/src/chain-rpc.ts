import { FetchRequest, JsonRpcProvider, Network } from 'ethers';
import { readLogsSplitting } from '@stablepay/evm';

/** A block header as the follower needs it. */
export interface BlockHeader {
  readonly number: number;
  readonly hash: string;
  readonly parentHash: string;
  /** Unix seconds. */
  readonly timestamp: number;
}

/** A log as eth_getLogs returns it, numbers decoded. */
export interface ChainLog {
  readonly address: string;
  readonly topics: readonly string[];
  readonly data: string;
  readonly blockNumber: number;
  readonly blockHash: string;
  readonly txHash: string;
  readonly logIndex: number;
}

export interface LogFilter {
  readonly fromBlock: number;
  readonly toBlock: number;
  readonly address?: readonly string[];
  readonly topics?: readonly (string | readonly string[] | null)[];
}

/** The JSON-RPC calls a follower makes. */
export interface ChainRpc {
  chainId(): Promise<bigint>;
  blockNumber(): Promise<number>;
  /** Null when the node has no block at that height (yet, or any more after a reorg to a shorter chain). */
  header(blockNumber: number): Promise<BlockHeader | null>;
  /** Several headers in one round trip (a JSON-RPC batch). */
  headers(blockNumbers: readonly number[]): Promise<Map<number, BlockHeader | null>>;
  getLogs(filter: LogFilter): Promise<ChainLog[]>;
  close(): void;
}

interface RawHeader {
  readonly number: string;
  readonly hash: string;
  readonly parentHash: string;
  readonly timestamp: string;
}

interface RawLog {
  readonly address: string;
  readonly topics: string[];
  readonly data: string;
  readonly blockNumber: string;
  readonly blockHash: string;
  readonly transactionHash: string;
  readonly logIndex: string;
  readonly removed?: boolean;
}

const hex = (n: number): string => `0x${n.toString(16)}`;

/**
 * ChainRpc over ethers' JsonRpcProvider, raw `send` only (no result formatting): requests issued together go out
 * as one JSON-RPC batch, which is what makes fetching the headers of many blocks cheap. The network is static
 * (no eth_chainId probing, no built-in network plugins such as Polygon's gas station) and nothing is cached:
 * a follower must see the node's answer of the moment.
 */
export class JsonRpcChainClient implements ChainRpc {
  private readonly provider: JsonRpcProvider;

  constructor(rpcUrl: string, chainId: bigint, options: { readonly timeoutMs?: number } = {}) {
    const network = new Network(`chain-${chainId}`, chainId);
    const request = new FetchRequest(rpcUrl);
    request.timeout = options.timeoutMs ?? 30_000;
    this.provider = new JsonRpcProvider(request, network, {
      staticNetwork: network,
      cacheTimeout: -1,
      batchStallTime: 0,
      batchMaxCount: 100,
    });
  }

  async chainId(): Promise<bigint> {
    return BigInt(await this.send<string>('eth_chainId', []));
  }

  async blockNumber(): Promise<number> {
    return Number(BigInt(await this.send<string>('eth_blockNumber', [])));
  }

  async header(blockNumber: number): Promise<BlockHeader | null> {
    const raw = await this.send<RawHeader | null>('eth_getBlockByNumber', [hex(blockNumber), false]);
    return raw === null ? null : toHeader(raw);
  }

  async headers(blockNumbers: readonly number[]): Promise<Map<number, BlockHeader | null>> {
    const unique = [...new Set(blockNumbers)];
    const all = await Promise.all(unique.map((n) => this.header(n)));
    return new Map(unique.map((n, i) => [n, all[i] ?? null]));
  }

  /**
   * eth_getLogs over a range. A node that refuses a range as too large (result or range limits differ per
   * provider) gets the two halves instead, recursively, down to single blocks (the service lookups share this).
   */
  async getLogs(filter: LogFilter): Promise<ChainLog[]> {
    return readLogsSplitting(
      async (from, to) => {
        const params: Record<string, unknown> = { fromBlock: hex(from), toBlock: hex(to) };
        if (filter.address) params['address'] = [...filter.address];
        if (filter.topics)
          params['topics'] = filter.topics.map((t) => (t === null || typeof t === 'string' ? t : [...t]));
        const raw = await this.send<RawLog[]>('eth_getLogs', [params]);
        return raw.filter((l) => l.removed !== true).map(toLog);
      },
      filter.fromBlock,
      filter.toBlock,
    );
  }

  close(): void {
    this.provider.destroy();
  }

  private async send<T>(method: string, params: unknown[]): Promise<T> {
    return (await this.provider.send(method, params)) as T;
  }
}

function toHeader(raw: RawHeader): BlockHeader {
  return {
    number: Number(BigInt(raw.number)),
    hash: raw.hash.toLowerCase(),
    parentHash: raw.parentHash.toLowerCase(),
    timestamp: Number(BigInt(raw.timestamp)),
  };
}

function toLog(raw: RawLog): ChainLog {
  return {
    address: raw.address,
    topics: raw.topics.map((t) => t.toLowerCase()),
    data: raw.data,
    blockNumber: Number(BigInt(raw.blockNumber)),
    blockHash: raw.blockHash.toLowerCase(),
    txHash: raw.transactionHash.toLowerCase(),
    logIndex: Number(BigInt(raw.logIndex)),
  };
}
