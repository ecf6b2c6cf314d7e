import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { type EmbeddedStack, startEmbedded } from './embedded';
import { LEASE_OWNER_FILE } from './embedded-indexer';
import { until } from './test-support/http';

const CHAIN = 'eip155:8453';

/**
 * A persistent embedded run restarted after a kill -9 follows its chains at once. The killed run's followers kept
 * their leases (nothing released them); before the fix the new run took them under fresh names, so it followed
 * nothing until they expired (the first payment after the restart seen up to 30 s late). Now both runs hold them
 * under the name kept in the data directory, and the restart re-takes its own leases.
 */
describe('embedded run restarted on its data directory after a kill -9', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'stablepay-lease-'));
  let db: TestDatabase;
  let running: EmbeddedStack | undefined;

  const start = async (): Promise<EmbeddedStack> => {
    running = await startEmbedded({
      env: {
        DATABASE_URL: db.url,
        PORT: '0',
        LOG_LEVEL: 'error',
        STABLEPAY_LOCAL_CHAINS: 'true',
        LOCAL_CHAIN_IDS: '8453',
        INDEXER_POLL_MS: '100',
      },
      dataDir,
    });
    return running;
  };
  const lease = async (stack: EmbeddedStack) => {
    const [row] = (await stack.service.app
      .get(DataSource)
      .query(
        'SELECT lease_owner, block_number::int AS block_number FROM indexer_checkpoints WHERE chain = $1',
        [CHAIN],
      )) as { lease_owner: string | null; block_number: number | null }[];
    return row;
  };
  const mine = async (stack: EmbeddedStack): Promise<number> => {
    const rpcUrl = stack.chains?.chains.find((c) => c.caip2 === CHAIN)?.rpcUrl ?? '';
    const call = async (method: string, params: unknown[] = []) => {
      const res = await fetch(rpcUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
      });
      return ((await res.json()) as { result: unknown }).result;
    };
    await call('anvil_mine', ['0x2']);
    return Number(await call('eth_blockNumber'));
  };

  beforeAll(async () => {
    db = await createTestDatabase();
  });

  afterAll(async () => {
    await running?.stop();
    await db?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('re-takes the leases the killed run held and follows without waiting for them to expire', async () => {
    const first = await start();
    const head = await mine(first);
    const held = await until(
      () => lease(first),
      (row) => (row?.block_number ?? -1) >= head,
      'the first run following the chain',
    );
    const owner = readFileSync(join(dataDir, LEASE_OWNER_FILE), 'utf8').trim();
    expect(held?.lease_owner).toBe(owner);
    await first.stop();
    running = undefined;
    // What a kill -9 leaves behind: the lease still held, far from expiring (a clean stop released it).
    const client = new Client({ connectionString: db.url });
    await client.connect();
    try {
      await client.query(
        "UPDATE indexer_checkpoints SET lease_owner = $1, lease_expires_at = now() + interval '1 hour'",
        [owner],
      );
    } finally {
      await client.end();
    }

    const second = await start();
    const newHead = await mine(second);
    const followed = await until(
      () => lease(second),
      (row) => (row?.block_number ?? -1) >= newHead,
      'the restarted run following the chain',
    );
    expect(followed?.lease_owner).toBe(owner);
  }, 300_000);
});
