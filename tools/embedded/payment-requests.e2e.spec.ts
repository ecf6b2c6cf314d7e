import { PaymentCommands } from '@stablepay/payments-service';
import { createTestDatabase, requestWithRawHeaders, type TestDatabase } from '@stablepay/testing';
import { type EmbeddedStack, startEmbedded } from './embedded';

/**
 * SPEC Endpoints > Alternate payment-request surface, under `{base_url}/payment-requests`: create (a `url` to send
 * the customer to), configure token and chain, details, status, authenticated by `x-api-key`, over the same Payment
 * aggregate as /checkouts; the older listing's subscription paths answer 410 pointing to subscription checkouts.
 */
const ADMIN_TOKEN = 'admin-token-for-tests-0123456789';
const FACTORY = '0x1234567890AbcdEF1234567890aBcdef12345678';
const HOSTED_URL = 'https://pay.example.test';
const BASE = 'eip155:8453';
const USDC_BASE = `${BASE}/erc20:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913`;
const USDT_POLYGON = 'eip155:137/erc20:0xc2132D05D31c914a87C6611C10748AEb04B58e8F';

type Json = Record<string, unknown>;

describe('the alternate payment-request surface (x-api-key, /payment-requests)', () => {
  let db: TestDatabase;
  let stack: EmbeddedStack;
  let key: string;
  let otherKey: string;
  let merchantId: string;

  const call = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
    const res = await fetch(`${stack.url}${path}`, {
      method,
      headers: { ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    return { status: res.status, body: text ? (JSON.parse(text) as Json) : {} };
  };
  const pr = (method: string, path: string, body?: unknown, apiKey = key) =>
    call(method, `/payment-requests${path}`, body, { 'x-api-key': apiKey });

  beforeAll(async () => {
    db = await createTestDatabase();
    stack = await startEmbedded({
      env: {
        DATABASE_URL: db.url,
        PORT: '0',
        ADMIN_TOKEN,
        LOG_LEVEL: 'error',
        STABLEPAY_LOCAL_CHAINS: 'false',
        PAYMENT_FACTORY_ADDRESS: FACTORY,
        HOSTED_URL,
      },
      dataDir: 'memory',
    });
    const newMerchant = async (name: string) => {
      const res = await call(
        'POST',
        '/admin/merchants',
        { name, mode: 'test', settlement_mode: 'crypto' },
        { authorization: `Bearer ${ADMIN_TOKEN}` },
      );
      return { id: String(res.body['id']), key: String(res.body['api_key']) };
    };
    const a = await newMerchant('Request Store');
    key = a.key;
    merchantId = a.id;
    otherKey = (await newMerchant('Other Store')).key;
  });

  afterAll(async () => {
    await stack?.stop();
    await db?.drop();
  });

  it('creates a payment request answering the url, configures token and chain, and reads details and status', async () => {
    const created = await pr('POST', '/payments/new', {
      amount: '25000000',
      currency: 'USD',
      metadata: { order_id: 'r-1' },
    });
    expect(created.status).toBe(201);
    const id = String(created.body['id']);
    expect(id).toMatch(/^pay_/);
    expect(created.body).toMatchObject({
      object: 'payment_request',
      url: `${HOSTED_URL}/pay/${String(created.body['checkout_id'])}`,
      status: 'pending',
      amount: '25000000',
      currency: 'USD',
      chain: null,
      token: null,
      token_amount: null,
      amount_paid: '0',
      metadata: { order_id: 'r-1' },
    });

    const configured = await pr('POST', `/payments/configure/${id}`, { chain: BASE, token: 'usdc' });
    expect(configured.status).toBe(200);
    expect(configured.body).toMatchObject({ id, chain: BASE, token: 'USDC', token_amount: '25000000' });

    const details = await pr('GET', `/payments/${id}`);
    expect(details.status).toBe(200);
    expect(details.body).toMatchObject({ id, chain: BASE, token: 'USDC' });
    // The same aggregate: the main surface shows the same payment.
    const main = await call('GET', `/payments/${id}`, undefined, { authorization: `Bearer ${key}` });
    expect(details.body['payment']).toEqual(main.body);
    const checkout = await call('GET', `/checkouts/${String(created.body['checkout_id'])}`, undefined, {
      authorization: `Bearer ${key}`,
    });
    expect(checkout.body['selected_asset']).toBe(USDC_BASE);

    expect((await pr('GET', `/payments/${id}/status`)).body).toEqual({
      object: 'payment_request_status',
      id,
      status: 'pending',
      unavailable_reason: null,
      amount_paid: '0',
      detected_asset: null,
      detected_chain: null,
      expires_at: created.body['expires_at'],
      updated_at: configured.body['updated_at'],
    });

    // Once configured, only that asset funds: a transfer of another token on another chain is listed, not counted.
    await stack.service.app.get(PaymentCommands).run(
      { id, merchant_id: merchantId, mode: 'test' },
      {
        type: 'ObserveTransfer',
        transfer: {
          txHash: `0x${'77'.repeat(32)}`,
          logIndex: 0,
          from: '0x1111111111111111111111111111111111111111',
          asset: USDT_POLYGON,
          chain: 'eip155:137',
          amount: '25000000',
          blockNumber: '5',
        },
        blockTime: new Date(),
      },
    );
    const deadline = Date.now() + 10_000;
    let payment: Json = {};
    while (Date.now() < deadline) {
      payment = (await pr('GET', `/payments/${id}`)).body['payment'] as Json;
      if (payment['non_funding_transactions_count'] === 1) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(payment).toMatchObject({
      amount_paid: '0',
      non_funding_transactions_count: 1,
      detected_asset: null,
    });
    expect((await pr('GET', `/payments/${id}/status`)).body['status']).toBe('pending');
  });

  it.each([
    ['a chain the payment does not accept', { chain: 'eip155:56', token: 'USDC' }, 'chain'],
    ['no chain', { token: 'USDC' }, 'chain'],
    ['a token not accepted on the chain', { chain: BASE, token: 'USDT' }, 'token'],
    ['a token of the wrong type', { chain: BASE, token: 6 }, 'token'],
    ['an unknown field', { chain: BASE, token: 'USDC', amount: '1' }, 'amount'],
  ])('refuses to configure %s with 400 naming the param', async (_name, body, param) => {
    const created = await pr('POST', '/payments/new', { amount: '1000000', currency: 'USD' });
    const res = await pr('POST', `/payments/configure/${String(created.body['id'])}`, body);
    expect(res.status).toBe(400);
    expect(res.body['error']).toMatchObject({ type: 'validation_error', param });
  });

  it('refuses a create with a missing amount with 400 naming it', async () => {
    const res = await pr('POST', '/payments/new', { currency: 'USD' });
    expect(res.status).toBe(400);
    expect(res.body['error']).toMatchObject({ type: 'validation_error', param: 'amount' });
  });

  it('takes the key in x-api-key only, and keeps merchants apart', async () => {
    const body = { amount: '1000000', currency: 'USD' };
    expect((await call('POST', '/payment-requests/payments/new', body)).status).toBe(401);
    // The other surface's header is refused with a message naming the header this one takes.
    const bearer = await call('POST', '/payment-requests/payments/new', body, {
      authorization: `Bearer ${key}`,
    });
    expect(bearer.status).toBe(401);
    expect(JSON.stringify(bearer.body)).toContain(
      'takes the API key in the x-api-key header, not Authorization',
    );
    expect((await pr('POST', '/payments/new', body, 'sk_test_notakey0000000000000000000000')).status).toBe(
      401,
    );
    // The main surface does not take x-api-key.
    const xApiKey = await call('GET', '/payments', undefined, { 'x-api-key': key });
    expect(xApiKey.status).toBe(401);
    expect(JSON.stringify(xApiKey.body)).toContain('Send the key on this route as \\"Authorization: Bearer');

    const created = await pr('POST', '/payments/new', body);
    const id = String(created.body['id']);
    expect((await pr('GET', `/payments/${id}`, undefined, otherKey)).status).toBe(404);
    expect((await pr('GET', `/payments/${id}/status`, undefined, otherKey)).status).toBe(404);
    const configure = await pr('POST', `/payments/configure/${id}`, { chain: BASE, token: 'USDC' }, otherKey);
    expect(configure.status).toBe(404);
    expect((await pr('GET', `/payments/${id}`)).body['chain']).toBeNull();
  });

  it('refuses ambiguous credentials with 401 on this surface and the operator API, creating nothing', async () => {
    const url = `${stack.url}/payment-requests/payments/new`;
    const body = { amount: '1000000', currency: 'USD' };
    const refused = (message: RegExp) => ({
      status: 401,
      body: {
        error: expect.objectContaining({
          type: 'authentication_error',
          code: 'invalid_api_key',
          message: expect.stringMatching(message),
        }),
      },
    });
    const payments = async () =>
      (await call('GET', '/payments?limit=100', undefined, { authorization: `Bearer ${key}` })).body['data'];
    const before = await payments();
    expect(await requestWithRawHeaders(url, 'POST', ['X-API-Key', key, 'X-API-Key', otherKey], body)).toEqual(
      refused(/more than one x-api-key header/),
    );
    expect(
      await requestWithRawHeaders(
        url,
        'POST',
        ['X-API-Key', key, 'Authorization', `Bearer ${otherKey}`],
        body,
      ),
    ).toEqual(refused(/different credentials/));
    expect(
      await requestWithRawHeaders(`${stack.url}/admin/parked-streams`, 'GET', [
        'Authorization',
        `Bearer ${ADMIN_TOKEN}`,
        'Authorization',
        `Bearer ${ADMIN_TOKEN}`,
      ]),
    ).toEqual(refused(/more than one Authorization header/));
    expect(await payments()).toEqual(before);
    // One key sent in both headers is one key.
    const same = await requestWithRawHeaders(
      url,
      'POST',
      ['X-API-Key', key, 'Authorization', `Bearer ${key}`],
      body,
    );
    expect(same.status).toBe(201);
  });

  it('answers the older listing subscription paths with 410 pointing to subscription checkouts', async () => {
    for (const [method, path] of [
      ['POST', '/subscriptions'],
      ['GET', '/subscriptions'],
      ['GET', '/subscriptions/sub_123'],
      ['POST', '/subscriptions/sub_123/cancel'],
    ] as const) {
      const res = await pr(method, path, method === 'POST' ? {} : undefined);
      expect({ method, path, status: res.status, error: res.body['error'] }).toMatchObject({
        status: 410,
        error: {
          type: 'invalid_request',
          code: 'subscriptions_use_subscription_checkouts',
          message: expect.stringContaining('POST /subscription-checkouts'),
        },
      });
    }
  });
});
