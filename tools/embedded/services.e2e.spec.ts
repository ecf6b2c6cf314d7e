import { createTestDatabase, freePort, type TestDatabase } from '@stablepay/testing';
import { cleanEnv, spawnNode } from './process-harness';

/**
 * Each of the eight services boots on its own from its main.ts (as its container does): /health answers,
 * /ready reports its dependencies, logs are JSON lines, and SIGTERM shuts it down cleanly.
 */
const APPS = [
  'gateway',
  'payments',
  'subscriptions',
  'charge-ledger',
  'indexer',
  'settlement',
  'payouts',
  'webhook-dispatch',
];

describe('each service app boots on its own', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db.drop();
  });

  it.each(APPS)('%s: health, readiness, JSON logs, graceful shutdown', async (app) => {
    const port = await freePort();
    const proc = spawnNode(
      ['-r', '@swc-node/register', `apps/${app}/src/main.ts`],
      cleanEnv({
        DATABASE_URL: db.url,
        PORT: String(port),
        HOST: '127.0.0.1',
        COMMANDS_HOST: '127.0.0.1',
        COMMANDS_PORT: String(await freePort()),
        WEBHOOK_SECRET_ENCRYPTION_KEY: 'ab'.repeat(32),
      }),
    );
    try {
      await proc.waitForLine((l) => l.includes(`"msg":"${app} listening"`), 60_000);
      const base = `http://127.0.0.1:${port}`;
      expect(await (await fetch(`${base}/health`)).json()).toEqual({ status: 'ok' });
      const ready = await fetch(`${base}/ready`);
      expect(ready.status).toBe(200);
      expect(await ready.json()).toMatchObject({
        status: 'ready',
        checks: { database: 'ok', event_store: 'ok' },
      });
      for (const line of proc.output.filter((l) => l.startsWith('{'))) {
        expect(JSON.parse(line)).toMatchObject({
          service: app,
          level: expect.any(String),
          time: expect.any(String),
        });
      }
    } finally {
      expect(await proc.stop('SIGTERM')).toBe(0);
    }
  });

  it('the relay refuses to start on the store-log bus (the store is the bus) and names EVENT_BUS', async () => {
    const proc = spawnNode(
      ['-r', '@swc-node/register', 'apps/relay/src/main.ts'],
      cleanEnv({ DATABASE_URL: db.url, PORT: '0', EVENT_BUS: 'store-log' }),
    );
    const code = await new Promise<number | null>((resolve) => proc.child.once('exit', resolve));
    expect(code).toBe(78);
    expect(proc.output.join('\n')).toContain('EVENT_BUS must be kafka');
  });

  it('a service without DATABASE_URL refuses to start and names the variable', async () => {
    const proc = spawnNode(
      ['-r', '@swc-node/register', 'apps/payments/src/main.ts'],
      cleanEnv({ PORT: '0' }),
    );
    const code = await new Promise<number | null>((resolve) => proc.child.once('exit', resolve));
    expect(code).toBe(78);
    expect(proc.output.join('\n')).toContain('DATABASE_URL');
  });
});
