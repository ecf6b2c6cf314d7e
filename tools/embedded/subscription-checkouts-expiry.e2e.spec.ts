import { EVENT_STORE } from '@stablepay/aggregate';
import type { EventStore } from '@stablepay/event-store';
import {
  SubscriptionCheckoutExpiryTimer,
  SubscriptionCheckoutReader,
} from '@stablepay/subscriptions-service';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { ManualClock } from '@stablepay/util';
import { type EmbeddedStack, startEmbedded } from './embedded';

/**
 * The expiry timer is durable: intents that fall due while the service is down expire on the next start, with
 * no request, exactly once. The clock is injected; nothing waits real minutes.
 */
const ADMIN_TOKEN = 'admin-token-for-tests-0123456789';
const DEMO_API_KEY = `sk_test_${'Expiry0'.repeat(4)}`;
type Json = Record<string, unknown>;

describe('durable subscription checkout expiry across restarts (embedded stack)', () => {
  let db: TestDatabase;
  let stack: EmbeddedStack | undefined;
  const clock = new ManualClock('2026-06-01T10:00:00.000Z');

  const start = async () =>
    startEmbedded({
      env: {
        DATABASE_URL: db.url,
        PORT: '0',
        ADMIN_TOKEN,
        DEMO_API_KEY,
        LOG_LEVEL: 'error',
        STABLEPAY_LOCAL_CHAINS: 'false',
        SUBSCRIPTION_EXPIRY_POLL_MS: '100',
      },
      dataDir: 'memory',
      clock,
    });
  const api = async (s: EmbeddedStack, method: string, path: string, body?: unknown) => {
    const res = await fetch(`${s.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${DEMO_API_KEY}`,
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    return (await res.json()) as Json;
  };
  const streamTypes = async (s: EmbeddedStack, id: string) =>
    (await s.service.app.get<EventStore>(EVENT_STORE).readStream(`subscriptionCheckout-${id}`)).map(
      (e) => e.type,
    );

  beforeAll(async () => {
    db = await createTestDatabase();
  });

  afterAll(async () => {
    await stack?.stop();
    await db?.drop();
  });

  it('expires, on the next start, the intents that fell due while stopped; pending ones stay; each expires once', async () => {
    const first = await start();
    stack = first;
    const soon = String(
      (
        await api(first, 'POST', '/subscription-checkouts', {
          price: '150000',
          price_currency: 'ARS',
          expires_in: 120,
        })
      )['id'],
    );
    const later = String(
      (
        await api(first, 'POST', '/subscription-checkouts', {
          price: '150000',
          price_currency: 'ARS',
          expires_in: 3600,
        })
      )['id'],
    );
    const cancelled = String(
      (
        await api(first, 'POST', '/subscription-checkouts', {
          price: '150000',
          price_currency: 'ARS',
          expires_in: 120,
        })
      )['id'],
    );
    await api(first, 'PATCH', `/subscription-checkouts/${cancelled}/cancel`);
    await first.stop();
    stack = undefined;

    // Down for ten minutes: `soon` fell due, `later` did not.
    clock.advance(10 * 60_000);
    const second = await start();
    stack = second;
    const reader = second.service.app.get(SubscriptionCheckoutReader);
    const deadline = Date.now() + 10_000;
    while ((await reader.find(soon))?.status !== 'expired') {
      if (Date.now() > deadline) throw new Error('not expired after restart');
      await new Promise((r) => setTimeout(r, 25));
    }
    expect(await api(second, 'GET', `/subscription-checkouts/${soon}`)).toMatchObject({
      status: 'expired',
      expired_at: '2026-06-01T10:10:00.000Z',
      expires_at: '2026-06-01T10:02:00.000Z',
    });
    expect(await api(second, 'GET', `/subscription-checkouts/${later}`)).toMatchObject({ status: 'pending' });
    expect(await api(second, 'GET', `/subscription-checkouts/${cancelled}`)).toMatchObject({
      status: 'cancelled',
      expired_at: null,
    });

    // More ticks (and a manual one) change nothing: the expiry was recorded once.
    const timer = second.service.app.get(SubscriptionCheckoutExpiryTimer);
    expect(await timer.tick()).toBe(0);
    await new Promise((r) => setTimeout(r, 200));
    expect(await streamTypes(second, soon)).toEqual([
      'SubscriptionCheckoutCreated.v2',
      'SubscriptionCheckoutExpired.v2',
    ]);
    expect(await streamTypes(second, cancelled)).toEqual([
      'SubscriptionCheckoutCreated.v2',
      'SubscriptionCheckoutCancelled.v2',
    ]);

    // The hour passes while running: `later` expires too.
    clock.advance(60 * 60_000);
    while ((await reader.find(later))?.status !== 'expired') {
      if (Date.now() > deadline + 10_000) throw new Error('later did not expire');
      await new Promise((r) => setTimeout(r, 25));
    }
    expect(await streamTypes(second, later)).toEqual([
      'SubscriptionCheckoutCreated.v2',
      'SubscriptionCheckoutExpired.v2',
    ]);
  });
});
