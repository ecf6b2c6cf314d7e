import { EVENT_STORE } from '@stablepay/aggregate';
import type { EventStore } from '@stablepay/event-store';
import {
  SubscriptionCheckoutExpiryTimer,
  SubscriptionCheckoutProjection,
  CreateSubscriptionCheckoutHandler,
} from '@stablepay/subscriptions-service';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { ManualClock } from '@stablepay/util';
import { type EmbeddedStack, startEmbedded } from './embedded';

/**
 * Lists page correctly over thousands of intents: SPEC Pagination (newest first, starting_after / ending_before,
 * has_more relative to the direction) walked over HTTP in both directions, with and without filters, while new
 * intents arrive. The intents are created through the service in bulk (createMany: the same rules as the API,
 * appended in parallel on a real server), projected as usual, and a fifth of them expired by the timer.
 */
const ADMIN_TOKEN = 'admin-token-for-tests-0123456789';
const COUNT = 3000;
const clock = new ManualClock('2026-06-01T10:00:00.000Z');
type Json = Record<string, unknown>;

describe('subscription checkout lists over thousands of intents (embedded stack)', () => {
  let db: TestDatabase;
  let stack: EmbeddedStack;
  let key: string;
  /** Every seeded id, newest first (the store's global order, reversed). */
  let newestFirst: string[];
  const expired = new Set<string>();
  const forCustomer = new Set<string>();
  const batchTimes: Date[] = [];

  const get = async (query: string) => {
    const res = await fetch(`${stack.url}/subscription-checkouts${query}`, {
      headers: { authorization: `Bearer ${key}` },
    });
    const body = (await res.json()) as Json;
    if (res.status !== 200) throw new Error(`GET ${query}: ${res.status} ${JSON.stringify(body)}`);
    return { ids: (body['data'] as Json[]).map((r) => String(r['id'])), hasMore: body['has_more'] === true };
  };

  /** Walks forward from the top, then back from the bottom; returns both walks and the page counts. */
  const walk = async (filter: string, limit: number) => {
    const forward: string[] = [];
    let pages = 0;
    let page = await get(`?limit=${limit}${filter}`);
    for (;;) {
      pages += 1;
      forward.push(...page.ids);
      if (!page.hasMore) break;
      expect(page.ids).toHaveLength(limit);
      page = await get(`?limit=${limit}${filter}&starting_after=${forward[forward.length - 1] ?? ''}`);
    }
    // Back from the last page: each ending_before page ends right before the first id of the page after it.
    const backward: string[] = [];
    let first = forward.slice(-limit)[0] ?? '';
    backward.unshift(...forward.slice(-limit));
    for (;;) {
      const before = await get(`?limit=${limit}${filter}&ending_before=${first}`);
      backward.unshift(...before.ids);
      if (!before.hasMore) break;
      expect(before.ids).toHaveLength(limit);
      first = before.ids[0] ?? '';
    }
    return { forward, backward, pages };
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
        SUBSCRIPTION_EXPIRY_POLL_MS: '60000',
      },
      dataDir: 'memory',
      clock,
    });
    const res = await fetch(`${stack.url}/admin/merchants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Bulk Co', mode: 'test' }),
    });
    const merchant = (await res.json()) as Json;
    key = String(merchant['api_key']);
    const owner = { merchantId: String(merchant['id']), mode: 'test' as const };

    // Three batches an hour apart; every third for one customer; every fifth expiring after a minute.
    const app = stack.service.app.get(CreateSubscriptionCheckoutHandler);
    const concurrency = process.env['DATABASE_URL'] ? 16 : 1; // PGlite serves one transaction at a time
    for (let batch = 0; batch < 3; batch++) {
      if (batch > 0) clock.advance(3_600_000);
      const inputs = Array.from({ length: COUNT / 3 }, (_, i) => ({
        price: String(100 + i),
        price_currency: 'ARS',
        expires_in: i % 5 === 0 ? 60 : 86400,
        ...(i % 3 === 0 ? { external_customer_id: 'cus_bulk' } : {}),
      }));
      const ids = await app.createMany(owner, inputs, { origin: stack.url, concurrency });
      ids.forEach((id, i) => {
        if (i % 3 === 0) forCustomer.add(id);
        if (i % 5 === 0) expired.add(id);
      });
    }
    batchTimes.push(...[2, 1, 0].map((back) => new Date(clock.now().getTime() - back * 3_600_000)));
    const projection = stack.service.app.get(SubscriptionCheckoutProjection);
    await projection.caughtUp();
    clock.advance(120_000);
    // The timer expires the due fifth (it also runs on its own; expiring is idempotent either way).
    const timer = stack.service.app.get(SubscriptionCheckoutExpiryTimer);
    for (let expiredNow = await timer.tick(); expiredNow > 0; expiredNow = await timer.tick()) {
      await projection.caughtUp();
    }
    await projection.caughtUp();
    const store = stack.service.app.get<EventStore>(EVENT_STORE);
    const created = (await store.readAll({ categories: ['subscriptionCheckout'] })).filter(
      (e) => e.type === 'SubscriptionCheckoutCreated.v2',
    );
    newestFirst = created.map((e) => (e.data as { id: string }).id).reverse();
    expect(newestFirst).toHaveLength(COUNT);
    expect(expired.size).toBe(COUNT / 5);
  }, 300_000);

  afterAll(async () => {
    await stack?.stop();
    await db?.drop();
  });

  it('walks every intent forward and back, newest first, 100 a page, with has_more relative to the direction', async () => {
    const { forward, backward, pages } = await walk('', 100);
    expect(pages).toBe(COUNT / 100);
    expect(forward).toEqual(newestFirst);
    expect(backward).toEqual(newestFirst);
    expect(new Set(forward).size).toBe(COUNT);
    // Nothing before the newest, nothing after the oldest.
    expect(await get(`?ending_before=${newestFirst[0] ?? ''}`)).toEqual({ ids: [], hasMore: false });
    expect(await get(`?starting_after=${newestFirst[COUNT - 1] ?? ''}`)).toEqual({ ids: [], hasMore: false });
    // The default page is 10.
    expect((await get('')).ids).toEqual(newestFirst.slice(0, 10));
  });

  it('pages the filtered lists the same way (status, external_customer_id, created range)', async () => {
    const expiredWalk = await walk('&status=expired', 100);
    expect(expiredWalk.forward).toEqual(newestFirst.filter((id) => expired.has(id)));
    expect(expiredWalk.backward).toEqual(expiredWalk.forward);
    const customerWalk = await walk('&external_customer_id=cus_bulk&status=pending', 37);
    expect(customerWalk.forward).toEqual(newestFirst.filter((id) => forCustomer.has(id) && !expired.has(id)));
    expect(customerWalk.backward).toEqual(customerWalk.forward);
    // The middle batch alone: created exactly at its time (inclusive bounds, ISO 8601 and Unix seconds).
    const middle = batchTimes[1] ?? new Date(0);
    const rangeWalk = await walk(
      `&created[gte]=${middle.toISOString()}&created[lte]=${middle.getTime() / 1000}`,
      100,
    );
    expect(rangeWalk.forward).toEqual(newestFirst.slice(COUNT / 3, (2 * COUNT) / 3));
    expect(rangeWalk.backward).toEqual(rangeWalk.forward);
  });

  it('keeps pages stable while new intents arrive at the head', async () => {
    const first = await get('?limit=100');
    clock.advance(1000);
    const fresh = await fetch(`${stack.url}/subscription-checkouts`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ price: '100', price_currency: 'ARS' }),
    });
    const freshId = String(((await fresh.json()) as Json)['id']);
    const second = await get(`?limit=100&starting_after=${first.ids[99] ?? ''}`);
    expect([...first.ids, ...second.ids]).toEqual(newestFirst.slice(0, 200));
    const top = await get(`?limit=5&ending_before=${newestFirst[0] ?? ''}`);
    expect(top).toEqual({ ids: [freshId], hasMore: false });
  });
});
