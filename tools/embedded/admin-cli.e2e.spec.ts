import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { runAdminCli } from './admin-cli';
import { type EmbeddedStack, startEmbedded } from './embedded';

describe('operator CLI (tools/embedded/admin-cli.ts) against a running gateway', () => {
  let db: TestDatabase;
  let stack: EmbeddedStack;
  beforeAll(async () => {
    db = await createTestDatabase();
    stack = await startEmbedded({
      env: {
        DATABASE_URL: db.url,
        PORT: '0',
        ADMIN_TOKEN: 'cli-token-0123456789-0123456789-ab',
        LOG_LEVEL: 'error',
      },
      dataDir: 'memory',
      localChains: false,
    });
  });
  afterAll(async () => {
    await stack.stop();
    await db.drop();
  });

  it('creates a merchant and prints its id and API key', async () => {
    const out: string[] = [];
    const code = await runAdminCli(
      ['create-merchant', '--name', 'Initech', '--mode', 'test', '--url', stack.url],
      { ADMIN_TOKEN: 'cli-token-0123456789-0123456789-ab' },
      (s) => out.push(s),
    );
    expect(code).toBe(0);
    const printed = JSON.parse(out.join('\n')) as { id: string; api_key: string };
    expect(printed.id).toMatch(/^mer_/);
    const res = await fetch(`${stack.url}/settings`, {
      headers: { authorization: `Bearer ${printed.api_key}` },
    });
    expect(await res.json()).toMatchObject({ merchant_id: printed.id, display_name: 'Initech' });
  });

  it('fails with the API error for bad input and for a wrong token', async () => {
    const out: string[] = [];
    expect(
      await runAdminCli(
        ['create-merchant', '--name', 'X', '--mode', 'prod', '--url', stack.url],
        { ADMIN_TOKEN: 'cli-token-0123456789-0123456789-ab' },
        (s) => out.push(s),
      ),
    ).toBe(1);
    expect(out.join('')).toContain('validation_error');
    expect(
      await runAdminCli(
        ['create-merchant', '--name', 'X', '--mode', 'test', '--url', stack.url],
        { ADMIN_TOKEN: 'wrong' },
        () => undefined,
      ),
    ).toBe(1);
    expect(await runAdminCli(['help'], {}, () => undefined)).toBe(2);
  });
});
