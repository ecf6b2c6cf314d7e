import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A log as eth_getLogs answers it (hex quantities). */
export interface RpcLog {
  readonly address: string;
  readonly topics: readonly string[];
  readonly data: string;
  readonly blockNumber: number;
  readonly transactionHash: string;
  readonly logIndex: number;
}

/**
 * Test support: a JSON-RPC node over HTTP that answers eth_getLogs as Alchemy does on a real chain: a range wider than
 * `maxRange` blocks is refused with Alchemy's error (the indexer and the service lookups recognise it), whatever
 * it would have returned. It knows a head, some logs and some receipts; every getLogs range asked is kept.
 */
export class RangeLimitedRpc {
  readonly asked: { from: number; to: number }[] = [];
  private server: Server | undefined;

  constructor(
    private readonly chainId: number,
    private readonly head: number,
    private readonly maxRange: number,
    private readonly logs: readonly RpcLog[],
    private readonly receipts: ReadonlyMap<string, { blockNumber: number; logs: readonly RpcLog[] }>,
  ) {}

  async start(): Promise<string> {
    this.server = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString()));
      req.on('end', () => {
        const parsed = JSON.parse(body) as Call | Call[];
        const answer = Array.isArray(parsed) ? parsed.map((c) => this.answer(c)) : this.answer(parsed);
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify(answer));
      });
    });
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  private answer(call: Call): unknown {
    const ok = (result: unknown) => ({ jsonrpc: '2.0', id: call.id, result });
    switch (call.method) {
      case 'eth_chainId':
        return ok(hex(this.chainId));
      case 'eth_blockNumber':
        return ok(hex(this.head));
      case 'eth_getTransactionReceipt': {
        const hash = String(call.params[0]).toLowerCase();
        const r = this.receipts.get(hash);
        return ok(r ? receipt(hash, r.blockNumber, r.logs) : null);
      }
      case 'eth_getLogs': {
        const f = call.params[0] as Filter;
        const from = this.block(f.fromBlock ?? 'latest');
        const to = this.block(f.toBlock ?? 'latest');
        this.asked.push({ from, to });
        if (to - from + 1 > this.maxRange)
          return {
            jsonrpc: '2.0',
            id: call.id,
            error: {
              code: -32602,
              message: `Log response size exceeded. You can make eth_getLogs requests with up to a ${this.maxRange} block range and no limit on the response size, or you can request any block range with a cap of 10K logs in the response.`,
            },
          };
        const addresses = [f.address ?? []].flat().map((a) => a.toLowerCase());
        return ok(
          this.logs
            .filter((l) => l.blockNumber >= from && l.blockNumber <= to)
            .filter((l) => addresses.length === 0 || addresses.includes(l.address.toLowerCase()))
            .filter((l) =>
              (f.topics ?? []).every(
                (t, i) =>
                  t === null || [t].flat().some((x) => x.toLowerCase() === l.topics[i]?.toLowerCase()),
              ),
            )
            .map((l) => rpcLog(l)),
        );
      }
      default:
        return {
          jsonrpc: '2.0',
          id: call.id,
          error: { code: -32601, message: `${call.method} is not served here` },
        };
    }
  }

  private block(tag: string): number {
    return tag === 'latest' ? this.head : Number(BigInt(tag));
  }
}

interface Call {
  readonly id: number;
  readonly method: string;
  readonly params: unknown[];
}
interface Filter {
  readonly fromBlock?: string;
  readonly toBlock?: string;
  readonly address?: string | string[];
  readonly topics?: (string | string[] | null)[];
}

const hex = (n: number): string => `0x${n.toString(16)}`;
const HASH_ZERO = `0x${'0'.repeat(64)}`;

function rpcLog(l: RpcLog): Record<string, unknown> {
  return {
    address: l.address,
    topics: l.topics,
    data: l.data,
    blockNumber: hex(l.blockNumber),
    blockHash: HASH_ZERO,
    transactionHash: l.transactionHash,
    transactionIndex: '0x0',
    logIndex: hex(l.logIndex),
    removed: false,
  };
}

function receipt(hash: string, blockNumber: number, logs: readonly RpcLog[]): Record<string, unknown> {
  return {
    transactionHash: hash,
    transactionIndex: '0x0',
    blockHash: HASH_ZERO,
    blockNumber: hex(blockNumber),
    from: `0x${'1'.repeat(40)}`,
    to: `0x${'2'.repeat(40)}`,
    cumulativeGasUsed: '0x5208',
    gasUsed: '0x5208',
    effectiveGasPrice: '0x1',
    contractAddress: null,
    logs: logs.map(rpcLog),
    logsBloom: `0x${'0'.repeat(512)}`,
    status: '0x1',
    type: '0x2',
  };
}
