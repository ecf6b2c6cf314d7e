import { EVENT_STORE } from '@stablepay/aggregate';
import { computeDepositAddress, toOnChainId } from '@stablepay/contracts';
import type { EventStore } from '@stablepay/event-store';
import { DataSource } from 'typeorm';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { ManualClock } from '@stablepay/util';
import { type EmbeddedStack, startEmbedded } from './embedded';
import { loseKeptAnswer } from './test-support/idempotency';

/**
 * One-time checkouts and payments through the HTTP API (issue 10, the service and HTTP surface): POST /checkouts
 * with every rule, the deposit address, GET /checkouts[/:id], POST /checkouts/:id/cancel, GET /payments[/:id],
 * pagination and filters, Idempotency-Key, merchant isolation and the public hosted status read, on the embedded
 * stack (real Postgres or PGlite, commands through the in-process transport, projection through the bus).
 */
const ADMIN_TOKEN = 'admin-token-for-tests-0123456789';
const FACTORY = '0x1234567890AbcdEF1234567890aBcdef12345678';
const HOSTED_URL = 'https://pay.example.test';
const BASE = 'eip155:8453';
const POLYGON = 'eip155:137';
const clock = new ManualClock('2026-06-01T10:00:00.000Z');

type Json = Record<string, unknown>;

function str(value: unknown): string {
  if (typeof value !== 'string') throw new Error(`expected a string, got ${JSON.stringify(value)}`);
  return value;
}
function arr(value: unknown): Json[] {
  if (!Array.isArray(value)) throw new Error(`expected an array, got ${JSON.stringify(value)}`);
  return value as Json[];
}

describe('checkouts and payments through the HTTP API (embedded stack)', () => {
  let db: TestDatabase;
  let stack: EmbeddedStack;
  let key: string;
  let merchantId: string;
  let otherKey: string;
  let store: EventStore;

  const call = async (
    method: string,
    path: string,
    body?: unknown,
    apiKey: string | null = key,
    headers: Record<string, string> = {},
  ) => {
    const res = await fetch(`${stack.url}${path}`, {
      method,
      headers: {
        ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}),
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        ...headers,
      },
      ...(body !== undefined ? { body: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    return { status: res.status, body: text ? (JSON.parse(text) as Json) : {}, headers: res.headers };
  };
  const create = (body: unknown, apiKey = key) => call('POST', '/checkouts', body, apiKey);
  const paymentEvents = async () => (await store.readAll({ categories: ['payment'] })).length;

  const newMerchant = async (name: string) => {
    const res = await fetch(`${stack.url}/admin/merchants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name, mode: 'test', settlement_mode: 'crypto' }),
    });
    const body = (await res.json()) as Json;
    return { id: str(body['id']), key: str(body['api_key']) };
  };

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
        PAYMENT_EXPIRY_POLL_MS: '50',
      },
      dataDir: 'memory',
      clock,
    });
    const a = await newMerchant('Acme Store');
    key = a.key;
    merchantId = a.id;
    otherKey = (await newMerchant('Other Store')).key;
    store = stack.service.app.get<symbol, EventStore>(EVENT_STORE);
  });

  afterAll(async () => {
    await stack?.stop();
    await db?.drop();
  });

  it('creates a checkout whose payment is readable at once, with the deposit address of its deposit contract', async () => {
    const res = await create({
      amount: '12500000',
      currency: 'usd',
      metadata: { order_id: 'o-1' },
      success_url: 'https://shop.example/ok',
      cancel_url: 'https://shop.example/cancel',
    });
    expect(res.status).toBe(201);
    const checkout = res.body;
    const id = str(checkout['id']);
    const paymentId = str(checkout['payment_id']);
    expect(id).toMatch(/^chk_[0-9a-z]{26}$/);
    expect(paymentId).toMatch(/^pay_[0-9a-z]{26}$/);
    const depositAddress = computeDepositAddress(FACTORY, toOnChainId(merchantId), toOnChainId(paymentId));
    expect(checkout).toMatchObject({
      object: 'checkout',
      status: 'pending',
      amount: '12500000',
      currency: 'USD',
      method: 'DIRECT',
      deposit_address: depositAddress,
      checkout_url: `${HOSTED_URL}/pay/${id}`,
      success_url: 'https://shop.example/ok',
      cancel_url: 'https://shop.example/cancel',
      metadata: { order_id: 'o-1' },
      created_at: '2026-06-01T10:00:00.000Z',
      expires_at: '2026-06-01T11:00:00.000Z',
    });
    // Every supported chain (the registry's five without local chains) and each USD stablecoin on it.
    expect(arr(checkout['accepted_chains'])).toHaveLength(5);
    expect(arr(checkout['accepted_assets'])).toContainEqual({
      asset: `${BASE}/erc20:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913`,
      chain: BASE,
      token_symbol: 'USDC',
      token_amount: '12500000',
      token_amount_decimal: '12.5',
    });

    expect((await call('GET', `/checkouts/${id}`)).body).toEqual(checkout);
    const payment = await call('GET', `/payments/${paymentId}`);
    expect(payment.status).toBe(200);
    expect(payment.body).toEqual({
      id: paymentId,
      object: 'payment',
      checkout_id: id,
      status: 'pending',
      method: 'DIRECT',
      amount: '12500000',
      amount_paid: '0',
      currency: 'USD',
      detected_asset: null,
      detected_token_symbol: null,
      detected_chain: null,
      token_amount: null,
      token_amount_decimal: null,
      on_chain_id: toOnChainId(paymentId),
      deposit_address: depositAddress,
      deploy_tx_hash: null,
      deploy_hold_reason: null,
      payer_addresses: [],
      payer_status: null,
      payer_final_at: null,
      transactions: [],
      non_funding_transactions_count: 0,
      recovered_amounts: [],
      rescued_amounts: [],
      amount_captured: '0',
      amount_refunded: '0',
      authorization_expires_at: null,
      expires_at: '2026-06-01T11:00:00.000Z',
      metadata: { order_id: 'o-1' },
      settlement_status: null,
      settlement_exposure: null,
      created_at: '2026-06-01T10:00:00.000Z',
      updated_at: '2026-06-01T10:00:00.000Z',
    });
  });

  it('narrows accepted chains and tokens, and a TWO_STEP checkout keeps its authorization period', async () => {
    const res = await create({
      amount: '1000000',
      currency: 'USD',
      method: 'TWO_STEP',
      accepted_chains: [POLYGON],
      accepted_tokens: ['usdt'],
      expires_in: 300,
      authorization_period: 3600,
    });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      method: 'TWO_STEP',
      accepted_chains: [POLYGON],
      expires_at: '2026-06-01T10:05:00.000Z',
    });
    expect(arr(res.body['accepted_assets']).map((a) => [a['chain'], a['token_symbol']])).toEqual([
      [POLYGON, 'USDT'],
    ]);
  });

  it.each([
    ['amount is required', { currency: 'USD' }, 'amount'],
    ['amount as a number', { amount: 12, currency: 'USD' }, 'amount'],
    ['amount with a decimal point', { amount: '12.50', currency: 'USD' }, 'amount'],
    ['amount with a leading zero', { amount: '012', currency: 'USD' }, 'amount'],
    ['amount zero', { amount: '0', currency: 'USD' }, 'amount'],
    ['amount of 25 digits', { amount: '1'.repeat(25), currency: 'USD' }, 'amount'],
    ['currency is required', { amount: '100' }, 'currency'],
    ['currency of two letters', { amount: '100', currency: 'US' }, 'currency'],
    ['an unknown method', { amount: '100', currency: 'USD', method: 'ONE_STEP' }, 'method'],
    [
      'accepted_chains not an array',
      { amount: '100', currency: 'USD', accepted_chains: BASE },
      'accepted_chains',
    ],
    ['accepted_chains empty', { amount: '100', currency: 'USD', accepted_chains: [] }, 'accepted_chains'],
    ['a malformed chain', { amount: '100', currency: 'USD', accepted_chains: ['base'] }, 'accepted_chains'],
    [
      'an unsupported chain',
      { amount: '100', currency: 'USD', accepted_chains: ['eip155:56'] },
      'accepted_chains',
    ],
    ['a chain twice', { amount: '100', currency: 'USD', accepted_chains: [BASE, BASE] }, 'accepted_chains'],
    [
      'an unsupported token',
      { amount: '100', currency: 'USD', accepted_tokens: ['EURC'] },
      'accepted_tokens',
    ],
    [
      'no token on the chains',
      { amount: '100', currency: 'USD', accepted_chains: [BASE], accepted_tokens: ['USDT'] },
      'accepted_tokens',
    ],
    ['expires_in too short', { amount: '100', currency: 'USD', expires_in: 299 }, 'expires_in'],
    ['expires_in too long', { amount: '100', currency: 'USD', expires_in: 86_401 }, 'expires_in'],
    ['expires_in not an integer', { amount: '100', currency: 'USD', expires_in: 600.5 }, 'expires_in'],
    [
      'authorization_period on DIRECT',
      { amount: '100', currency: 'USD', authorization_period: 3600 },
      'authorization_period',
    ],
    [
      'authorization_period too short',
      { amount: '100', currency: 'USD', method: 'TWO_STEP', authorization_period: 60 },
      'authorization_period',
    ],
    [
      'a metadata value too long',
      { amount: '100', currency: 'USD', metadata: { note: 'x'.repeat(501) } },
      'metadata[note]',
    ],
    ['metadata not an object', { amount: '100', currency: 'USD', metadata: ['a'] }, 'metadata'],
    // Control characters: before, stored as sent (a metadata value keeps tabs and line breaks).
    [
      'a metadata value holding an escape',
      { amount: '100', currency: 'USD', metadata: { note: 'a\u001b[2Jb' } },
      'metadata[note]',
    ],
    [
      'a metadata key holding a C1 control',
      { amount: '100', currency: 'USD', metadata: { 'k\u0085': 'v' } },
      'metadata',
    ],
    [
      'cancel_url holding a line feed',
      { amount: '100', currency: 'USD', cancel_url: 'https://x.example/\nback' },
      'cancel_url',
    ],
    [
      'success_url not http(s)',
      { amount: '100', currency: 'USD', success_url: 'ftp://x.example' },
      'success_url',
    ],
    ['cancel_url relative', { amount: '100', currency: 'USD', cancel_url: '/back' }, 'cancel_url'],
    ['an unknown field', { amount: '100', currency: 'USD', customer: 'c' }, 'customer'],
  ])('refuses %s with 400 naming the param, and writes nothing', async (_name, body, param) => {
    const before = await paymentEvents();
    const res = await create(body);
    expect(res.status).toBe(400);
    expect(res.body['error']).toMatchObject({ type: 'validation_error', param });
    expect(await paymentEvents()).toBe(before);
  });

  it('refuses a currency no supported stablecoin is pegged to with 422 currency_not_supported', async () => {
    const res = await create({ amount: '100', currency: 'EUR' });
    expect(res.status).toBe(422);
    expect(res.body['error']).toMatchObject({
      type: 'cannot_process',
      code: 'currency_not_supported',
      param: 'currency',
    });
  });

  it('refuses a checkout of a fiat-settled business without a complete settlement configuration (422)', async () => {
    const res = await fetch(`${stack.url}/admin/merchants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Fiat Store', mode: 'test', settlement_mode: 'fiat' }),
    });
    const fiatKey = str(((await res.json()) as Json)['api_key']);
    const refused = await create({ amount: '100', currency: 'USD' }, fiatKey);
    expect(refused.status).toBe(422);
    expect(refused.body['error']).toMatchObject({ type: 'cannot_process', code: 'fiat_settlement_required' });
  });

  it('answers a retried create with the same Idempotency-Key with the same checkout, appending once', async () => {
    const body = { amount: '5000000', currency: 'USD' };
    const before = await paymentEvents();
    const first = await call('POST', '/checkouts', body, key, { 'idempotency-key': 'order-77' });
    const again = await call('POST', '/checkouts', body, key, { 'idempotency-key': 'order-77' });
    expect(first.status).toBe(201);
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body['id']).toBe(first.body['id']);
    expect(await paymentEvents()).toBe(before + 1);
    // The same key with other parameters is refused.
    const other = await call('POST', '/checkouts', { ...body, amount: '6000000' }, key, {
      'idempotency-key': 'order-77',
    });
    expect(other.status).toBe(400);
    expect(other.body['error']).toMatchObject({ code: 'idempotency_key_reused' });
  });

  it('a key used again after its 24 hours makes a new checkout, not the old one answered as a new 201', async () => {
    const body = { amount: '5100000', currency: 'USD' };
    const headers = { 'idempotency-key': 'order-reused-next-day' };
    const first = await call('POST', '/checkouts', body, key, headers);
    expect(first.status).toBe(201);
    // A day passes for the key alone (the checkouts' own clock stays, so nothing else expires).
    await stack.service.app
      .get(DataSource)
      .query(`UPDATE idempotency_keys SET created_at = created_at - interval '25 hours' WHERE key = $1`, [
        headers['idempotency-key'],
      ]);
    const before = await paymentEvents();
    const next = await call('POST', '/checkouts', body, key, headers);
    expect([next.status, next.headers.get('idempotent-replayed')]).toEqual([201, null]);
    expect(next.body['id']).not.toBe(first.body['id']);
    expect(next.body['payment_id']).not.toBe(first.body['payment_id']);
    expect(await paymentEvents()).toBeGreaterThan(before);
    // Its retry is a replay of the new one.
    const retry = await call('POST', '/checkouts', body, key, headers);
    expect([retry.status, retry.headers.get('idempotent-replayed'), retry.body['id']]).toEqual([
      201,
      'true',
      next.body['id'],
    ]);
  });

  it('cancels a pending checkout: checkout and payment cancelled; a second cancel is 409', async () => {
    const created = await create({ amount: '2000000', currency: 'USD' });
    const id = str(created.body['id']);
    const cancelled = await call('POST', `/checkouts/${id}/cancel`);
    expect(cancelled.status).toBe(200);
    expect(cancelled.body).toMatchObject({ id, status: 'cancelled' });
    const payment = await call('GET', `/payments/${str(created.body['payment_id'])}`);
    expect(payment.body['status']).toBe('cancelled');
    const again = await call('POST', `/checkouts/${id}/cancel`);
    expect(again.status).toBe(409);
    expect(again.body['error']).toMatchObject({ code: 'checkout_not_pending' });
    const withBody = await call('POST', `/checkouts/${id}/cancel`, { reason: 'x' });
    expect(withBody.status).toBe(400);
    expect(withBody.body['error']).toMatchObject({ type: 'validation_error', param: 'reason' });
  });

  it('a keyed cancel whose process died before keeping its answer answers the retry with the cancelled checkout, not 409', async () => {
    const id = str((await create({ amount: '2000000', currency: 'USD' })).body['id']);
    const keyed = { 'idempotency-key': 'cancel-answer-lost' };
    const cancelled = await call('POST', `/checkouts/${id}/cancel`, undefined, key, keyed);
    expect(cancelled.status).toBe(200);
    const events = await paymentEvents();
    await loseKeptAnswer(stack, 'cancel-answer-lost');
    const retried = await call('POST', `/checkouts/${id}/cancel`, undefined, key, keyed);
    expect([retried.status, retried.headers.get('idempotent-replayed')]).toEqual([200, null]);
    expect(retried.body).toEqual(cancelled.body);
    expect(await paymentEvents()).toBe(events);
  });

  it('keeps merchants apart: another merchant cannot read, list or cancel a checkout or its payment', async () => {
    const created = await create({ amount: '3000000', currency: 'USD' });
    const id = str(created.body['id']);
    const paymentId = str(created.body['payment_id']);
    expect((await call('GET', `/checkouts/${id}`, undefined, otherKey)).status).toBe(404);
    expect((await call('GET', `/payments/${paymentId}`, undefined, otherKey)).status).toBe(404);
    expect((await call('POST', `/checkouts/${id}/cancel`, undefined, otherKey)).status).toBe(404);
    const otherList = await call('GET', '/checkouts?limit=100', undefined, otherKey);
    expect(arr(otherList.body['data'])).toHaveLength(0);
    const otherPayments = await call('GET', `/payments?starting_after=${paymentId}`, undefined, otherKey);
    expect(otherPayments.status).toBe(400);
    expect(otherPayments.body['error']).toMatchObject({ code: 'resource_missing', param: 'starting_after' });
    // Still pending for its owner.
    expect((await call('GET', `/checkouts/${id}`)).body['status']).toBe('pending');
    expect((await call('GET', '/checkouts/chk_nope')).status).toBe(404);
    expect((await call('GET', '/payments/pay_nope')).status).toBe(404);
    expect((await call('GET', `/checkouts/${id}`, undefined, null)).status).toBe(401);
  });

  it("keeps modes apart: a checkout and payment of the other mode are unknown to the key's mode", async () => {
    const created = await create({ amount: '4000000', currency: 'USD' });
    const id = str(created.body['id']);
    const paymentId = str(created.body['payment_id']);
    // The merchant's rows of its other mode (the exports, subscriptions and ledger reads already scope by mode).
    const data = stack.service.app.get(DataSource);
    await data.query(`UPDATE checkouts SET mode = 'live' WHERE id = $1`, [id]);
    await data.query(`UPDATE payments SET mode = 'live' WHERE id = $1`, [paymentId]);
    try {
      expect((await call('GET', `/checkouts/${id}`)).status).toBe(404);
      expect((await call('GET', `/payments/${paymentId}`)).status).toBe(404);
      const status = `/payment-requests/payments/${paymentId}/status`;
      expect((await call('GET', status, undefined, null, { 'x-api-key': key })).status).toBe(404);
      expect((await call('POST', `/checkouts/${id}/cancel`)).status).toBe(404);
      const checkouts = arr((await call('GET', '/checkouts?limit=100')).body['data']);
      expect(checkouts.map((c) => c['id'])).not.toContain(id);
      const payments = arr((await call('GET', '/payments?limit=100')).body['data']);
      expect(payments.map((p) => p['id'])).not.toContain(paymentId);
      const after = await call('GET', `/payments?starting_after=${paymentId}`);
      expect(after.status).toBe(400);
      expect(after.body['error']).toMatchObject({ code: 'resource_missing', param: 'starting_after' });
    } finally {
      await data.query(`UPDATE checkouts SET mode = 'test' WHERE id = $1`, [id]);
      await data.query(`UPDATE payments SET mode = 'test' WHERE id = $1`, [paymentId]);
    }
    // Back in the key's mode, the same rows are its own.
    expect((await call('GET', `/payments/${paymentId}`)).status).toBe(200);
  });

  it('lists checkouts and payments newest first with SPEC pagination and the documented filters', async () => {
    const { key: k } = await newMerchant('Paging Store');
    const ids: Array<{ id: string; paymentId: string }> = [];
    for (const amount of ['1000000', '2000000', '3000000']) {
      const r = await create(
        { amount, currency: 'USD', method: amount === '2000000' ? 'TWO_STEP' : 'DIRECT' },
        k,
      );
      ids.push({ id: str(r.body['id']), paymentId: str(r.body['payment_id']) });
    }
    const [c1, c2, c3] = ids as [(typeof ids)[0], (typeof ids)[0], (typeof ids)[0]];
    expect((await call('POST', `/checkouts/${c1.id}/cancel`, undefined, k)).status).toBe(200);

    const first = await call('GET', '/checkouts?limit=2', undefined, k);
    expect(arr(first.body['data']).map((r) => r['id'])).toEqual([c3.id, c2.id]);
    expect(first.body).toMatchObject({ object: 'list', has_more: true });
    const next = await call('GET', `/checkouts?limit=2&starting_after=${c2.id}`, undefined, k);
    expect(arr(next.body['data']).map((r) => r['id'])).toEqual([c1.id]);
    expect(next.body['has_more']).toBe(false);
    const back = await call('GET', `/checkouts?limit=1&ending_before=${c1.id}`, undefined, k);
    expect(arr(back.body['data']).map((r) => r['id'])).toEqual([c2.id]);
    expect(back.body['has_more']).toBe(true);
    const both = await call('GET', `/checkouts?starting_after=${c1.id}&ending_before=${c3.id}`, undefined, k);
    expect(both.status).toBe(400);
    expect(both.body['error']).toMatchObject({ type: 'validation_error', param: 'ending_before' });

    const cancelled = await call('GET', '/checkouts?status=cancelled', undefined, k);
    expect(arr(cancelled.body['data']).map((r) => r['id'])).toEqual([c1.id]);
    const byPayment = await call('GET', `/checkouts?payment_id=${c2.paymentId}`, undefined, k);
    expect(arr(byPayment.body['data']).map((r) => r['id'])).toEqual([c2.id]);

    const payments = await call('GET', '/payments', undefined, k);
    expect(arr(payments.body['data']).map((r) => r['id'])).toEqual([
      c3.paymentId,
      c2.paymentId,
      c1.paymentId,
    ]);
    const twoStep = await call('GET', '/payments?method=TWO_STEP', undefined, k);
    expect(arr(twoStep.body['data']).map((r) => r['id'])).toEqual([c2.paymentId]);
    const pending = await call('GET', '/payments?status=pending&limit=1', undefined, k);
    expect(arr(pending.body['data']).map((r) => r['id'])).toEqual([c3.paymentId]);
    expect(pending.body['has_more']).toBe(true);
    const byCheckout = await call('GET', `/payments?checkout_id=${c1.id}`, undefined, k);
    expect(arr(byCheckout.body['data'])[0]).toMatchObject({ id: c1.paymentId, status: 'cancelled' });
    const deposit = str(arr(byCheckout.body['data'])[0]?.['deposit_address']);
    const byAddress = await call('GET', `/payments?deposit_address=${deposit.toLowerCase()}`, undefined, k);
    expect(arr(byAddress.body['data']).map((r) => r['id'])).toEqual([c1.paymentId]);
    const later = await call('GET', '/payments?created[gt]=2026-06-01T10:00:00Z', undefined, k);
    expect(arr(later.body['data'])).toHaveLength(0);

    for (const [path, param] of [
      ['/checkouts?status=settled', 'status'],
      ['/checkouts?payment_id=chk_x', 'payment_id'],
      ['/checkouts?sort=asc', 'sort'],
      ['/payments?status=paid', 'status'],
      ['/payments?method=ONE', 'method'],
      ['/payments?deposit_address=0x12', 'deposit_address'],
      ['/payments?detected_chain=base', 'detected_chain'],
      ['/payments?created[gte]=yesterday', 'created[gte]'],
      ['/payments?limit=0', 'limit'],
    ] as const) {
      const res = await call('GET', path, undefined, k);
      expect({ path, status: res.status, error: res.body['error'] }).toMatchObject({
        path,
        status: 400,
        error: { type: 'validation_error', param },
      });
    }
  });

  it('serves the hosted page its public status: what the page shows and nothing else', async () => {
    const created = await create({
      amount: '7000000',
      currency: 'USD',
      accepted_chains: [BASE],
      metadata: { secret_ref: 'internal' },
    });
    const id = str(created.body['id']);
    const res = await call('GET', `/hosted/pay/${id}/status`, undefined, null);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      object: 'hosted_payment_status',
      checkout_id: id,
      payment_id: created.body['payment_id'],
      status: 'pending',
      payment_status: 'pending',
      amount: '7000000',
      currency: 'USD',
      amount_paid: '0',
      accepted_assets: created.body['accepted_assets'],
      deposit_address: created.body['deposit_address'],
      selected_asset: null,
      detected_asset: null,
      detected_chain: null,
      expires_at: created.body['expires_at'],
      success_url: null,
      cancel_url: null,
      business_name: 'Acme Store',
      background_color: null,
      primary_color: null,
    });
    expect((await call('GET', '/hosted/pay/chk_unknown/status', undefined, null)).status).toBe(404);
    expect(
      (await call('GET', '/hosted/pay/chk_00000000000000000000000000/status', undefined, null)).status,
    ).toBe(404);
  });
});
