import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { ManualClock } from '@stablepay/util';
import { Wallet } from 'ethers';
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
      // The demo merchant as npm start gives it: a signer and a pauser, so it may offer subscriptions.
      seedDemoMerchant: true,
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
    // ARS 1,500.00 at 1,185.50 ARS per token: 1.265288907633909742724... -> rounded up in the last unit; the cap
    // (the default budget, 10 times the price) at the rate of that rounded-up price: exactly 10 charges of it.
    expect(dai).toMatchObject({
      token_decimals: 18,
      price_amount: '1265288907633909743',
      cap_amount: '12652889076339097430',
      rate: '1185.50',
    });
    expect(usdc).toMatchObject({
      token_decimals: 6,
      price_amount: '1265289',
      cap_amount: '12652890',
      rate: '1185.50',
    });
  });

  it('refuses a subscription checkout to the merchant, not at Subscribe to the customer: 422 merchant_signer_required, then merchant_pauser_required, until both are set', async () => {
    const admin = await fetch(`${stack.url}/admin/merchants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Not ready yet', mode: 'test' }),
    });
    const apiKey = String(((await admin.json()) as Json)['api_key']);
    const api = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`${stack.url}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${apiKey}`,
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
      return { status: res.status, body: (await res.json()) as Json };
    };
    const intent = () => api('POST', '/subscription-checkouts', { price: '150000', price_currency: 'ARS' });
    const listed = async () => ((await api('GET', '/subscription-checkouts')).body['data'] as Json[]).length;

    const noSigner = await intent();
    expect(noSigner.status).toBe(422);
    expect(noSigner.body['error']).toMatchObject({
      type: 'cannot_process',
      code: 'merchant_signer_required',
      param: 'merchant_signer',
    });
    expect(String((noSigner.body['error'] as Json)['message'])).toContain('POST /settings');

    const signed = await api('POST', '/settings', {
      merchant_signer: Wallet.createRandom().address,
      settlement_address: Wallet.createRandom().address,
    });
    expect(signed.status).toBe(200);
    const noPauser = await intent();
    expect(noPauser.status).toBe(422);
    expect(noPauser.body['error']).toMatchObject({
      type: 'cannot_process',
      code: 'merchant_pauser_required',
      param: 'merchant_pauser',
    });
    expect(String((noPauser.body['error'] as Json)['message'])).toContain('POST /settings/pauser');
    expect(await listed()).toBe(0);

    const pauser = Wallet.createRandom();
    const declaration = await api('GET', '/settings/pauser');
    const declared = await api('POST', '/settings/pauser', {
      merchant_pauser: pauser.address,
      signature: await pauser.signMessage(String(declaration.body['declaration_message'])),
    });
    expect(declared.status).toBe(200);
    expect((await intent()).status).toBe(201);
    expect(await listed()).toBe(1);
  });
});
