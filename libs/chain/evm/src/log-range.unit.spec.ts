import { ConfigError } from '@stablepay/util';
import {
  blockAtOrBefore,
  chainLogRangeFromEnv,
  DEFAULT_CHAIN_LOG_RANGE,
  findLogsSince,
  readLogsSplitting,
} from './log-range';

/** A node holding one log per listed block that refuses (as providers word it) ranges wider than `limit`. */
function node(blocks: readonly number[], head: number, limit: number, refusal: string) {
  const asked: [number, number][] = [];
  return {
    asked,
    getBlockNumber: () => Promise.resolve(head),
    getLogs: (f: { fromBlock: number; toBlock: number }) => {
      asked.push([f.fromBlock, f.toBlock]);
      if (f.toBlock - f.fromBlock + 1 > limit) return Promise.reject(new Error(refusal));
      return Promise.resolve(blocks.filter((b) => b >= f.fromBlock && b <= f.toBlock));
    },
  };
}
const query = (fromBlock: number | null) => ({ address: '0xabc', topics: ['0x01'], fromBlock });

describe('findLogsSince', () => {
  it('reads from the known block to the head in windows of the configured range, finding every log', async () => {
    const rpc = node([19_000_100, 19_004_999, 19_010_000], 19_010_000, 2_000, 'block range too large');
    expect(await findLogsSince(rpc, query(19_000_000), { maxRange: 2_000 })).toEqual([
      19_000_100, 19_004_999, 19_010_000,
    ]);
    expect(rpc.asked[0]).toEqual([19_000_000, 19_001_999]);
    expect(rpc.asked.every(([from, to]) => to - from + 1 <= 2_000 && from >= 19_000_000)).toBe(true);
  });

  it('halves a window the node refuses as too many results, and still finds every log', async () => {
    const rpc = node([500, 1_700, 2_600], 3_000, 700, 'query returned more than 10000 results');
    expect(await findLogsSince(rpc, query(0), { maxRange: 2_000 })).toEqual([500, 1_700, 2_600]);
    expect(rpc.asked.some(([from, to]) => to - from + 1 === 2_000)).toBe(true);
  });

  it('reads only a bounded lookback below the head when the start block is unknown', async () => {
    const rpc = node([10, 9_000_000], 9_000_000, 10_000, 'block range too large');
    expect(await findLogsSince(rpc, query(null), { maxRange: 10_000, lookback: 50_000 })).toEqual([
      9_000_000,
    ]);
    expect(Math.min(...rpc.asked.map(([from]) => from))).toBe(8_950_000);
  });

  it('throws what is not a range refusal (an unreachable node is not split into a million calls)', async () => {
    let calls = 0;
    const read = () => {
      calls += 1;
      return Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:8545'));
    };
    await expect(readLogsSplitting(read, 0, 100_000)).rejects.toThrow('ECONNREFUSED');
    expect(calls).toBe(1);
  });
});

describe('blockAtOrBefore', () => {
  /** Blocks 0..head, block n mined at 1000 + 2n (two blocks in a row share a second from 50 on). */
  const chain = (head: number) => ({
    getBlockNumber: () => Promise.resolve(head),
    getBlock: (n: number) =>
      Promise.resolve(
        n > head
          ? null
          : { timestamp: 1_000 + 2 * Math.min(n, 50) + Math.max(0, Math.floor((n - 50) / 2)) * 2 },
      ),
  });

  it('answers the newest block mined at or before the time, however far below the head', async () => {
    expect(await blockAtOrBefore(chain(3_000_000), 1_000 + 2 * 40 + 1)).toBe(40);
    expect(await blockAtOrBefore(chain(3_000_000), 1_000 + 2 * 40)).toBe(40);
    // Two blocks of one second: the newer one.
    expect(await blockAtOrBefore(chain(3_000_000), 1_100 + 2 * 10)).toBe(71);
  });

  it('answers 0 for a time before the chain, the head for a time after it', async () => {
    expect(await blockAtOrBefore(chain(500), 10)).toBe(0);
    expect(await blockAtOrBefore(chain(500), 9_999_999)).toBe(500);
  });
});

describe('chainLogRangeFromEnv (CHAIN_LOG_RANGE)', () => {
  it('reads a default and per-chain ranges, 2000 when unset', () => {
    expect(chainLogRangeFromEnv({})('eip155:8453')).toBe(DEFAULT_CHAIN_LOG_RANGE);
    const range = chainLogRangeFromEnv({ CHAIN_LOG_RANGE: '10000, eip155:137=500' });
    expect([range('eip155:8453'), range('eip155:137')]).toEqual([10_000, 500]);
  });

  it.each([
    ['0', /the default must be a block count/],
    ['eip155:137=lots', /eip155:137 must be a block count/],
    ['100,200', /default range twice/],
    ['eip155:137=5,eip155:137=6', /lists eip155:137 twice/],
  ])('refuses %p with a ConfigError naming the variable', (value, message) => {
    expect(() => chainLogRangeFromEnv({ CHAIN_LOG_RANGE: value })).toThrow(ConfigError);
    expect(() => chainLogRangeFromEnv({ CHAIN_LOG_RANGE: value })).toThrow(message);
  });
});
