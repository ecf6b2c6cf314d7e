import { request } from 'node:http';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { type EmbeddedStack, startEmbedded } from './embedded';

/**
 * checkout_url is a link the merchant hands its customer: it must never be built from what the caller claims
 * (the Host header), or anyone with a key could mint links to a host of their choice on the merchant's behalf.
 */
describe('checkout_url does not come from the Host header', () => {
  let db: TestDatabase | undefined;
  let stack: EmbeddedStack;

  beforeAll(async () => {
    if (process.env['DATABASE_URL']) db = await createTestDatabase();
    stack = await startEmbedded({
      env: {
        PORT: '0',
        LOG_LEVEL: 'error',
        STABLEPAY_LOCAL_CHAINS: 'false',
        SANDBOX_RATES: 'USD/USDC=1',
        ...(db ? { DATABASE_URL: db.url } : {}),
      },
      dataDir: 'memory',
    });
  }, 120_000);
  afterAll(async () => {
    await stack?.stop();
    await db?.drop();
  });

  const create = (host: string) =>
    new Promise<{ status: number; body: Record<string, unknown> }>((resolve, reject) => {
      const url = new URL(`${stack.url}/subscription-checkouts`);
      const req = request(
        {
          host: url.hostname,
          port: url.port,
          path: url.pathname,
          method: 'POST',
          headers: {
            host,
            authorization: `Bearer ${stack.demoApiKey}`,
            'content-type': 'application/json',
          },
        },
        (res) => {
          let text = '';
          res.on('data', (c: Buffer) => (text += c.toString('utf8')));
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as Record<string, unknown> }),
          );
        },
      );
      req.on('error', reject);
      req.end(JSON.stringify({ price: '1000', price_currency: 'USD' }));
    });

  it('links to the gateway’s own address in embedded mode, whatever Host the caller sends', async () => {
    for (const host of ['evil.example', 'evil.example:443', '127.0.0.1:1']) {
      const res = await create(host);
      expect(res.status).toBe(201);
      expect(res.body['checkout_url']).toBe(`${stack.url}/hosted/subscribe/${String(res.body['id'])}`);
    }
  });
});
