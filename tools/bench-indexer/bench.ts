/**
 * Indexer throughput against a local anvil:
 *   node -r @swc-node/register tools/bench-indexer/bench.ts
 *
 * Mints BENCH_TRANSFERS ERC-20 transfers (default 2,000) to BENCH_ADDRESSES watched deposit addresses (default 50)
 * over BENCH_BLOCKS blocks (default 200), then measures, in this process and over the same range:
 *   1. baseline: the raw eth_getLogs fetch (same filter, same range split) without processing;
 *   2. baseline: eth_getLogs plus the block headers the follower verifies (the RPC work alone);
 *   3. the follower from an empty checkpoint to the head: logs, headers, decoding, the database transaction
 *      (observations, outbox, block hashes, checkpoint) and the event-store appends;
 *   4. the follower over BENCH_EMPTY_BLOCKS blocks (default 5,000) with watches but no matching logs.
 * The database is DATABASE_URL (a throwaway database on it) or a private PGlite.
 */
import 'reflect-metadata';
import { Wallet } from 'ethers';
import { openDataSource } from '@stablepay/database';
import { createPostgresEventStore } from '@stablepay/event-store';
import {
  ChainFollower,
  ERC20_TRANSFER_TOPIC,
  INDEXER_MIGRATIONS,
  IndexerStore,
  JsonRpcChainClient,
  addressTopic,
  startTestChain,
  type TestChain,
} from '@stablepay/indexer-service';
import { createTestDatabase } from '@stablepay/testing';

const env = (name: string, fallback: number): number => {
  const raw = process.env[name];
  const value = raw === undefined || raw === '' ? fallback : Number(raw);
  if (!Number.isSafeInteger(value) || value <= 0) throw new Error(`${name} must be a positive integer`);
  return value;
};

const TRANSFERS = env('BENCH_TRANSFERS', 2_000);
const BLOCKS = env('BENCH_BLOCKS', 200);
const ADDRESSES = env('BENCH_ADDRESSES', 50);
const BATCH_BLOCKS = env('BENCH_BATCH_BLOCKS', 100);
const EMPTY_BLOCKS = env('BENCH_EMPTY_BLOCKS', 5_000);
const REPEATS = env('BENCH_REPEATS', 5);

const silent = { log: () => undefined, warn: () => undefined, error: (m: unknown) => console.error(m) };

async function timed<T>(work: () => Promise<T>): Promise<{ ms: number; result: T }> {
  const start = process.hrtime.bigint();
  const result = await work();
  return { ms: Number(process.hrtime.bigint() - start) / 1e6, result };
}

const median = (values: readonly number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? 0;
};

function ranges(from: number, to: number, size: number): [number, number][] {
  const out: [number, number][] = [];
  for (let f = from; f <= to; f += size) out.push([f, Math.min(to, f + size - 1)]);
  return out;
}

async function main(): Promise<void> {
  const perBlock = Math.ceil(TRANSFERS / BLOCKS);
  const chain: TestChain = await startTestChain(31_337);
  const database = await createTestDatabase();
  const dataSource = await openDataSource({ url: database.url, migrations: INDEXER_MIGRATIONS, poolSize: 4 });
  const events = await createPostgresEventStore({ url: database.url, poolSize: 4 });
  try {
    const recipients = Array.from({ length: ADDRESSES }, () => Wallet.createRandom().address);
    const setup = await timed(() => chain.mintMany(recipients, BLOCKS, perBlock));
    const sent = setup.result.length;
    const head = await chain.head();
    console.log(
      `setup: ${sent} transfers to ${ADDRESSES} addresses in ${BLOCKS} blocks (head ${head}), minted in ${(setup.ms / 1000).toFixed(1)} s; ` +
        `database: ${database.kind}`,
    );

    const rpc = new JsonRpcChainClient(chain.rpcUrl, BigInt(chain.chainId));
    const topics = [ERC20_TRANSFER_TOPIC, null, recipients.map(addressTopic)];
    const split = ranges(0, head, BATCH_BLOCKS);

    // 1. Raw eth_getLogs over the same range split, results discarded.
    const rawRuns: number[] = [];
    for (let i = 0; i < REPEATS; i++) {
      const run = await timed(async () => {
        let n = 0;
        for (const [fromBlock, toBlock] of split)
          n += (await rpc.getLogs({ fromBlock, toBlock, topics })).length;
        return n;
      });
      if (run.result !== sent) throw new Error(`raw fetch saw ${run.result} logs, expected ${sent}`);
      rawRuns.push(run.ms);
    }

    // 2. eth_getLogs plus the headers the follower fetches (range ends and every block with a log).
    const rpcRuns: number[] = [];
    for (let i = 0; i < REPEATS; i++) {
      const run = await timed(async () => {
        for (const [fromBlock, toBlock] of split) {
          const logs = await rpc.getLogs({ fromBlock, toBlock, topics });
          await rpc.headers([fromBlock, toBlock, ...logs.map((l) => l.blockNumber)]);
        }
      });
      rpcRuns.push(run.ms);
    }

    // 3. The follower, from an empty checkpoint to the head.
    const store = new IndexerStore(dataSource);
    for (const address of recipients) await store.addWatch(chain.caip2, address, { table: 'address' });
    const follower = new ChainFollower(
      {
        chain: {
          caip2: chain.caip2,
          chainId: BigInt(chain.chainId),
          rpcUrl: chain.rpcUrl,
          confirmations: 0,
          startBlock: 0,
        },
        pollMs: 1_000,
        batchBlocks: BATCH_BLOCKS,
        reorgWindow: 256,
      },
      rpc,
      store,
      events,
      silent,
    );
    const indexed = await timed(() => follower.catchUp());
    const published = (await events.readStream(`chain-${chain.caip2}`)).length;
    if (published !== sent)
      throw new Error(`the follower published ${published} observations, expected ${sent}`);

    // 4. Following blocks with watches but no matching logs (the steady state of a quiet chain).
    await chain.mine(EMPTY_BLOCKS);
    const quiet = await timed(() => follower.catchUp());
    await follower.stop();

    const blocks = head + 1;
    const row = (name: string, ms: number, nBlocks: number, nLogs: number): string =>
      `| ${name.padEnd(52)} | ${(ms / 1000).toFixed(3).padStart(8)} | ${Math.round((nBlocks * 1000) / ms)
        .toString()
        .padStart(9)} | ${(nLogs === 0 ? '-' : Math.round((nLogs * 1000) / ms).toString()).padStart(8)} |`;
    console.log('');
    console.log(
      `| ${'measurement'.padEnd(52)} | ${'time s'.padStart(8)} | ${'blocks/s'.padStart(9)} | ${'logs/s'.padStart(8)} |`,
    );
    console.log(`|${'-'.repeat(54)}|${'-'.repeat(10)}|${'-'.repeat(11)}|${'-'.repeat(10)}|`);
    console.log(row(`baseline: raw eth_getLogs (median of ${REPEATS})`, median(rawRuns), blocks, sent));
    console.log(row(`baseline: eth_getLogs + headers (median of ${REPEATS})`, median(rpcRuns), blocks, sent));
    console.log(row('indexer: follower, empty checkpoint to head', indexed.ms, blocks, sent));
    console.log(row(`indexer: ${EMPTY_BLOCKS} blocks, no matching logs`, quiet.ms, EMPTY_BLOCKS, 0));
    console.log('');
    console.log(
      `${sent} transfers, ${blocks} blocks, ${ADDRESSES} watched addresses, batch ${BATCH_BLOCKS} blocks, ` +
        `database ${database.kind}, node ${process.version}`,
    );
  } finally {
    await events.close();
    await dataSource.destroy();
    await database.drop();
    await chain.stop();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
