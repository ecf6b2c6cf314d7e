import { getAddress, Wallet } from 'ethers';
import type { DataSource } from 'typeorm';
import { openDataSource } from '@stablepay/database';
import {
  createPostgresEventStore,
  type EventStore,
  type PostgresEventStore,
  type RecordedEvent,
} from '@stablepay/event-store';
import {
  ERC20_TRANSFER_OBSERVED,
  OBSERVATION_RETRACTED,
  chainStreamId,
  type Erc20TransferObservedData,
  type ObservationRetractedData,
} from '@stablepay/indexer-domain';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { ChainFollower, type FollowerSettings } from './chain-follower';
import { type ChainRpc, JsonRpcChainClient } from './chain-rpc';
import { IndexerStore, rescanWatchedAddress } from './indexer-store';
import { INDEXER_MIGRATIONS } from './migrations';
import { startTestChain, type TestChain } from './testing/test-chain';

/**
 * The follower against real nodes: a private anvil per test (its own chain id, hence its own checkpoint row and
 * observation stream) and one PostgreSQL event store for the file (DATABASE_URL, else PGlite).
 */
let database: TestDatabase;
let dataSource: DataSource;
let events: PostgresEventStore;
let store: IndexerStore;
const chains: TestChain[] = [];
const followers: ChainFollower[] = [];
const logs: Record<string, unknown>[] = [];
const logger = {
  log: (m: unknown) => void logs.push({ level: 'log', ...(m as object) }),
  warn: (m: unknown) => void logs.push({ level: 'warn', ...(m as object) }),
  error: (m: unknown) => void logs.push({ level: 'error', ...(m as object) }),
};

beforeAll(async () => {
  database = await createTestDatabase();
  dataSource = await openDataSource({ url: database.url, migrations: INDEXER_MIGRATIONS, poolSize: 4 });
  events = await createPostgresEventStore({ url: database.url, poolSize: 4 });
  store = new IndexerStore(dataSource);
});

afterEach(async () => {
  await Promise.all(followers.splice(0).map((f) => f.stop()));
  await Promise.all(chains.splice(0).map((c) => c.stop()));
});

afterAll(async () => {
  await events?.close();
  await dataSource?.destroy();
  await database?.drop();
});

let nextChainId = 900_001;
async function chain(): Promise<TestChain> {
  const c = await startTestChain(nextChainId++);
  chains.push(c);
  return c;
}

function follower(
  c: TestChain,
  overrides: Partial<Omit<FollowerSettings, 'chain'>> & {
    confirmations?: number;
    startBlock?: number | 'latest';
  } = {},
  eventStore: EventStore = events,
  rpc: (client: ChainRpc) => ChainRpc = (client) => client,
): ChainFollower {
  const { confirmations = 0, startBlock = 0, ...settings } = overrides;
  const f = new ChainFollower(
    {
      chain: { caip2: c.caip2, chainId: BigInt(c.chainId), rpcUrl: c.rpcUrl, confirmations, startBlock },
      pollMs: 20,
      batchBlocks: 50,
      reorgWindow: 64,
      ...settings,
    },
    rpc(new JsonRpcChainClient(c.rpcUrl, BigInt(c.chainId))),
    store,
    eventStore,
    logger,
  );
  followers.push(f);
  return f;
}

const stream = (c: TestChain): Promise<RecordedEvent[]> => events.readStream(chainStreamId(c.caip2));
const transfers = (recorded: readonly RecordedEvent[]) =>
  recorded.filter((e) => e.type === ERC20_TRANSFER_OBSERVED).map((e) => e.data as Erc20TransferObservedData);
const retractions = (recorded: readonly RecordedEvent[]) =>
  recorded.filter((e) => e.type === OBSERVATION_RETRACTED).map((e) => e.data as ObservationRetractedData);
const watched = (): string => Wallet.createRandom().address;

async function watch(c: TestChain, address: string, fromBlock?: number): Promise<void> {
  await store.addWatch(c.caip2, address, { table: 'address' }, fromBlock);
}

async function until(condition: () => Promise<boolean>, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('ChainFollower on anvil', () => {
  it('publishes a transfer to a watched address once, and only after `confirmations` blocks', async () => {
    const c = await chain();
    const deposit = watched();
    const other = watched();
    await watch(c, deposit);
    const f = follower(c, { confirmations: 2 });

    const paid = await c.mint(deposit, 1_500_000n);
    await c.mint(other, 7n); // not watched
    await f.catchUp();
    expect(await stream(c)).toEqual([]); // the payment has 1 block on top of it

    await c.mine(1);
    await f.catchUp();
    const recorded = await stream(c);
    expect(recorded).toHaveLength(1);
    const block = await c.provider.getBlock(paid.blockNumber);
    expect(recorded[0]).toMatchObject({
      type: ERC20_TRANSFER_OBSERVED,
      revision: 0,
      streamId: `chain-${c.caip2}`,
    });
    expect(transfers(recorded)[0]).toEqual({
      chain: c.caip2,
      blockNumber: String(paid.blockNumber),
      blockHash: paid.blockHash,
      blockTime: new Date(Number(block?.timestamp) * 1000).toISOString(),
      txHash: paid.txHash,
      logIndex: 0,
      contract: c.tokenAddress,
      asset: `${c.caip2}/erc20:${c.tokenAddress}`,
      from: '0x0000000000000000000000000000000000000000',
      to: deposit,
      amount: '1500000',
    });

    await c.mine(5);
    await f.catchUp();
    await f.catchUp();
    expect(await stream(c)).toHaveLength(1);
  });

  it('retracts what an orphaned block published and ingests the new canonical logs (evm_snapshot/evm_revert)', async () => {
    const c = await chain();
    const deposit = watched();
    await watch(c, deposit);
    const f = follower(c, { confirmations: 0 });
    const snapshot = await c.snapshot();
    const first = await c.mint(deposit, 100n);
    const orphanOnly = await c.mint(deposit, 200n);
    await c.mine(2);
    await f.catchUp();
    expect(transfers(await stream(c)).map((t) => t.txHash)).toEqual([first.txHash, orphanOnly.txHash]);

    // The other fork: an empty block, then the first payment again (now one block later), then another payment.
    await c.revert(snapshot);
    await c.mine(1);
    const replayed = await c.resend(first.raw);
    const second = await c.mint(deposit, 300n);
    await c.mine(3); // longer than the orphaned fork
    expect(replayed.txHash).toBe(first.txHash);
    expect(replayed.blockHash).not.toBe(first.blockHash);

    await f.catchUp();
    const recorded = await stream(c);
    expect(recorded.map((e) => e.type)).toEqual([
      ERC20_TRANSFER_OBSERVED,
      ERC20_TRANSFER_OBSERVED,
      OBSERVATION_RETRACTED,
      OBSERVATION_RETRACTED,
      ERC20_TRANSFER_OBSERVED,
      ERC20_TRANSFER_OBSERVED,
    ]);
    const [observedFirst, observedOrphan] = recorded;
    expect(retractions(recorded)).toEqual([
      expect.objectContaining({
        observationId: observedFirst?.id,
        txHash: first.txHash,
        blockHash: first.blockHash,
        reason: 'reorg',
      }),
      expect.objectContaining({
        observationId: observedOrphan?.id,
        txHash: orphanOnly.txHash,
        blockHash: orphanOnly.blockHash,
      }),
    ]);
    expect(Number(retractions(recorded)[0]?.forkBlockNumber)).toBeLessThan(first.blockNumber);
    // Each retraction names its observation's watched address: consumers keep it behind that address's messages.
    expect(retractions(recorded).map((r) => r.address)).toEqual(
      transfers(recorded.slice(0, 2)).map((t) => t.to),
    );
    expect(retractions(recorded)[0]?.address).toMatch(/^0x[0-9a-fA-F]{40}$/);
    // The same transaction in its new block is a new observation with its own id.
    const reObserved = transfers(recorded.slice(4));
    expect(reObserved.map((t) => [t.txHash, t.blockHash, t.amount])).toEqual([
      [first.txHash, replayed.blockHash, '100'],
      [second.txHash, second.blockHash, '300'],
    ]);
    expect(new Set(recorded.map((e) => e.id)).size).toBe(recorded.length);
    expect(logs).toContainEqual(expect.objectContaining({ level: 'warn', chain: c.caip2, retracted: 2 }));

    await c.mine(2);
    await f.catchUp();
    expect(await stream(c)).toHaveLength(recorded.length);
  });

  it('detects a reorg that happened while it was stopped, when it starts again', async () => {
    const c = await chain();
    const deposit = watched();
    await watch(c, deposit);
    const before = follower(c);
    const snapshot = await c.snapshot();
    const orphaned = await c.mint(deposit, 1n);
    await c.mine(1);
    await before.catchUp();
    await before.stop();

    await c.revert(snapshot);
    const canonical = await c.mint(deposit, 2n);
    await c.mine(3);

    const after = follower(c);
    await after.catchUp();
    const recorded = await stream(c);
    expect(recorded.map((e) => e.type)).toEqual([
      ERC20_TRANSFER_OBSERVED,
      OBSERVATION_RETRACTED,
      ERC20_TRANSFER_OBSERVED,
    ]);
    expect(retractions(recorded)[0]?.txHash).toBe(orphaned.txHash);
    expect(transfers(recorded)[1]).toMatchObject({
      txHash: canonical.txHash,
      blockHash: canonical.blockHash,
      amount: '2',
    });
  });

  it('survives a restart mid-stream with nothing skipped or doubled (polling loop)', async () => {
    const c = await chain();
    const deposits = [watched(), watched(), watched()];
    for (const d of deposits) await watch(c, d);
    const running = follower(c, { confirmations: 1, batchBlocks: 7 });
    running.start();
    const sent = await c.mintMany(deposits, 20, 3);
    await until(async () => transfers(await stream(c)).length >= 10, 'the first observations');
    await running.stop();

    sent.push(...(await c.mintMany(deposits, 20, 3)));
    await c.mine(1); // the last payments' confirmation
    const restarted = follower(c, { confirmations: 1, batchBlocks: 7 });
    restarted.start();
    await until(async () => transfers(await stream(c)).length >= sent.length, 'every observation');
    await c.mine(3);
    await new Promise((r) => setTimeout(r, 200));
    await restarted.stop();

    const recorded = await stream(c);
    expect(retractions(recorded)).toEqual([]);
    // Exactly the payments sent, each once, in chain order.
    const expected = [...sent]
      .sort((a, b) => a.blockNumber - b.blockNumber)
      .map((s) => `${s.txHash}:${getAddress(s.to)}:${s.amount}`);
    expect(transfers(recorded).map((t) => `${t.txHash}:${t.to}:${t.amount}`)).toEqual(expected);
    expect(recorded.map((e) => e.revision)).toEqual(recorded.map((_, i) => i));
  });

  it('recognises an append that landed before a crash, even when its successor batches differently', async () => {
    const c = await chain();
    const deposit = watched();
    await watch(c, deposit);
    await c.mintMany([deposit], 2, 3);
    // The first follower's append lands, then its process "dies" before the acknowledgement reaches the database.
    let dead = false;
    const crashing: EventStore = {
      appendToStream: async (streamId, toAppend, options) => {
        if (dead) throw new Error('process died');
        await events.appendToStream(streamId, toAppend, options);
        dead = true;
        throw new Error('process died after the append');
      },
      readStream: async (...a) => {
        if (dead) throw new Error('process died');
        return events.readStream(...a);
      },
      readAll: (...a) => events.readAll(...a),
      headPosition: () => events.headPosition(),
      subscribeToAll: (o) => events.subscribeToAll(o),
      close: async () => undefined,
    };
    // A lease far longer than the test: it expires only when the test says so below, not when a loaded machine
    // happens to be slow between two steps.
    const crashed = follower(c, { leaseMs: 600_000, appendBatch: 2 }, crashing);
    await expect(crashed.catchUp()).rejects.toThrow('process died');
    expect(await stream(c)).toHaveLength(2);

    // Its successor waits for the lease to expire, then drains the whole outbox in one append: the store refuses
    // it (two of its events are there already), the follower reads the tail, acknowledges those two, goes on.
    const successor = follower(c);
    expect(await successor.step()).toBe('not-leader');
    // The crashed process never renews: its lease runs out.
    await dataSource.query(
      "UPDATE indexer_checkpoints SET lease_expires_at = now() - interval '1 second' WHERE chain = $1",
      [c.caip2],
    );
    await successor.catchUp();
    const recorded = await stream(c);
    expect(recorded).toHaveLength(6);
    expect(new Set(recorded.map((e) => e.id)).size).toBe(6);
    expect(await store.pendingOutbox(c.caip2, 10)).toEqual([]);
    expect((await store.checkpoint(c.caip2))?.streamRevision).toBe(5);
    expect(logs).toContainEqual(
      expect.objectContaining({ msg: 'acknowledged events appended before a restart', events: 2 }),
    );
    // The deposed follower can no longer write.
    expect(await crashed.step()).toBe('not-leader');
  });

  it('a restart under the same configured lease owner follows at once; a follower under another owner still waits', async () => {
    const c = await chain();
    const deposit = watched();
    await watch(c, deposit);
    await c.mint(deposit, 5n);
    // A run that took the lease, then was killed: it never renews nor releases it (a lease far longer than the test).
    const killed = follower(c, { leaseOwner: 'run-of-data-dir-a', leaseMs: 600_000 });
    followers.splice(followers.indexOf(killed), 1);
    expect(await killed.step()).not.toBe('not-leader');

    // Another process, with its own owner (configured or not), must wait: one follower per chain.
    expect(await follower(c, { leaseOwner: 'run-of-data-dir-b' }).step()).toBe('not-leader');
    expect(await follower(c).step()).toBe('not-leader');

    // Its restart, under the same owner, re-takes the lease without waiting for it to expire.
    const restarted = follower(c, { leaseOwner: 'run-of-data-dir-a', leaseMs: 600_000 });
    await restarted.catchUp();
    expect(transfers(await stream(c))).toEqual([expect.objectContaining({ amount: '5' })]);
    expect(await follower(c, { leaseOwner: 'run-of-data-dir-b' }).step()).toBe('not-leader');
  });

  it('treats a redelivered observation append and a re-scan of ingested blocks as no-ops', async () => {
    const c = await chain();
    const deposit = watched();
    await watch(c, deposit);
    const f = follower(c);
    await c.mint(deposit, 5n);
    await c.mint(deposit, 6n);
    await f.catchUp();
    const recorded = await stream(c);
    expect(recorded).toHaveLength(2);

    // The same append again (a redelivery): same ids at the same place, nothing written.
    const [one, two] = recorded;
    if (!one || !two) throw new Error('missing events');
    const again = await events.appendToStream(
      chainStreamId(c.caip2),
      [one, two].map((e) => ({ id: e.id, type: e.type, data: e.data, metadata: e.metadata })),
      { expectedRevision: 'no_stream' },
    );
    expect(again.nextExpectedRevision).toBe(1);

    // The checkpoint rewound (an operator replay): the blocks are read again, nothing is published twice.
    await dataSource.query(
      'UPDATE indexer_checkpoints SET block_number = 0, block_hash = NULL WHERE chain = $1',
      [c.caip2],
    );
    await f.catchUp();
    expect(await stream(c)).toHaveLength(2);
  });

  it('lets a watch added late catch up from its start block, then follow the head', async () => {
    const c = await chain();
    const early = watched();
    const late = watched();
    await watch(c, early);
    const f = follower(c, { batchBlocks: 3 });
    const missed = await c.mint(late, 11n);
    await c.mint(early, 12n);
    await c.mine(8);
    await f.catchUp();
    expect(transfers(await stream(c)).map((t) => t.to)).toEqual([early]);

    await watch(c, late, missed.blockNumber - 1);
    const next = await c.mint(late, 13n);
    await f.catchUp();
    const seen = transfers(await stream(c)).filter((t) => t.to === late);
    expect(seen.map((t) => [t.txHash, t.amount])).toEqual([
      [missed.txHash, '11'],
      [next.txHash, '13'],
    ]);
    expect(await store.laggingWatches(c.caip2, await c.head())).toEqual([]);
  });

  it("an operator's re-scan landing while a catch-up chunk is in flight is not overwritten by it", async () => {
    const c = await chain();
    const deposit = watched();
    const paid = await c.mint(deposit, 17n);
    await c.mine(3);
    let rescanOnNextLogs = false;
    const f = follower(c, {}, events, (client) => ({
      ...client,
      chainId: () => client.chainId(),
      blockNumber: () => client.blockNumber(),
      header: (n) => client.header(n),
      headers: (ns) => client.headers(ns),
      close: () => client.close(),
      // Between the chunk's read of the watch and its write: the re-scan moves the watch back to the payment.
      getLogs: async (filter) => {
        if (rescanOnNextLogs) {
          rescanOnNextLogs = false;
          await rescanWatchedAddress(dataSource, c.caip2, deposit, paid.blockNumber);
        }
        return client.getLogs(filter);
      },
    }));
    await f.catchUp();
    // A watch from the last block only (the shape of one registered at the checkpoint, after the payment).
    const head = await c.head();
    await watch(c, deposit, head);
    rescanOnNextLogs = true;
    await f.catchUp();
    expect(rescanOnNextLogs).toBe(false);
    expect(transfers(await stream(c)).map((t) => [t.txHash, t.amount])).toEqual([[paid.txHash, '17']]);

    // Again, with nothing in flight: what it finds was published already (the reorg window remembers it).
    await rescanWatchedAddress(dataSource, c.caip2, deposit, paid.blockNumber);
    await f.catchUp();
    expect(transfers(await stream(c))).toHaveLength(1);
    expect(await store.laggingWatches(c.caip2, await c.head())).toEqual([]);
  });

  it('halts, and says why, when the RPC URL serves another chain', async () => {
    const c = await chain();
    const f = new ChainFollower(
      {
        chain: { caip2: 'eip155:1', chainId: 1n, rpcUrl: c.rpcUrl, confirmations: 0, startBlock: 0 },
        pollMs: 20,
        batchBlocks: 10,
        reorgWindow: 10,
      },
      new JsonRpcChainClient(c.rpcUrl, 1n),
      store,
      events,
      logger,
    );
    followers.push(f);
    f.start();
    await until(async () => f.status().halted !== null, 'the halt');
    expect(f.status().halted).toMatch(/serves chain id 900\d+/);
  });
});
