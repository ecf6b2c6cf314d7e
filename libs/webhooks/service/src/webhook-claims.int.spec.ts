import type { TestDatabase } from '@stablepay/testing';
import { ManualClock } from '@stablepay/util';
import { createWebhookTestDatabase as createTestDatabase } from './testing/webhook-test-database';
import { TestReceiver } from './testing/test-receiver';
import { startWebhookStack, type WebhookStack } from './testing/webhook-stack';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Claims overlap (the next one is sent while one is on its way back) and take the merchant's endpoint from the
 * settings cache: neither may deliver an event twice, skip one, or send to an endpoint the merchant has changed.
 */
describe('overlapping claims and cached endpoints', () => {
  const clock = new ManualClock('2026-09-03T09:00:00.000Z');
  let db: TestDatabase;
  let stack: WebhookStack;
  const receiver = new TestReceiver();

  beforeAll(async () => {
    db = await createTestDatabase();
    await receiver.start();
    stack = await startWebhookStack({
      databaseUrl: db.url,
      clock,
      dispatch: {
        pollIntervalMs: 60_000,
        concurrency: 4,
        perMerchantConcurrency: 2,
        policy: { jitterRatio: 0 },
      },
    });
  });

  afterAll(async () => {
    await stack?.stop();
    await receiver.stop();
    await db?.drop();
  });

  it('a backlog larger than the prefetch is claimed by claims in flight together, each event delivered once', async () => {
    const merchants = [await stack.createMerchant('Overlap A'), await stack.createMerchant('Overlap B')];
    for (const [i, m] of merchants.entries())
      await stack.configureWebhook(m.merchantId, receiver.url(`/ov${i}`));
    // Every claim comes back late (as under load), so deliveries finish and ask for more while one is out.
    let running = 0;
    let mostAtOnce = 0;
    // The dispatcher's own store (the API module has an instance of its own).
    const store = stack.dispatcher['store'];
    const claimDue = store.claimDue.bind(store);
    store.claimDue = async (request) => {
      running++;
      mostAtOnce = Math.max(mostAtOnce, running);
      try {
        const rows = await claimDue(request);
        await sleep(30);
        return rows;
      } finally {
        running--;
      }
    };
    const count = 60;
    try {
      for (let i = 0; i < count; i++) {
        const m = merchants[i % merchants.length];
        if (m)
          await stack.emit(m.merchantId, 'TestChargeSucceeded.v1', { chargeId: `subc_ov_${i}`, amount: '1' });
      }
      await stack.settle();
    } finally {
      store.claimDue = claimDue;
    }
    expect(mostAtOnce).toBeGreaterThanOrEqual(2);
    const ids = receiver.received
      .filter((r) => r.path.startsWith('/ov'))
      .map((r) => String(r.headers['x-webhook-id']));
    expect(ids).toHaveLength(count);
    expect(new Set(ids).size).toBe(count);
    for (const m of merchants) {
      const rows = (await stack.events.list({ merchantId: m.merchantId, limit: 100 })).rows;
      expect(rows).toHaveLength(count / merchants.length);
      expect(rows.every((r) => r.deliveryStatus === 'delivered' && r.attemptCount === 1)).toBe(true);
    }
  });

  it('a webhook URL changed through this process is used by the very next claim', async () => {
    const { merchantId } = await stack.createMerchant('Moving');
    await stack.configureWebhook(merchantId, receiver.url('/old-home'));
    await stack.emit(merchantId, 'TestChargeSucceeded.v1', { chargeId: 'subc_move_1', amount: '1' });
    await stack.settle();
    expect(receiver.on('/old-home')).toHaveLength(1);

    // Within the cache's 1 s bound: only the settings projection's invalidation makes this claim see the change.
    await stack.configureWebhook(merchantId, receiver.url('/new-home'));
    await stack.emit(merchantId, 'TestChargeSucceeded.v1', { chargeId: 'subc_move_2', amount: '1' });
    await stack.settle();
    expect(receiver.on('/old-home')).toHaveLength(1);
    expect(receiver.on('/new-home')).toHaveLength(1);
  });
});
