import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase, freePort, type TestDatabase } from '@stablepay/testing';
import { cleanEnv, spawnNode, type SpawnedProcess } from './process-harness';

/** The README's `npm start`: the embedded stack comes up, prints the URL and a working demo key, and stops cleanly. */
describe('npm start (tools/embedded/start.js)', () => {
  let db: TestDatabase | undefined;
  let proc: SpawnedProcess | undefined;
  const dataDir = mkdtempSync(join(tmpdir(), 'stablepay-start-'));

  afterAll(async () => {
    await proc?.stop();
    await db?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('serves the API with the demo key on local chains, keeps DEMO_API_KEY, hides the operator API, and exits 0 on SIGTERM', async () => {
    // With DATABASE_URL (CI) the stack uses that server; without it, the embedded PGlite, as on a fresh machine.
    if (process.env['DATABASE_URL']) db = await createTestDatabase();
    const port = await freePort();
    const demoKey = 'sk_test_' + 'D3mo'.repeat(8);
    proc = spawnNode(
      ['tools/embedded/start.js'],
      cleanEnv({
        PORT: String(port),
        DEMO_API_KEY: demoKey,
        STABLEPAY_DATA_DIR: dataDir,
        LOG_LEVEL: 'warn',
        ...(db ? { DATABASE_URL: db.url } : {}),
      }),
    );
    const line = await proc.waitForLine((l) => l.startsWith('{"ready":true'), 90_000);
    const ready = JSON.parse(line) as { url: string; demo_api_key: string; demo_merchant_id: string };
    expect(ready.url).toBe(`http://127.0.0.1:${port}`);
    expect(ready.demo_api_key).toBe(demoKey);
    expect(proc.output.join('\n')).toContain(`Demo API key:     ${demoKey}`);

    expect((await fetch(`${ready.url}/health`)).status).toBe(200);
    const readyz = await fetch(`${ready.url}/ready`);
    expect(await readyz.json()).toMatchObject({
      status: 'ready',
      checks: { database: 'ok', event_store: 'ok' },
    });
    const settings = await fetch(`${ready.url}/settings`, {
      headers: { authorization: `Bearer ${demoKey}` },
    });
    expect(settings.status).toBe(200);
    // Local chains are up with the contracts deployed: settings name the payment factory, the same on every chain.
    expect(await settings.json()).toMatchObject({
      merchant_id: ready.demo_merchant_id,
      mode: 'test',
      payment_factory_address: expect.stringMatching(/^0x[0-9a-fA-F]{40}$/),
      payment_factory_status: 'deployed',
      signers: [
        expect.objectContaining({ chain: 'eip155:8453' }),
        expect.objectContaining({ chain: 'eip155:137' }),
      ],
    });
    expect(proc.output.join('\n')).toMatch(/Chain eip155:8453 +http:\/\/127\.0\.0\.1:\d+/);
    const admin = await fetch(`${ready.url}/admin/merchants`, { method: 'POST' });
    expect(admin.status).toBe(404);

    expect(await proc.stop('SIGTERM')).toBe(0);
  });

  it.each([
    ['DEMO_API_KEY', 'sk_live_' + 'x'.repeat(32)],
    ['RATE_LIMIT_PER_KEY_PER_SECOND', 'lots'],
    ['WEBHOOK_SECRET_ENCRYPTION_KEY', 'short'],
    ['LOCAL_CHAIN_IDS', '8453,zero'],
    ['HOSTED_URL', 'ftp://pages'],
  ])(
    'reports a bad %s before anything starts: exit 78 naming it, no database, no chain',
    async (name, value) => {
      const dir = mkdtempSync(join(tmpdir(), 'stablepay-badenv-'));
      try {
        const bad = spawnNode(
          ['tools/embedded/start.js'],
          cleanEnv({ PORT: '0', STABLEPAY_DATA_DIR: dir, LOG_LEVEL: 'warn', [name]: value }),
        );
        expect(await bad.stop('SIGCONT')).toBe(78);
        expect(bad.output.join('\n')).toContain(name);
        // Nothing was started or written: no PGlite files, no chain state, no keys.
        expect(existsSync(join(dir, 'pglite'))).toBe(false);
        expect(readdirSync(dir)).toEqual([]);
        expect(bad.output.join('\n')).not.toMatch(/Chain eip155|listening|ready/);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
    60_000,
  );
});
