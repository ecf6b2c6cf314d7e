import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { ManualClock } from '@stablepay/util';
import { type EmbeddedStack, startEmbedded } from './embedded';

/**
 * Test mode on local chains: a test merchant's subscription_options list the stablecoins the launcher deployed
 * on the local anvil nodes (runtime addresses, USDC and USDT at 6 decimals, DAI at 18), converted exactly.
 */
const ADMIN_TOKEN = 'admin-token-for-tests-0123456789';
type Json = Record<string, unknown>;

describe('subscription options on the local test chains (embedded stack with anvil)', () => {
  let db: TestDatabase;
  let stack: EmbeddedStack;

  beforeAll(async () => {
    db = await createTestDatabase();
    stack = await startEmbedded({
      env: {
        DATABASE_URL: db.url,
        PORT: '0',
        ADMIN_TOKEN,
        LOG_LEVEL: 'error',
        STABLEPAY_LOCAL_CHAINS: 'true',
        LOCAL_CHAIN_IDS: '8453,137',
      },
      dataDir: 'memory',
      clock: new ManualClock('2026-06-01T10:00:00.000Z'),
    });
  }, 120_000);

  afterAll(async () => {
    await stack?.stop();
    await db?.drop();
  });

  it('offers every local stablecoin at its runtime address, with 6- and 18-decimal amounts rounded up at one rate', async () => {
    const local = stack.chains?.chains ?? [];
    expect(local.map((c) => c.caip2)).toEqual(['eip155:8453', 'eip155:137']);
    const res = await fetch(`${stack.url}/subscription-checkouts`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.demoApiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ price: '150000', price_currency: 'ARS' }),
    });
    const body = (await res.json()) as Json;
    expect(res.status).toBe(201);
    // Every local chain, in the registry's (SPEC) order.
    expect(body['supported_chains']).toEqual(['eip155:137', 'eip155:8453']);
    const options = body['subscription_options'] as Json[];
    const expected = [...local].reverse().flatMap((chain) =>
      chain.stablecoins.map((token) => ({
        chain: chain.caip2,
        token_address: token.address,
        token_symbol: token.symbol,
        token_decimals: token.decimals,
      })),
    );
    expect(
      options.map((o) => ({
        chain: o['chain'],
        token_address: o['token_address'],
        token_symbol: o['token_symbol'],
        token_decimals: o['token_decimals'],
      })),
    ).toEqual(expected);
    const dai = options.find((o) => o['token_symbol'] === 'DAI');
    const usdc = options.find((o) => o['token_symbol'] === 'USDC');
    // ARS 1,500.00 at 1,185.50 ARS per token: 1.265288907633909742724... -> rounded up in the last unit.
    expect(dai).toMatchObject({
      token_decimals: 18,
      price_amount: '1265288907633909743',
      cap_amount: '12652889076339097428',
      rate: '1185.50',
    });
    expect(usdc).toMatchObject({
      token_decimals: 6,
      price_amount: '1265289',
      cap_amount: '12652890',
      rate: '1185.50',
    });
  });
});
