import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { verifyWebhook } from '@stablepay/merchant-sdk';
import { EVENT_STORE } from '@stablepay/aggregate';
import type { EventStore } from '@stablepay/event-store';
import { SubscriptionCheckoutProjection } from '@stablepay/subscriptions-service';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { type EmbeddedStack, startEmbedded } from './embedded';

/**
 * Issues 4 and 5 together: a subscription checkout's lifecycle events reach the merchant's endpoint as signed
 * `subscription_checkout.*` webhooks, with `data.object` shaped as SPEC's events section says (metadata echoed, no
 * subscription_options).
 */
describe('subscription checkout events are delivered as signed webhooks', () => {
  let db: TestDatabase;
  let stack: EmbeddedStack;
  let receiver: Server;
  let receiverUrl: string;
  const received: Array<{ body: string; headers: IncomingHttpHeaders }> = [];

  beforeAll(async () => {
    receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        received.push({ body: Buffer.concat(chunks).toString('utf8'), headers: req.headers });
        res.writeHead(200).end('ok');
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const address = receiver.address();
    if (address === null || typeof address === 'string') throw new Error('receiver has no port');
    receiverUrl = `http://127.0.0.1:${address.port}/hooks`;
    db = await createTestDatabase();
    stack = await startEmbedded({
      env: {
        DATABASE_URL: db.url,
        PORT: '0',
        LOG_LEVEL: 'error',
        ALLOW_LOCAL_WEBHOOKS: 'true',
        WEBHOOK_POLL_INTERVAL_MS: '100',
      },
      dataDir: 'memory',
      localChains: false,
    });
  });

  afterAll(async () => {
    await stack?.stop();
    await db?.drop();
    await new Promise<void>((resolve) => receiver.close(() => resolve()));
  });

  const api = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${stack.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${stack.demoApiKey}`,
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };

  /** The first webhook of `type` received (about the intent `id` when given). */
  const waitFor = async (type: string, id?: string) => {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const hit = received.find((r) => {
        const event = JSON.parse(r.body) as { type: string; data: { object: { id?: unknown } } };
        return event.type === type && (id === undefined || event.data.object.id === id);
      });
      if (hit) return hit;
      if (Date.now() > deadline)
        throw new Error(
          `no ${type} webhook of ${id ?? 'any intent'}; got ${received.map((r) => r.body).join('\n')}`,
        );
      await new Promise((r) => setTimeout(r, 100));
    }
  };

  it('sends subscription_checkout.created and .cancelled, signed with the merchant secret', async () => {
    const settings = await api('PATCH', '/settings', { webhook_url: receiverUrl });
    if (settings.status !== 200) throw new Error(JSON.stringify(settings.body));
    const secret = settings.body['webhook_secret'];
    if (typeof secret !== 'string') throw new Error('no webhook secret issued');

    const created = await api('POST', '/subscription-checkouts', {
      price: '150000',
      price_currency: 'ARS',
      metadata: { plan_name: 'Pro', crm_ref: 'c-1' },
    });
    expect(created.status).toBe(201);
    const id = created.body['id'];

    const createdHook = await waitFor('subscription_checkout.created');
    expect(verifyWebhook(createdHook.body, createdHook.headers, secret)).toMatchObject({ valid: true });
    const event = JSON.parse(createdHook.body) as {
      id: string;
      object: string;
      data: { object: Record<string, unknown> };
    };
    expect(event.object).toBe('event');
    expect(createdHook.headers['x-webhook-id']).toBe(event.id);
    expect(event.data.object).toMatchObject({
      object: 'subscription_checkout',
      id,
      status: 'pending',
      metadata: { plan_name: 'Pro', crm_ref: 'c-1' },
    });
    expect(event.data.object).not.toHaveProperty('subscription_options');

    expect((await api('PATCH', `/subscription-checkouts/${String(id)}/cancel`)).status).toBe(200);
    const cancelledHook = await waitFor('subscription_checkout.cancelled');
    expect(verifyWebhook(cancelledHook.body, cancelledHook.headers, secret)).toMatchObject({ valid: true });
    expect(
      (JSON.parse(cancelledHook.body) as { data: { object: { status: string } } }).data.object.status,
    ).toBe('cancelled');
  });

  it('an intent stored by the v1 code (snapshot events) still reads, cancels and sends webhooks of its object', async () => {
    // As the previous release stored it: a v1 event carrying the whole object (the API's, less options and colors).
    const template = await api('POST', '/subscription-checkouts', {
      price: '4200',
      price_currency: 'ARS',
      metadata: { plan_name: 'Legacy' },
      external_customer_id: 'cus_v1',
    });
    const {
      subscription_options: _options,
      background_color: _bg,
      primary_color: _primary,
      ...v1Object
    } = template.body;
    const id = 'schk_01kaqz0cw3fqq8v6b1nkxd2m7f';
    const object: Record<string, unknown> = { ...v1Object, id, checkout_url: `${stack.url}/subscribe/${id}` };
    const store = stack.service.app.get<symbol, EventStore>(EVENT_STORE);
    await store.appendToStream(`subscriptionCheckout-${id}`, [
      {
        id: `${id}:created`,
        type: 'SubscriptionCheckoutCreated.v1',
        data: { object },
        metadata: {
          merchantId: stack.demoMerchantId,
          mode: 'test',
          occurredAt: String(object['created_at']),
        },
      },
    ]);
    const hookOf = async (type: string) =>
      JSON.parse((await waitFor(type, id)).body) as { data: { object: Record<string, unknown> } };
    expect((await hookOf('subscription_checkout.created')).data.object).toEqual(object);
    await stack.service.app.get(SubscriptionCheckoutProjection).caughtUp();
    const read = await api('GET', `/subscription-checkouts/${id}`);
    expect(read.body).toMatchObject({
      id,
      status: 'pending',
      metadata: object['metadata'],
      price: object['price'],
    });

    const cancelled = await api('PATCH', `/subscription-checkouts/${id}/cancel`);
    expect(cancelled.status).toBe(200);
    expect(cancelled.body).toMatchObject({ status: 'cancelled', cancellation_reason: 'merchant_cancelled' });
    const cancelledAt = cancelled.body['cancelled_at'];
    expect(typeof cancelledAt).toBe('string');
    expect((await hookOf('subscription_checkout.cancelled')).data.object).toEqual({
      ...object,
      status: 'cancelled',
      cancellation_reason: 'merchant_cancelled',
      cancelled_at: cancelledAt,
      updated_at: cancelledAt,
    });
    // Through the upcaster the stored v1 reads as v2, beside the v2 fact the cancel appended.
    const stored = await store.readStream(`subscriptionCheckout-${id}`);
    expect(stored.map((e) => e.type)).toEqual([
      'SubscriptionCheckoutCreated.v2',
      'SubscriptionCheckoutCancelled.v2',
    ]);
  });
});
