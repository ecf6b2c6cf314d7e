import { createServer, type Server } from 'node:http';
import { EVENT_STORE } from '@stablepay/aggregate';
import type { EventStore } from '@stablepay/event-store';
import { SubscriberScreeningConsumer, SubscriptionProjection } from '@stablepay/subscriptions-service';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { type EmbeddedStack, startEmbedded } from './embedded';
import { subscriptionFacts } from './subscription-facts';

/**
 * SANCTIONS_SCREENING_PROVIDER=chainalysis reaches the subscriptions service (the selection payments' deposits use
 * too, @stablepay/chain-operator): subscriber wallets are screened by a local server speaking the Chainalysis
 * sanctions API, not by the sandbox. The subscription facts are appended as the subscriptions service appends them
 * (see charge-ledger.e2e.spec.ts); the screening consumer reads them from the topic as in production.
 */
const ADMIN_TOKEN = 'admin-token-for-tests-0123456789';
const API_KEY = 'chainalysis-test-key';
// subscriptionFacts' first subscriber: listed by the fake provider. Not one of the sandbox's magic addresses, so
// only the configured provider can flag it.
const LISTED = `0x${'1'.padStart(40, '1')}`;

describe('subscriber screening through the configured provider (SANCTIONS_SCREENING_PROVIDER=chainalysis)', () => {
  let db: TestDatabase;
  let stack: EmbeddedStack;
  let provider: Server;
  const screened: Array<{ path: string; key: unknown }> = [];

  beforeAll(async () => {
    provider = createServer((req, res) => {
      screened.push({ path: req.url ?? '', key: req.headers['x-api-key'] });
      const listed = (req.url ?? '').toLowerCase() === `/api/v1/address/${LISTED}`;
      res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          identifications: listed ? [{ category: 'sanctions', name: 'SANCTIONS: OFAC SDN test' }] : [],
        }),
      );
    });
    await new Promise<void>((resolve) => provider.listen(0, '127.0.0.1', resolve));
    const address = provider.address();
    if (address === null || typeof address === 'string') throw new Error('provider has no port');
    db = await createTestDatabase();
    stack = await startEmbedded({
      env: {
        DATABASE_URL: db.url,
        PORT: '0',
        ADMIN_TOKEN,
        LOG_LEVEL: 'error',
        SANCTIONS_SCREENING_PROVIDER: 'chainalysis',
        CHAINALYSIS_API_KEY: API_KEY,
        CHAINALYSIS_API_URL: `http://127.0.0.1:${address.port}`,
      },
      dataDir: 'memory',
      localChains: false,
    });
  });

  afterAll(async () => {
    await stack?.stop();
    await db?.drop();
    await new Promise<void>((resolve) => provider.close(() => resolve()));
  });

  it('a subscriber the provider lists is flagged (GET /subscriptions/:id), a clear one is not; each wallet asked once with the key', async () => {
    const created = await fetch(`${stack.url}/admin/merchants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Screened Co', mode: 'test' }),
    });
    const merchant = (await created.json()) as { id: string; api_key: string };
    const store = stack.service.app.get<EventStore>(EVENT_STORE);
    const { subscription } = subscriptionFacts(() => store);
    const listed = await subscription(merchant, { price: '5000000', priceCurrency: null });
    const clear = await subscription(merchant, { price: '5000000', priceCurrency: null });
    expect(listed.subscriber).toBe(LISTED);

    await stack.service.app.get(SubscriberScreeningConsumer).caughtUp();
    await stack.service.app.get(SubscriptionProjection).caughtUp();
    const flagged = async (id: string) => {
      const res = await fetch(`${stack.url}/subscriptions/${id}`, {
        headers: { authorization: `Bearer ${merchant.api_key}` },
      });
      expect(res.status).toBe(200);
      return ((await res.json()) as { flagged: boolean }).flagged;
    };
    expect(await flagged(listed.subscriptionId)).toBe(true);
    expect(await flagged(clear.subscriptionId)).toBe(false);
    expect(screened).toEqual([
      { path: `/api/v1/address/${LISTED}`, key: API_KEY },
      { path: `/api/v1/address/${clear.subscriber}`, key: API_KEY },
    ]);
  });
});
