import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cleanEnv, spawnNode, type SpawnedProcess } from './process-harness';
import { bannerChains } from './test-support/npm-start';

/**
 * A newcomer's first load test: `npm start` (tools/embedded/start.js) on its real default shape, whatever the test
 * run's DATABASE_URL (PGlite on disk in its data directory, local anvil chains, the demo merchant seeded), takes 64
 * concurrent clients creating subscription checkouts with the demo key, and every one of them succeeds.
 */
describe('npm start on its defaults (PGlite on disk, local chains) under 64 concurrent clients', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'stablepay-load-'));
  let proc: SpawnedProcess | undefined;

  afterAll(async () => {
    await proc?.stop('SIGTERM');
    rmSync(dataDir, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
  });

  it('creates 2 x 64 subscription checkouts concurrently without a single error', async () => {
    // No DATABASE_URL (cleanEnv passes only PATH and HOME): the embedded PGlite, its files in the data directory.
    proc = spawnNode(
      ['tools/embedded/start.js'],
      cleanEnv({ PORT: '0', STABLEPAY_DATA_DIR: dataDir, LOG_LEVEL: 'error' }),
    );
    const ready = JSON.parse(await proc.waitForLine((l) => l.startsWith('{"ready":true'), 180_000)) as {
      url: string;
      demo_api_key: string;
    };
    expect(proc.output.join('\n')).toContain('Database:         embedded PGlite');
    expect(Object.keys(bannerChains(proc.output))).toEqual(['eip155:8453', 'eip155:137']);
    for (let round = 0; round < 2; round++) {
      const results = await Promise.all(
        Array.from({ length: 64 }, async (_, i) => {
          const res = await fetch(`${ready.url}/subscription-checkouts`, {
            method: 'POST',
            headers: { authorization: `Bearer ${ready.demo_api_key}`, 'content-type': 'application/json' },
            body: JSON.stringify({ price: String(150_000 + i), price_currency: 'ARS' }),
          }).catch((e: unknown) => ({ status: 0, text: async () => String(e) }));
          return { status: res.status, body: res.status === 201 ? '' : await res.text() };
        }),
      );
      expect(results.filter((r) => r.status !== 201)).toEqual([]);
    }
    const list = await fetch(`${ready.url}/subscription-checkouts?limit=100`, {
      headers: { authorization: `Bearer ${ready.demo_api_key}` },
    });
    expect(list.status).toBe(200);
    expect(((await list.json()) as { data: unknown[] }).data).toHaveLength(100);
    // Nothing went wrong on the server's side either.
    expect(proc.output.filter((l) => /"level":"(error|fatal)"/.test(l))).toEqual([]);
  }, 400_000);
});
