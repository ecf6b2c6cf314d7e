import { type EmbeddedStack, startEmbedded } from './embedded';

/**
 * A newcomer's first load test: `npm start` on its embedded default (PGlite, no DATABASE_URL) takes 64 concurrent
 * clients creating subscription checkouts with the demo key, and every one of them succeeds.
 */
describe('embedded PGlite under 64 concurrent clients', () => {
  let stack: EmbeddedStack;

  beforeAll(async () => {
    stack = await startEmbedded({
      // Deliberately no DATABASE_URL, whatever the environment of the test run: this is the PGlite default.
      env: { PORT: '0', LOG_LEVEL: 'error', STABLEPAY_LOCAL_CHAINS: 'false', SANDBOX_RATES: 'USD/USDC=1' },
      dataDir: 'memory',
    });
  }, 120_000);
  afterAll(async () => {
    await stack?.stop();
  });

  it('creates 2 x 64 subscription checkouts concurrently without a single error', async () => {
    expect(stack.databaseUrl).toMatch(/^postgres:\/\/postgres:postgres@127\.0\.0\.1:\d+\/postgres$/);
    for (let round = 0; round < 2; round++) {
      const results = await Promise.all(
        Array.from({ length: 64 }, async (_, i) => {
          const res = await fetch(`${stack.url}/subscription-checkouts`, {
            method: 'POST',
            headers: { authorization: `Bearer ${stack.demoApiKey}`, 'content-type': 'application/json' },
            body: JSON.stringify({ price: String(1000 + i), price_currency: 'USD' }),
          }).catch((e: unknown) => ({ status: 0, text: async () => String(e) }));
          return { status: res.status, body: res.status === 201 ? '' : await res.text() };
        }),
      );
      expect(results.filter((r) => r.status !== 201)).toEqual([]);
    }
    const list = await fetch(`${stack.url}/subscription-checkouts?limit=100`, {
      headers: { authorization: `Bearer ${stack.demoApiKey}` },
    });
    expect(list.status).toBe(200);
    expect(((await list.json()) as { data: unknown[] }).data).toHaveLength(100);
  }, 300_000);
});
