import { verifyWebhook } from '@stablepay/merchant-sdk';
import type { TestDatabase } from '@stablepay/testing';
import { createWebhookTestDatabase as createTestDatabase } from './testing/webhook-test-database';
import { ManualClock, MINUTE } from '@stablepay/util';
import { TestReceiver } from './testing/test-receiver';
import { startWebhookStack, type WebhookStack } from './testing/webhook-stack';

/**
 * The gateway's webhook routes over HTTP (API-key guard, error envelope): GET /merchants/:merchantId/webhook-events
 * (SPEC Pagination, filters), one event with its attempts, manual redelivery, POST /settings/webhook/test, and the
 * PATCH /settings selection check against the event catalogue.
 */
const clock = new ManualClock('2026-10-01T12:00:00.000Z');

function str(value: unknown): string {
  if (typeof value !== 'string') throw new Error(`expected a string, got ${JSON.stringify(value)}`);
  return value;
}

function ids(body: Record<string, unknown>): string[] {
  const data = body['data'];
  if (!Array.isArray(data)) throw new Error('no data array');
  return data.map((row: unknown) => str((row as Record<string, unknown>)['id']));
}

describe('webhook event routes (HTTP)', () => {
  let db: TestDatabase;
  let stack: WebhookStack;
  const receiver = new TestReceiver();
  let merchantId: string;
  let apiKey: string;
  let secret: string;
  /** Newest first, as the list returns them. */
  let all: string[];

  beforeAll(async () => {
    db = await createTestDatabase();
    await receiver.start();
    stack = await startWebhookStack({
      databaseUrl: db.url,
      clock,
      dispatch: { pollIntervalMs: 60_000, policy: { jitterRatio: 0 } },
    });
    ({ merchantId, apiKey } = await stack.createMerchant('Lister'));
    secret = str(
      await stack.configureWebhook(merchantId, receiver.url('/list'), [
        'subscription.charge_succeeded',
        'payment.settled',
      ]),
    );
    receiver.script(
      '/list',
      { kind: 'status', status: 204 },
      { kind: 'status', status: 500 },
      { kind: 'status', status: 204 },
    );
    // 5 charge events (one fails once) and 2 settled events (one type unselected) = 7 webhook events... plus 1 payment.settled.
    for (let i = 0; i < 5; i++) {
      await stack.emit(merchantId, 'TestChargeSucceeded.v1', {
        chargeId: `subc_l${i}`,
        amount: String(i + 1),
      });
      clock.advance(1000);
    }
    await stack.emit(merchantId, 'TestSettled.v1', { chargeId: 'subc_ls', amount: '9' });
    await stack.settle();
    const listed = await stack.api('GET', `/merchants/${merchantId}/webhook-events?limit=100`, apiKey);
    all = ids(listed.body);
  });

  afterAll(async () => {
    await stack?.stop();
    await receiver.stop();
    await db?.drop();
  });

  it('lists every event newest first with its delivery fields', async () => {
    const res = await stack.api('GET', `/merchants/${merchantId}/webhook-events`, apiKey);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ object: 'list', has_more: false });
    expect(all).toHaveLength(7);
    const rows = res.body['data'] as Array<Record<string, unknown>>;
    const oldest = rows[rows.length - 1];
    expect(oldest).toEqual({
      id: all[6],
      object: 'webhook_event',
      type: 'subscription.charge_succeeded',
      created_at: '2026-10-01T12:00:00.000Z',
      data: {
        object: { object: 'subscription', id: '0xsub', amount: '1' },
        charge: { object: 'subscription_charge', id: 'subc_l0', amount: '1', status: 'succeeded' },
      },
      delivery_status: 'delivered',
      attempt_count: 1,
      // The manual clock moves a second per emitted event; a loaded machine may deliver a few of them late.
      last_attempt_at: expect.stringMatching(/^2026-10-01T12:00:\d\d\.000Z$/),
      last_response_status: 204,
      last_error: null,
      next_attempt_at: null,
    });
    expect(rows.map((r) => r['delivery_status']).sort()).toEqual([
      'delivered',
      'delivered',
      'delivered',
      'delivered',
      'delivered',
      'failed',
      'not_selected',
    ]);
    const failed = rows.find((r) => r['delivery_status'] === 'failed');
    expect(failed).toMatchObject({
      attempt_count: 1,
      last_response_status: 500,
      last_error: 'http_status',
      next_attempt_at: expect.any(String),
    });
  });

  it('pages with limit, starting_after and ending_before (SPEC Pagination)', async () => {
    const first = await stack.api('GET', `/merchants/${merchantId}/webhook-events?limit=3`, apiKey);
    expect(ids(first.body)).toEqual(all.slice(0, 3));
    expect(first.body['has_more']).toBe(true);
    const second = await stack.api(
      'GET',
      `/merchants/${merchantId}/webhook-events?limit=3&starting_after=${all[2]}`,
      apiKey,
    );
    expect(ids(second.body)).toEqual(all.slice(3, 6));
    expect(second.body['has_more']).toBe(true);
    const last = await stack.api(
      'GET',
      `/merchants/${merchantId}/webhook-events?limit=3&starting_after=${all[5]}`,
      apiKey,
    );
    expect(ids(last.body)).toEqual(all.slice(6));
    expect(last.body['has_more']).toBe(false);
    const back = await stack.api(
      'GET',
      `/merchants/${merchantId}/webhook-events?limit=2&ending_before=${all[3]}`,
      apiKey,
    );
    expect(ids(back.body)).toEqual(all.slice(1, 3));
    expect(back.body['has_more']).toBe(true);
    const both = await stack.api(
      'GET',
      `/merchants/${merchantId}/webhook-events?starting_after=${all[0]}&ending_before=${all[1]}`,
      apiKey,
    );
    expect(both.status).toBe(400);
    expect(both.body).toMatchObject({ error: { type: 'validation_error', param: 'ending_before' } });
  });

  it('filters by type and by delivery status', async () => {
    const settled = await stack.api(
      'GET',
      `/merchants/${merchantId}/webhook-events?type=payment.settled`,
      apiKey,
    );
    expect((settled.body['data'] as unknown[]).length).toBe(1);
    const unselected = await stack.api(
      'GET',
      `/merchants/${merchantId}/webhook-events?delivery_status=not_selected`,
      apiKey,
    );
    expect(unselected.body['data']).toEqual([
      expect.objectContaining({ type: 'subscription.charge_settled', last_error: 'event_type_not_selected' }),
    ]);
    const both = await stack.api(
      'GET',
      `/merchants/${merchantId}/webhook-events?type=subscription.charge_succeeded&delivery_status=delivered&limit=2`,
      apiKey,
    );
    expect(ids(both.body)).toHaveLength(2);
    expect(both.body['has_more']).toBe(true);
  });

  it.each([
    ['delivery_status=lost', 'delivery_status'],
    ['type=payment.exploded', 'type'],
    ['colour=red', 'colour'],
    ['limit=0', 'limit'],
  ])('refuses %s with 400 validation_error', async (query, param) => {
    const res = await stack.api('GET', `/merchants/${merchantId}/webhook-events?${query}`, apiKey);
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ error: { type: 'validation_error', param } });
  });

  it("another merchant's list and events are 404; no key is 401", async () => {
    const other = await stack.createMerchant('Other');
    const res = await stack.api('GET', `/merchants/${merchantId}/webhook-events`, other.apiKey);
    expect(res.status).toBe(404);
    const one = await stack.api(
      'GET',
      `/merchants/${other.merchantId}/webhook-events/${all[0]}`,
      other.apiKey,
    );
    expect(one.status).toBe(404);
    const anon = await fetch(`${stack.url}/merchants/${merchantId}/webhook-events`);
    expect(anon.status).toBe(401);
  });

  it('shows one event with its attempts', async () => {
    const failedId = str(
      (
        (await stack.api('GET', `/merchants/${merchantId}/webhook-events?delivery_status=failed`, apiKey))
          .body['data'] as Array<Record<string, unknown>>
      )[0]?.['id'],
    );
    const res = await stack.api('GET', `/merchants/${merchantId}/webhook-events/${failedId}`, apiKey);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      id: failedId,
      delivery_status: 'failed',
      attempts: [
        {
          object: 'webhook_delivery_attempt',
          attempt_number: 1,
          trigger: 'scheduled',
          response_status: 500,
          error: 'http_status',
          url: receiver.url('/list'),
        },
      ],
    });
  });

  it('redelivers one event on request: 202 now, delivered by the dispatcher, schedule untouched', async () => {
    const unselected = (
      (await stack.api('GET', `/merchants/${merchantId}/webhook-events?delivery_status=not_selected`, apiKey))
        .body['data'] as Array<Record<string, unknown>>
    )[0];
    const id = str(unselected?.['id']);
    const res = await stack.api('POST', `/merchants/${merchantId}/webhook-events/${id}/redeliver`, apiKey);
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({
      id,
      delivery_status: 'not_selected',
      next_attempt_at: clock.now().toISOString(),
    });
    await stack.settle();
    const delivered = receiver.on('/list').filter((d) => d.headers['x-webhook-id'] === id);
    expect(delivered).toHaveLength(1);
    expect(
      verifyWebhook(delivered[0]?.rawBody ?? '', delivered[0]?.headers ?? {}, secret, { now: clock.now() })
        .valid,
    ).toBe(true);
    const after = await stack.api('GET', `/merchants/${merchantId}/webhook-events/${id}`, apiKey);
    expect(after.body).toMatchObject({
      delivery_status: 'delivered',
      attempt_count: 1,
      attempts: [{ trigger: 'manual', response_status: 204 }],
    });
    const missing = await stack.api(
      'POST',
      `/merchants/${merchantId}/webhook-events/evt_nope/redeliver`,
      apiKey,
    );
    expect(missing.status).toBe(404);
  });

  it('refuses a redelivery or a test delivery sent with parameters (it takes none), sending nothing', async () => {
    const id = all[0] ?? '';
    const before = receiver.on('/list').length;
    const attempts = (await stack.api('GET', `/merchants/${merchantId}/webhook-events/${id}`, apiKey)).body[
      'attempt_count'
    ];
    for (const [path, body] of [
      [`/merchants/${merchantId}/webhook-events/${id}/redeliver`, { force: true }],
      [`/merchants/${merchantId}/webhook-events/${id}/redeliver`, [1]],
      ['/settings/webhook/test', { url: 'https://elsewhere.example' }],
      ['/settings/webhook/test', 'hello'],
    ] as const) {
      const res = await stack.api('POST', path, apiKey, body);
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({
        error: { type: expect.stringMatching(/validation_error|invalid_request/) },
      });
    }
    expect((await stack.api('POST', '/settings/webhook/test', apiKey, { url: 'x' })).body).toMatchObject({
      error: { type: 'validation_error', param: 'url' },
    });
    await stack.settle();
    expect(receiver.on('/list')).toHaveLength(before);
    expect(
      (await stack.api('GET', `/merchants/${merchantId}/webhook-events/${id}`, apiKey)).body['attempt_count'],
    ).toBe(attempts);
  });

  it('bounds manual redelivery to one pending or in flight per event: 50 concurrent requests make one attempt, the others 409', async () => {
    const id = all[1] ?? '';
    const path = `/merchants/${merchantId}/webhook-events/${id}/redeliver`;
    const before = receiver.on('/list').length;
    const attemptsBefore = (await stack.api('GET', `/merchants/${merchantId}/webhook-events/${id}`, apiKey))
      .body['attempt_count'];
    // The first request's attempt is held at the receiver until every other request has been answered.
    receiver.script('/list', { kind: 'held', status: 204 }, { kind: 'status', status: 204 });
    const answers = await Promise.all(Array.from({ length: 50 }, () => stack.api('POST', path, apiKey)));
    expect(answers.filter((a) => a.status === 202)).toHaveLength(1);
    const refused = answers.filter((a) => a.status !== 202);
    expect(refused).toHaveLength(49);
    for (const r of refused) {
      expect(r.status).toBe(409);
      expect(r.body).toMatchObject({
        error: { type: 'invalid_request', code: 'webhook_redelivery_in_progress' },
      });
    }
    // In flight: still refused.
    await receiver.waitFor(before + 1, '/list');
    expect((await stack.api('POST', path, apiKey)).status).toBe(409);
    receiver.release();
    await stack.settle();
    expect(
      receiver
        .on('/list')
        .slice(before)
        .map((d) => d.headers['x-webhook-id']),
    ).toEqual([id]);
    const after = await stack.api('GET', `/merchants/${merchantId}/webhook-events/${id}`, apiKey);
    expect(after.body['attempt_count']).toBe(Number(attemptsBefore) + 1);
    // Once written back, the next request makes the next attempt.
    expect((await stack.api('POST', path, apiKey)).status).toBe(202);
    await stack.settle();
    expect(receiver.on('/list')).toHaveLength(before + 2);
  });

  describe('POST /settings/webhook/test', () => {
    it('sends a signed subscription.charge_succeeded with livemode false and reports the receiver status', async () => {
      const before = receiver.on('/list').length;
      const res = await stack.api('POST', '/settings/webhook/test', apiKey);
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({
        object: 'webhook_test_delivery',
        type: 'subscription.charge_succeeded',
        delivered: true,
        response_status: 204,
        error: null,
        url: receiver.url('/list'),
      });
      const sent = receiver.on('/list')[before];
      if (!sent) throw new Error('no test delivery');
      const event = JSON.parse(sent.rawBody.toString('utf8')) as Record<string, unknown>;
      expect(event).toMatchObject({
        id: res.body['event_id'],
        object: 'event',
        type: 'subscription.charge_succeeded',
        livemode: false,
      });
      expect(event['data']).toMatchObject({
        object: { object: 'subscription', subscription_charge_id: expect.any(String) },
        charge: { object: 'subscription_charge' },
      });
      expect(
        verifyWebhook(sent.rawBody, sent.headers, secret, { now: clock.now(), requireTimestamp: true }).valid,
      ).toBe(true);
      // Not part of the event log.
      const listed = await stack.api('GET', `/merchants/${merchantId}/webhook-events?limit=100`, apiKey);
      expect(ids(listed.body)).not.toContain(res.body['event_id']);
    });

    it('reports a failing receiver without failing the request', async () => {
      receiver.script('/list', { kind: 'status', status: 500 }, { kind: 'status', status: 204 });
      const res = await stack.api('POST', '/settings/webhook/test', apiKey);
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ delivered: false, response_status: 500, error: 'http_status' });
    });

    it('is 400 webhook_url_missing when no URL is set', async () => {
      const bare = await stack.createMerchant('Bare');
      const res = await stack.api('POST', '/settings/webhook/test', bare.apiKey);
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({
        error: { type: 'invalid_request', code: 'webhook_url_missing', param: 'webhook_url' },
      });
    });
  });

  describe('PATCH /settings webhook_event_types', () => {
    it('accepts catalogue types (deduplicated) and refuses unknown ones naming the entry', async () => {
      const ok = await stack.api('PATCH', '/settings', apiKey, {
        webhook_event_types: ['payment.settled', 'payment.settled', 'subscription.created'],
      });
      expect(ok.status).toBe(200);
      expect(ok.body['webhook_event_types']).toEqual(['payment.settled', 'subscription.created']);
      const bad = await stack.api('PATCH', '/settings', apiKey, {
        webhook_event_types: ['payment.settled', 'payment.exploded'],
      });
      expect(bad.status).toBe(400);
      expect(bad.body).toMatchObject({
        error: { type: 'validation_error', param: 'webhook_event_types[1]' },
      });
      const all_ = await stack.api('PATCH', '/settings', apiKey, { webhook_event_types: null });
      expect(all_.body['webhook_event_types']).toBeNull();
    });
  });

  it('a failed event is retried on schedule after all this', async () => {
    clock.advance(5 * MINUTE);
    await stack.settle();
    const failed = await stack.api(
      'GET',
      `/merchants/${merchantId}/webhook-events?delivery_status=failed`,
      apiKey,
    );
    expect(failed.body['data']).toEqual([]);
  });
});
