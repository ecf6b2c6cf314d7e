import type { DataSource } from 'typeorm';
import { openDataSource } from '@stablepay/database';
import { type EventStore, PostgresEventStore } from '@stablepay/event-store';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { SUBSCRIPTIONS_MIGRATIONS } from '../migrations';
import { ChainObservationLog } from './chain-facts';

const CHAIN = 'eip155:31337';
const BLOCK = `0x${'AB'.repeat(32)}`;

const receipt = (tx: string) => ({
  chain: CHAIN,
  contract: '0x1111111111111111111111111111111111111111',
  event: 'SubscriptionCharged',
  args: { subscriptionId: `0x${'CD'.repeat(32)}`, nonce: '1' },
  txHash: tx,
  blockNumber: '42',
  blockHash: BLOCK,
  blockTime: '2026-11-24T14:00:00.000Z',
});

describe('ChainObservationLog: the API path remembers its receipt before the fact (PGlite and Postgres)', () => {
  let database: TestDatabase;
  let dataSource: DataSource;
  const statements: string[] = [];
  /** The service's DataSource, its statements seen. */
  let seen: DataSource;

  beforeAll(async () => {
    database = await createTestDatabase();
    dataSource = await openDataSource({ url: database.url, migrations: [...SUBSCRIPTIONS_MIGRATIONS] });
    seen = new Proxy(dataSource, {
      get: (target, key) =>
        key === 'query'
          ? (sql: string, params?: unknown[]) => {
              statements.push(sql);
              return target.query(sql, params);
            }
          : Reflect.get(target, key),
    });
  });

  afterAll(async () => {
    await dataSource?.destroy();
    await database?.drop();
  });

  beforeEach(() => statements.splice(0));

  it("with the Postgres event store on the same database its commit leaves the WAL flush to the fact's append", async () => {
    const store = Object.create(PostgresEventStore.prototype) as EventStore;
    const log = new ChainObservationLog(seen, store);
    const tx = `0x${'01'.repeat(32)}`;
    await log.rememberReceipt(receipt(tx), 3);
    await log.rememberReceipt(receipt(tx), 3); // a retry of the same receipt keeps one row
    expect(statements).toHaveLength(2);
    expect(statements[0]).toMatch(/set_config\('synchronous_commit', 'off', true\)/);
    const open = await log.openReceipts(10);
    expect(open.filter((r) => r.tx_hash === tx)).toEqual([
      expect.objectContaining({
        observation_id: `receipt:${CHAIN}:${tx}:3:${BLOCK.toLowerCase()}`,
        written_by: 'api',
        block_hash: BLOCK.toLowerCase(),
        subscription_id: `0x${'cd'.repeat(32)}`,
      }),
    ]);
    // Only that statement's own commit: the session goes on committing synchronously.
    expect(await dataSource.query('SHOW synchronous_commit')).toEqual([{ synchronous_commit: 'on' }]);
  });

  it('settles in one statement the receipts the indexer reported from the same block, and no other', async () => {
    const log = new ChainObservationLog(dataSource);
    const [same, other, none] = ['11', '12', '13'].map((b) => `0x${b.repeat(32)}`) as [
      string,
      string,
      string,
    ];
    await log.rememberReceipt(receipt(same), 0);
    await log.rememberReceipt(receipt(other), 0);
    await log.rememberReceipt(receipt(none), 0);
    // The indexer read `same` from the receipt's block (hash in other case), `other` from another block (a reorg).
    await log.remember(`idx:${same}`, {
      ...receipt(same.toUpperCase().replace('0X', '0x')),
      blockHash: BLOCK,
    });
    await log.remember(`idx:${other}`, { ...receipt(other), blockHash: `0x${'EF'.repeat(32)}` });
    expect(await log.settleSeenByIndexer()).toBe(1);
    expect(await log.settleSeenByIndexer()).toBe(0);
    const open = (await log.openReceipts(100)).map((r) => r.tx_hash);
    expect(open).not.toContain(same);
    expect(open).toEqual(expect.arrayContaining([other, none]));
  });

  it('a receipt pending after a reorg keeps its first time; followed to its new block it is open again until the indexer reports it from there', async () => {
    const log = new ChainObservationLog(dataSource);
    const tx = `0x${'21'.repeat(32)}`;
    const newBlock = `0x${'5A'.repeat(32)}`;
    await log.rememberReceipt(receipt(tx), 0);
    const id = `receipt:${CHAIN}:${tx}:0:${BLOCK.toLowerCase()}`;
    const first = new Date('2026-11-24T14:00:00.000Z');
    await log.markPending(id, first);
    await log.markPending(id, new Date('2026-11-24T14:05:00.000Z'));
    const pending = (await log.openReceipts(100)).find((r) => r.observation_id === id);
    expect(new Date(pending?.pending_since ?? 0)).toEqual(first);

    await log.followReceipt(id, 45, newBlock);
    expect((await log.openReceipts(100)).find((r) => r.observation_id === id)).toMatchObject({
      block_number: '45',
      block_hash: newBlock.toLowerCase(),
      pending_since: null,
    });
    // The indexer's sighting from the orphaned block would settle nothing now; from the new block it does.
    await log.remember(`idx-new:${tx}`, { ...receipt(tx), blockNumber: '45', blockHash: newBlock });
    await log.settleSeenByIndexer();
    expect((await log.openReceipts(100)).map((r) => r.observation_id)).not.toContain(id);
  });

  it("with another event store (EventStoreDB: its append flushes nothing here) the row's commit waits for its flush", async () => {
    const log = new ChainObservationLog(seen, {} as EventStore);
    const tx = `0x${'02'.repeat(32)}`;
    await log.rememberReceipt(receipt(tx), 0);
    expect(statements.join('\n')).not.toMatch(/synchronous_commit/);
    expect((await log.openReceipts(10)).map((r) => r.tx_hash)).toContain(tx);
  });
});
