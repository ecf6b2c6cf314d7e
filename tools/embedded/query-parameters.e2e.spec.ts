import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { type EmbeddedStack, startEmbedded } from './embedded';

/**
 * Unknown parameters (issue 8, section 4): every JSON route refuses a query parameter it does not declare with
 * 400 `validation_error` code `unknown_parameter` naming it, reads of one resource (which take none) and lists (a
 * typo of a filter) alike; before, a read of one resource ignored them. The hosted pages and the probes ignore
 * their query (links to them carry utm_* and the like). An unknown body field gets the same answer, its path
 * named (Stripe's form, fiat[ibn]), on the DTO routes and the hand-written body checks alike.
 */
const ADMIN_TOKEN = 'admin-token-for-query-parameters-0123456789';
const FACTORY = '0x1234567890AbcdEF1234567890aBcdef12345678';
const SUBSCRIPTION_ID = `0x${'ab'.repeat(32)}`;

type Json = Record<string, unknown>;

describe('unknown query parameters (embedded stack)', () => {
  let db: TestDatabase;
  let stack: EmbeddedStack;
  let key: string;
  let merchantId: string;
  let checkoutId: string;
  let paymentId: string;

  const get = async (path: string, headers: Record<string, string> = { authorization: `Bearer ${key}` }) => {
    const res = await fetch(`${stack.url}${path}`, { headers });
    const text = await res.text();
    const json = (res.headers.get('content-type') ?? '').startsWith('application/json');
    return { status: res.status, body: (json && text ? JSON.parse(text) : { text }) as Json };
  };
  const unknown = (param: string) => ({
    status: 400,
    body: {
      error: expect.objectContaining({
        type: 'validation_error',
        code: 'unknown_parameter',
        param,
        message: expect.stringContaining(`Received unknown parameter: ${param} (`),
      }),
    },
  });

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
      },
      dataDir: 'memory',
    });
    const merchant = await fetch(`${stack.url}/admin/merchants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Query Store', mode: 'test', settlement_mode: 'crypto' }),
    });
    const created = (await merchant.json()) as { id: string; api_key: string };
    key = created.api_key;
    merchantId = created.id;
    const checkout = await fetch(`${stack.url}/checkouts`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ amount: '5000000', currency: 'USD' }),
    });
    const body = (await checkout.json()) as { id: string; payment_id: string };
    checkoutId = body.id;
    paymentId = body.payment_id;
  }, 180_000);

  afterAll(async () => {
    await stack?.stop();
    await db?.drop();
  });

  it('refuses an unknown parameter on a read of one resource, which answers without it', async () => {
    expect((await get(`/payments/${paymentId}`)).status).toBe(200);
    expect(await get(`/payments/${paymentId}?expand=checkout`)).toEqual(unknown('expand'));
    expect((await get(`/payments/${paymentId}?expand=checkout`)).body['error']).toMatchObject({
      message: 'Received unknown parameter: expand (this request takes no query parameters).',
    });
    expect(await get(`/checkouts/${checkoutId}?expand[]=payment`)).toEqual(unknown('expand[]'));
    // Several: the first is named.
    expect(await get('/settings?fields=display_name&x=1')).toEqual(unknown('fields'));
    expect((await get('/settings')).status).toBe(200);
  });

  it('refuses it on every JSON read, whatever its authentication, before the resource is looked up', async () => {
    const bearer = { authorization: `Bearer ${key}` };
    for (const [path, headers] of [
      ['/settings/pauser', bearer],
      ['/payments/settlement', bearer],
      ['/subscription-checkouts/schk_00000000000000000000000000', bearer],
      [`/subscriptions/${SUBSCRIPTION_ID}`, bearer],
      [`/merchants/${merchantId}/webhook-events/evt_unknown`, bearer],
      [`/payment-requests/payments/${paymentId}`, { 'x-api-key': key }],
      [`/payment-requests/payments/${paymentId}/status`, { 'x-api-key': key }],
      [`/hosted/pay/${checkoutId}/status`, {}],
      ['/admin/parked-streams', { authorization: `Bearer ${ADMIN_TOKEN}` }],
    ] as const) {
      expect({ path, ...(await get(`${path}?verbose=1`, headers)) }).toEqual({ path, ...unknown('verbose') });
    }
    // Authentication first: a bad key is still 401.
    expect((await get('/settings?verbose=1', {})).status).toBe(401);
  });

  it('refuses a typo of a list parameter naming it and what the list takes, and serves the real ones', async () => {
    expect(await get('/payments?limt=10')).toEqual(unknown('limt'));
    expect((await get('/payments?limt=10')).body['error']).toMatchObject({
      message: expect.stringContaining('(this request takes limit, starting_after, ending_before, status,'),
    });
    expect(await get('/checkouts?staus=pending')).toEqual(unknown('staus'));
    expect(await get('/subscription-checkouts?order=asc')).toEqual(unknown('order'));
    expect(await get(`/merchants/${merchantId}/subscriptions?staus=active`)).toEqual(unknown('staus'));
    expect(await get(`/merchants/${merchantId}/charges?kind=cycle`)).toEqual(unknown('kind'));
    expect(await get(`/merchants/${merchantId}/webhook-events?event_type=payment.settled`)).toEqual(
      unknown('event_type'),
    );

    const listed = await get('/payments?limit=10&status=pending&created[gte]=2026-01-01');
    expect(listed.status).toBe(200);
    expect((listed.body['data'] as Json[]).map((p) => p['id'])).toEqual([paymentId]);
    const checkouts = await get(`/checkouts?limit=1&payment_id=${paymentId}&created[lt]=2999-01-01`);
    expect((checkouts.body['data'] as Json[]).map((c) => c['id'])).toEqual([checkoutId]);
    for (const path of [
      '/subscription-checkouts?limit=5&status=pending&external_customer_id=cus_1&created[gt]=1700000000',
      `/merchants/${merchantId}/subscriptions?limit=5&status=active&chain=eip155:8453`,
      `/merchants/${merchantId}/charges?limit=5&status=failed&charged_from=2026-01-01T00:00:00Z`,
      `/merchants/${merchantId}/webhook-events?limit=5&type=payment.settled&delivery_status=delivered`,
    ]) {
      expect({ path, status: (await get(path)).status }).toEqual({ path, status: 200 });
    }
    // A repeated parameter the list takes reaches the list's own check.
    expect(await get('/payments?status=pending&status=expired')).toEqual({
      status: 400,
      body: { error: expect.objectContaining({ type: 'validation_error', param: 'status' }) },
    });
  });

  it('refuses a chain filter naming no chain Stablepay supports with 400 unsupported_chain on every list and export, and filters by a supported one', async () => {
    const lists: ReadonlyArray<readonly [string, string]> = [
      [`/merchants/${merchantId}/subscriptions`, 'chain'],
      [`/merchants/${merchantId}/charges`, 'chain'],
      ['/payments', 'detected_chain'],
      ['/reports/subscriptions/export', 'chain'],
      ['/reports/subscription-charges/export', 'chain'],
      ['/reports/payments/export', 'detected_chain'],
    ];
    for (const [path, param] of lists) {
      // eip155:8543 is a typo of Base: before, an empty list (an empty export) said "none there".
      expect({ path, ...(await get(`${path}?${param}=eip155:8543`)) }).toEqual({
        path,
        status: 400,
        body: {
          error: {
            type: 'validation_error',
            code: 'unsupported_chain',
            param,
            message: expect.stringContaining(`${param} eip155:8543 is not a chain Stablepay supports`),
          },
        },
      });
      expect({ path, ...(await get(`${path}?${param}=base`)) }).toEqual({
        path,
        status: 400,
        body: { error: expect.objectContaining({ code: 'invalid_caip2', param }) },
      });
      expect({ path, status: (await get(`${path}?${param}=eip155:8453`)).status }).toEqual({
        path,
        status: 200,
      });
    }
  });

  it('takes a date or Unix seconds in every time bound, the charges list and export included, and refuses the rest alike', async () => {
    for (const path of [
      `/merchants/${merchantId}/charges?charged_from=2026-01-01&charged_to=1893456000`,
      '/reports/subscription-charges/export?charged_from=1767225600&charged_to=2030-01-01',
      `/merchants/${merchantId}/subscriptions?created[gte]=2026-01-01&created[lt]=1893456000`,
      '/payments?created[gte]=1767225600&created[lte]=2030-01-01',
    ]) {
      expect({ path, status: (await get(path)).status }).toEqual({ path, status: 200 });
    }
    // One message for the same mistake on every bound.
    for (const [path, param] of [
      [`/merchants/${merchantId}/charges?charged_from=2026-13-01`, 'charged_from'],
      ['/payments?created[gte]=2026-13-01', 'created[gte]'],
    ] as const) {
      expect((await get(path)).body['error']).toMatchObject({
        type: 'validation_error',
        param,
        message: `${param} is not a date and time that exists ("2026-13-01").`,
      });
    }
  });

  it('serves the hosted pages and the probes whatever their query (links carry utm_* and the like)', async () => {
    const page = await get(`/hosted/pay/${checkoutId}?utm_source=newsletter&utm_campaign=june&gclid=x`, {});
    expect(page.status).toBe(200);
    expect(String(page.body['text'])).toContain('<html');
    for (const path of [
      '/hosted/subscribe/schk_00000000000000000000000000?utm_source=x',
      `/hosted/cancel/${SUBSCRIPTION_ID}?utm_source=x`,
    ]) {
      // The not-found page, as without the query.
      expect({ path, status: (await get(path, {})).status }).toEqual({ path, status: 404 });
    }
    expect((await get('/health?probe=1', {})).status).toBe(200);
    expect((await get('/ready?_=1700000000', {})).status).not.toBe(400);
    // The older listing's subscription routes answer the way to go (410), query or not.
    expect((await get('/payment-requests/subscriptions?limit=10', { 'x-api-key': key })).status).toBe(410);
  });

  // An unknown field in a body is answered alike: before, the DTO routes (the validation pipe) and the hand-written
  // body checks answered it without a code, and POST /settings/pauser as `invalid_request`.
  const call = async (method: string, path: string, body: unknown) => {
    const res = await fetch(`${stack.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Json };
  };
  const unknownField = (param: string, message: string) => ({
    status: 400,
    body: { error: { type: 'validation_error', code: 'unknown_parameter', param, message } },
  });

  it('refuses a typo in a DTO route body with code unknown_parameter, the first unknown field named with what the route takes, creating nothing', async () => {
    expect(await call('POST', '/checkouts', { amount: '1', currency: 'USD', amout: '2', x: 1 })).toEqual(
      unknownField(
        'amout',
        'Received unknown parameter: amout (this request takes amount, currency, method, accepted_chains, accepted_tokens, expires_in, authorization_period, metadata, success_url, cancel_url).',
      ),
    );
    expect(((await get('/checkouts')).body['data'] as Json[]).map((c) => c['id'])).toEqual([checkoutId]);

    expect(await call('PATCH', '/settings', { display_name: 'Renamed', dispaly_name: 'x' })).toEqual(
      unknownField(
        'dispaly_name',
        'Received unknown parameter: dispaly_name (this request takes display_name, webhook_url, background_color, primary_color, webhook_event_types).',
      ),
    );
    expect((await get('/settings')).body['display_name']).not.toBe('Renamed');
  });

  it('refuses it alike in the hand-written body checks, nested fields by their bracketed path', async () => {
    expect(await call('PUT', '/payments/settlement', { fiat: { currency: 'EUR', ibn: 'DE89' } })).toEqual(
      unknownField(
        'fiat[ibn]',
        'Received unknown parameter: fiat[ibn] (fiat takes currency, beneficiary_name, bank_name, account_number, bank_code, country).',
      ),
    );
    expect(await call('PUT', '/payments/settlement', { settlement: '0x' })).toEqual(
      unknownField(
        'settlement',
        'Received unknown parameter: settlement (this request takes settlement_address, fiat).',
      ),
    );
    expect(await call('POST', `/checkouts/${checkoutId}/cancel`, { reason: 'duplicate' })).toEqual(
      unknownField('reason', 'Received unknown parameter: reason (this request takes no parameters).'),
    );
    expect((await get(`/checkouts/${checkoutId}`)).body['status']).toBe('pending');
    // It was an invalid_request without a code here.
    expect(await call('POST', '/settings/pauser', { merchant_pauser: '0x', pauser: '0x' })).toEqual(
      unknownField(
        'pauser',
        'Received unknown parameter: pauser (this request takes merchant_pauser, signature, acknowledge_shared_pauser_risk).',
      ),
    );
  });
});
