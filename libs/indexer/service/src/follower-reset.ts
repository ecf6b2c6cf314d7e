import { Client, type ClientBase } from 'pg';

export interface LostChainReset<T = undefined> {
  readonly chain: string;
  /** The block the follower had recorded, which the chain no longer has (or has with another hash). */
  readonly recordedBlock: number;
  readonly recordedHash: string | null;
  readonly chainHead: number;
  /** What `alsoReset` answered for this chain. */
  readonly also: T | undefined;
}

async function rpc<T>(url: string, method: string, params: unknown[]): Promise<T> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  const body = (await res.json()) as { result?: T; error?: { message: string } };
  if (body.error) throw new Error(`${method} at ${url}: ${body.error.message}`);
  return body.result as T;
}

/**
 * For chains whose history is disposable (the embedded run's local anvil chains, never a real chain): when the chain
 * no longer has the block the follower recorded as its checkpoint (it restarted empty, or behind its saved state),
 * the follower's position, block window, observations and watch progress for that chain are forgotten, so it starts
 * again from the chain's head instead of halting on "a reorg deeper than the stored window". Events already
 * published stay in the event store: they are history. A real chain's deep reorg still halts its follower.
 * Runs before the indexer starts; returns what it reset (nothing when the tables do not exist yet). `alsoReset`
 * runs in the same transaction for each such chain, so what other scopes recorded about the chain's contracts is
 * brought back with the follower or not at all (a crash in between would leave the chain no longer detected as lost).
 */
export async function resetFollowersOfLostLocalChains<T = undefined>(
  databaseUrl: string,
  chains: ReadonlyArray<{ readonly caip2: string; readonly rpcUrl: string }>,
  alsoReset?: (client: ClientBase, chain: string) => Promise<T>,
): Promise<Array<LostChainReset<T>>> {
  const client = new Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const exists = await client.query<{ t: string | null }>(
      "SELECT to_regclass('indexer_checkpoints')::text AS t",
    );
    if (!exists.rows[0]?.t) return [];
    const resets: Array<LostChainReset<T>> = [];
    for (const chain of chains) {
      const { rows } = await client.query<{ n: string | null; hash: string | null }>(
        'SELECT block_number::text AS n, block_hash AS hash FROM indexer_checkpoints WHERE chain = $1',
        [chain.caip2],
      );
      const row = rows[0];
      if (!row || row.n === null) continue;
      const recordedBlock = Number(row.n);
      const block = await rpc<{ hash: string } | null>(chain.rpcUrl, 'eth_getBlockByNumber', [
        `0x${recordedBlock.toString(16)}`,
        false,
      ]);
      if (block && (row.hash === null || block.hash === row.hash)) continue;
      const chainHead = Number(await rpc<string>(chain.rpcUrl, 'eth_blockNumber', []));
      await client.query('BEGIN');
      try {
        await client.query(
          `UPDATE indexer_checkpoints SET block_number = NULL, block_hash = NULL, lease_owner = NULL,
             lease_expires_at = NULL, updated_at = now() WHERE chain = $1`,
          [chain.caip2],
        );
        await client.query('DELETE FROM indexer_blocks WHERE chain = $1', [chain.caip2]);
        await client.query('DELETE FROM indexer_observations WHERE chain = $1', [chain.caip2]);
        for (const table of ['indexer_watched_addresses', 'indexer_watched_contracts']) {
          await client.query(`UPDATE ${table} SET scanned_through = NULL WHERE chain = $1`, [chain.caip2]);
        }
        const also = alsoReset ? await alsoReset(client, chain.caip2) : undefined;
        await client.query('COMMIT');
        resets.push({ chain: chain.caip2, recordedBlock, recordedHash: row.hash, chainHead, also });
      } catch (error) {
        await client.query('ROLLBACK');
        throw error;
      }
    }
    return resets;
  } finally {
    await client.end();
  }
}
