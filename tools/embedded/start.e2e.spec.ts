import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase, eventually, freePort, type TestDatabase } from '@stablepay/testing';
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
    const line = await proc.waitForLine((l) => l.startsWith('{"ready":true'), 180_000);
    const ready = JSON.parse(line) as { url: string; demo_api_key: string; demo_merchant_id: string };
    expect(ready.url).toBe(`http://127.0.0.1:${port}`);
    expect(ready.demo_api_key).toBe(demoKey);
    expect(proc.output.join('\n')).toContain(`Demo API key:     ${demoKey}`);
    // The data directory it was given, not the default ./.stablepay.
    expect(proc.output.join('\n')).toContain(
      `Database:         ${db ? 'DATABASE_URL' : `embedded PGlite (${join(dataDir, 'pglite')})`}`,
    );

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
    // The registry is the verifying contract of MerchantChange and RevokeAuthorizations signatures.
    expect(proc.output.join('\n')).toMatch(
      /Chain eip155:8453 +http:\/\/127\.0\.0\.1:\d+ +\(payment factory 0x[0-9a-fA-F]{40}, registry 0x[0-9a-fA-F]{40}\)/,
    );
    // The README's subscription checkout: the sandbox rates quote its ARS price, and a USD one as it says.
    const readme = readFileSync(join(__dirname, '..', '..', 'README.md'), 'utf8');
    const plan = /\/subscription-checkouts [^\n]*\n\s*-d '([^']+)'/.exec(readme)?.[1];
    const subscriptionCheckout = (body: string) =>
      fetch(`${ready.url}/subscription-checkouts`, {
        method: 'POST',
        headers: { authorization: `Bearer ${demoKey}`, 'content-type': 'application/json' },
        body,
      });
    const created = await subscriptionCheckout(plan ?? 'the README shows no subscription checkout');
    expect(created.status).toBe(201);
    expect(await created.json()).toMatchObject({ status: 'pending', price_currency: 'ARS' });
    const usd = await subscriptionCheckout(
      JSON.stringify({ ...JSON.parse(plan ?? '{}'), price_currency: 'USD' }),
    );
    expect(usd.status).toBe(422);
    expect(await usd.json()).toMatchObject({ error: { code: 'price_currency_not_quotable' } });
    // The README's first payment: its checkout, paid on the printed chain by its node snippet as written, settles.
    const order = /localhost:3000\/checkouts [^\n]*\n\s*-d '([^']+)'/.exec(readme)?.[1];
    const snippet =
      /node -e '\n([\s\S]*?)\n' <chain rpc url> <asset's token address> <deposit_address> (\d+)/.exec(readme);
    const rpc = /Chain eip155:8453 +(http:\/\/\S+)/.exec(proc.output.join('\n'))?.[1];
    const checkout = (await (
      await fetch(`${ready.url}/checkouts`, {
        method: 'POST',
        headers: { authorization: `Bearer ${demoKey}`, 'content-type': 'application/json' },
        body: order ?? 'the README shows no checkout',
      })
    ).json()) as {
      payment_id: string;
      deposit_address: string;
      accepted_assets: { chain: string; asset: string; token_symbol: string; token_amount: string }[];
    };
    const usdc = checkout.accepted_assets.find((a) => a.chain === 'eip155:8453' && a.token_symbol === 'USDC');
    expect(snippet?.[2]).toBe(usdc?.token_amount);
    const token = usdc?.asset.slice(usdc.asset.indexOf('erc20:') + 'erc20:'.length) ?? '';
    const payer = spawnNode(
      [
        '-e',
        snippet?.[1] ?? 'process.exit(9)',
        rpc ?? '',
        token,
        checkout.deposit_address,
        snippet?.[2] ?? '',
      ],
      cleanEnv({}),
    );
    expect(await new Promise((resolve) => payer.child.once('close', resolve))).toBe(0);
    const paid = await eventually(
      async () =>
        (await (
          await fetch(`${ready.url}/payments/${checkout.payment_id}`, {
            headers: { authorization: `Bearer ${demoKey}` },
          })
        ).json()) as { status: string },
      (p) => p.status !== 'pending',
      'the README payment to leave pending',
      { timeoutMs: 120_000 },
    );
    expect(paid.status).toBe('settled');
    const admin = await fetch(`${ready.url}/admin/merchants`, { method: 'POST' });
    expect(admin.status).toBe(404);

    expect(await proc.stop('SIGTERM')).toBe(0);
  }, 300_000);

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
        expect(await new Promise((resolve) => bad.child.once('close', resolve))).toBe(78);
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

  describe('environment problems are reported before anything starts', () => {
    /** Runs `npm start` expected to refuse: its exit code and output, and what the data directory holds after. */
    async function refused(env: Record<string, string>, dir: string) {
      const before = readdirSync(dir).sort();
      const bad = spawnNode(
        ['tools/embedded/start.js'],
        cleanEnv({ STABLEPAY_DATA_DIR: dir, LOG_LEVEL: 'warn', ...env }),
      );
      // Its own exit with its output read, however long loading takes on a busy machine (stop() would kill it
      // after 15 s).
      const code = await new Promise<number | null>((resolve) => bad.child.once('close', resolve));
      const output = bad.output.join('\n');
      // Nothing was started: no chain, no HTTP server, and the data directory holds what it held.
      expect(output).not.toMatch(/Chain eip155|listening|"ready"/);
      expect(readdirSync(dir).sort()).toEqual(before);
      return { code, output };
    }

    it('a port already in use: exit 78 naming the port and PORT, data directory untouched', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'stablepay-port-'));
      const taken: Server = createServer();
      await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
      const address = taken.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      try {
        const { code, output } = await refused({ PORT: String(port) }, dir);
        expect(code).toBe(78);
        expect(output).toContain(`port ${port} on 127.0.0.1 is already in use`);
        expect(output).toContain('PORT');
        expect(readdirSync(dir)).toEqual([]);
      } finally {
        await new Promise((r) => taken.close(r));
        rmSync(dir, { recursive: true, force: true });
      }
    }, 60_000);

    it.each([
      ['a file', 'is not a directory'],
      ['a read-only directory', 'is not writable'],
      ['under a file', 'cannot be created (ENOTDIR'],
    ])(
      'a data directory that is %s: exit 78 naming STABLEPAY_DATA_DIR and why, nothing started',
      async (what, why) => {
        const dir = mkdtempSync(join(tmpdir(), 'stablepay-baddir-'));
        const file = join(dir, 'file');
        writeFileSync(file, '');
        // /proc refuses new files even to root (a chmod'ed directory would not stop root).
        const dataDir = what === 'a file' ? file : what === 'under a file' ? join(file, 'data') : '/proc';
        try {
          const bad = spawnNode(
            ['tools/embedded/start.js'],
            cleanEnv({ PORT: '0', STABLEPAY_DATA_DIR: dataDir, LOG_LEVEL: 'warn' }),
          );
          const code = await new Promise<number | null>((resolve) => bad.child.once('close', resolve));
          const output = bad.output.join('\n');
          expect(code).toBe(78);
          expect(output).toContain(
            `environment variable STABLEPAY_DATA_DIR: the data directory ${dataDir} ${why}`,
          );
          expect(output).not.toMatch(/Chain eip155|listening|"ready"/);
          expect(readdirSync(dir)).toEqual(['file']);
        } finally {
          rmSync(dir, { recursive: true, force: true });
        }
      },
      60_000,
    );

    it('a HOST that is no address of this machine, with PORT=0: exit 78 naming HOST, data directory untouched', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'stablepay-host-'));
      try {
        const { code, output } = await refused({ PORT: '0', HOST: '192.0.2.1' }, dir);
        expect(code).toBe(78);
        expect(output).toContain('environment variable HOST: cannot listen on 192.0.2.1 (EADDRNOTAVAIL)');
        expect(readdirSync(dir)).toEqual([]);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }, 60_000);

    it('a refused start removes the data directory (and its parents) it made itself, leaving what was there', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'stablepay-made-'));
      try {
        const made = join(dir, 'new', 'data');
        const { code } = await refused({ PORT: '0', HOST: '192.0.2.1', STABLEPAY_DATA_DIR: made }, dir);
        expect(code).toBe(78);
        expect(existsSync(join(dir, 'new'))).toBe(false);
        const nobody = await freePort();
        expect(
          (
            await refused(
              {
                PORT: '0',
                DATABASE_URL: `postgres://127.0.0.1:${nobody}/stablepay`,
                STABLEPAY_DATA_DIR: made,
              },
              dir,
            )
          ).code,
        ).toBe(78);
        expect(readdirSync(dir)).toEqual([]);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }, 90_000);

    it('an unreachable DATABASE_URL: exit 78 naming it and where, without its password', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'stablepay-nodb-'));
      const nobody = await freePort();
      try {
        const { code, output } = await refused(
          { PORT: '0', DATABASE_URL: `postgres://app:s3cret@127.0.0.1:${nobody}/stablepay` },
          dir,
        );
        expect(code).toBe(78);
        expect(output).toContain(`DATABASE_URL: cannot reach the database at 127.0.0.1:${nobody}/stablepay`);
        expect(output).not.toContain('s3cret');
        expect(readdirSync(dir)).toEqual([]);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }, 60_000);

    it('a second start on the data directory of a running one: exit 78 naming the running pid; the first keeps running', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'stablepay-twice-'));
      const first = spawnNode(
        ['tools/embedded/start.js'],
        cleanEnv({ PORT: '0', STABLEPAY_DATA_DIR: dir, LOG_LEVEL: 'warn', STABLEPAY_LOCAL_CHAINS: 'false' }),
      );
      try {
        const ready = JSON.parse(await first.waitForLine((l) => l.startsWith('{"ready":true'), 180_000)) as {
          url: string;
        };
        expect(readFileSync(join(dir, 'stablepay.lock'), 'utf8').split('\n')[0]?.split(' ')[0]).toBe(
          String(first.child.pid),
        );
        const { code, output } = await refused({ PORT: '0', STABLEPAY_LOCAL_CHAINS: 'false' }, dir);
        expect(code).toBe(78);
        expect(output).toContain(`is in use by another Stablepay (pid ${first.child.pid})`);
        expect((await fetch(`${ready.url}/ready`)).status).toBe(200);
        // A clean stop gives the directory back.
        expect(await first.stop('SIGTERM')).toBe(0);
        expect(existsSync(join(dir, 'stablepay.lock'))).toBe(false);
      } finally {
        await first.stop('SIGKILL');
        rmSync(dir, { recursive: true, force: true });
      }
    }, 240_000);
  });
});
