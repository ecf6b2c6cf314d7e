import type { DataSource } from 'typeorm';
import { openDataSource } from '@stablepay/database';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { resetFollowersOfLostLocalChains } from './follower-reset';
import { INDEXER_MIGRATIONS } from './migrations';
import { startTestChain, type TestChain } from './testing/test-chain';

/**
 * The reset of a local chain that came back behind the database: what other scopes recorded about the chain
 * (`alsoReset`) is reset in the follower's own transaction, so both happen or neither (a crash in between would
 * leave the chain no longer detected as lost, with the other records still pointing at contracts it lost).
 */
describe('resetFollowersOfLostLocalChains', () => {
  let database: TestDatabase;
  let dataSource: DataSource;
  let chain: TestChain;

  beforeAll(async () => {
    database = await createTestDatabase();
    dataSource = await openDataSource({ url: database.url, migrations: INDEXER_MIGRATIONS, poolSize: 2 });
    await dataSource.query('CREATE TABLE other_scope (chain text NOT NULL, registered boolean NOT NULL)');
    chain = await startTestChain(910_001);
  });

  afterAll(async () => {
    await chain?.stop();
    await dataSource?.destroy();
    await database?.drop();
  });

  /** The follower recorded a block far beyond the fresh chain's head: the chain lost it. */
  async function recordedBeyondTheChain(): Promise<void> {
    await dataSource.query('DELETE FROM indexer_checkpoints');
    await dataSource.query('DELETE FROM other_scope');
    await dataSource.query(
      `INSERT INTO indexer_checkpoints (chain, block_number, block_hash) VALUES ($1, 5000, '0x${'ab'.repeat(32)}')`,
      [chain.caip2],
    );
    await dataSource.query('INSERT INTO other_scope (chain, registered) VALUES ($1, true)', [chain.caip2]);
  }

  const checkpoint = async () =>
    (
      (await dataSource.query('SELECT block_number FROM indexer_checkpoints WHERE chain = $1', [
        chain.caip2,
      ])) as {
        block_number: string | null;
      }[]
    )[0]?.block_number;
  const registered = async () =>
    (
      (await dataSource.query('SELECT registered FROM other_scope WHERE chain = $1', [chain.caip2])) as {
        registered: boolean;
      }[]
    )[0]?.registered;

  it('resets the follower and what alsoReset resets together, answering what alsoReset answered', async () => {
    await recordedBeyondTheChain();
    const resets = await resetFollowersOfLostLocalChains(database.url, [chain], async (client, lost) => {
      const result = await client.query('UPDATE other_scope SET registered = false WHERE chain = $1', [lost]);
      return result.rowCount;
    });
    expect(resets).toEqual([
      expect.objectContaining({
        chain: chain.caip2,
        recordedBlock: 5000,
        also: 1,
        chainHead: await chain.head(),
      }),
    ]);
    expect(await checkpoint()).toBeNull();
    expect(await registered()).toBe(false);
  });

  it('resets neither when alsoReset fails: the chain is found lost again on the next start', async () => {
    await recordedBeyondTheChain();
    await expect(
      resetFollowersOfLostLocalChains(database.url, [chain], async (client, lost) => {
        await client.query('UPDATE other_scope SET registered = false WHERE chain = $1', [lost]);
        throw new Error('the other scope failed');
      }),
    ).rejects.toThrow('the other scope failed');
    expect(await checkpoint()).toBe('5000');
    expect(await registered()).toBe(true);
  });

  it('leaves a chain that still has the recorded block alone, without calling alsoReset', async () => {
    await recordedBeyondTheChain();
    const head = await chain.head();
    const block = (
      await chain.rpc<{ hash: string }>('eth_getBlockByNumber', [`0x${head.toString(16)}`, false])
    ).hash;
    await dataSource.query(
      'UPDATE indexer_checkpoints SET block_number = $2, block_hash = $3 WHERE chain = $1',
      [chain.caip2, head, block],
    );
    const called: string[] = [];
    expect(
      await resetFollowersOfLostLocalChains(database.url, [chain], async (_client, lost) => {
        called.push(lost);
      }),
    ).toEqual([]);
    expect(called).toEqual([]);
    expect(await checkpoint()).toBe(String(head));
  });
});
