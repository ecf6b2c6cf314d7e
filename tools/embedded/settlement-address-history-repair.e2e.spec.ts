import { Wallet } from 'ethers';
import { Client } from 'pg';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { ManualClock } from '@stablepay/util';
import { type EmbeddedStack, startEmbedded } from './embedded';

/** A settlement address history the projection wrote before c960b94 is rebuilt when the gateway starts. */
const ADMIN_TOKEN = 'admin-token-for-tests-0123456789';
const operator = Wallet.createRandom();
const clock = new ManualClock('2026-06-01T10:00:00.000Z');

describe('settlement address history repair at start (embedded stack)', () => {
  let db: TestDatabase;
  let stack: EmbeddedStack | undefined;

  const start = () =>
    startEmbedded({
      env: {
        DATABASE_URL: db.url,
        PORT: '0',
        ADMIN_TOKEN,
        OPERATOR_PAUSER_ADDRESS: operator.address,
        ALLOW_LOCAL_WEBHOOKS: 'false',
        LOG_LEVEL: 'error',
      },
      dataDir: 'memory',
      localChains: false,
      clock,
    });
  const call = async (method: string, path: string, token: string, body?: unknown) => {
    const res = await fetch(`${stack?.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  const sql = async <Row>(text: string, params: unknown[]): Promise<Row[]> => {
    const client = new Client({ connectionString: db.url });
    await client.connect();
    try {
      return (await client.query(text, params)).rows as Row[];
    } finally {
      await client.end();
    }
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    stack = await start();
  });

  afterAll(async () => {
    await stack?.stop();
    await db?.drop();
  });

  it('rebuilds from the stream a history left with two open addresses, so the address the settings hold is the one in force', async () => {
    const created = await call('POST', '/admin/merchants', ADMIN_TOKEN, { name: 'Repair Co', mode: 'test' });
    const key = String(created.body['api_key']);
    const merchantId = String(created.body['id']);
    const [a, b] = [Wallet.createRandom().address, Wallet.createRandom().address];
    expect(
      (
        await call('POST', '/settings', key, {
          merchant_signer: Wallet.createRandom().address,
          settlement_address: a,
        })
      ).status,
    ).toBe(200);
    clock.advance(60_000);
    expect((await call('PUT', '/settings', key, { settlement_address: b })).status).toBe(200);
    type Row = { settlement_address: string; valid_from: Date; valid_to: Date | null };
    const history = () =>
      sql<Row>(
        'SELECT settlement_address, valid_from, valid_to FROM merchant_settlement_addresses WHERE merchant_id = $1 ORDER BY valid_from',
        [merchantId],
      );
    const written = await history();
    expect(written.map((r) => [r.settlement_address, r.valid_to === null])).toEqual([
      [a, false],
      [b, true],
    ]);
    await stack?.stop();
    stack = undefined;
    // As the projection before c960b94 left it after a change it did not let close the open address.
    await sql('UPDATE merchant_settlement_addresses SET valid_to = NULL WHERE merchant_id = $1', [
      merchantId,
    ]);

    stack = await start();
    expect(await history()).toEqual(written);
  });
});
