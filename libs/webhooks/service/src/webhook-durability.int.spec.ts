import type { TestDatabase } from '@stablepay/testing';
import { createWebhookTestDatabase as createTestDatabase } from './testing/webhook-test-database';
import { ManualClock, MINUTE } from '@stablepay/util';
import { recordedDelivery, webhookEventId } from '@stablepay/webhooks-domain';
import { TestReceiver } from './testing/test-receiver';
import { startWebhookStack, TEST_TOPIC, type WebhookStack } from './testing/webhook-stack';

/**
 * The schedule is durable: it lives in Postgres, so a dispatcher restarted mid-schedule carries on from the stored
 * state, loses no delivery and sends none twice on purpose; a dispatcher that dies holding a lease delays that
 * event only until the lease expires.
 */
const clock = new ManualClock('2026-08-01T09:00:00.000Z');
const LEASE_MS = 60_000;
const dispatch = {
  pollIntervalMs: 60_000,
  leaseMs: LEASE_MS,
  policy: { jitterRatio: 0, responseDeadlineMs: 2_000 },
};

describe('a dispatcher restarted mid-schedule', () => {
  let db: TestDatabase;
  const receiver = new TestReceiver();
  let stack: WebhookStack | undefined;

  beforeAll(async () => {
    db = await createTestDatabase();
    await receiver.start();
  });

  afterAll(async () => {
    await stack?.stop();
    await receiver.stop();
    await db?.drop();
  });

  it('continues the stored schedule after a restart: no attempt lost, none repeated', async () => {
    stack = await startWebhookStack({ databaseUrl: db.url, clock, dispatch });
    const { merchantId } = await stack.createMerchant('Durable');
    await stack.configureWebhook(merchantId, receiver.url('/restart'));
    receiver.script(
      '/restart',
      { kind: 'status', status: 500 },
      { kind: 'status', status: 500 },
      { kind: 'status', status: 500 },
      { kind: 'status', status: 200 },
    );
    const t0 = clock.now();
    await stack.emit(merchantId, 'TestChargeSucceeded.v1', { chargeId: 'subc_restart', amount: '1' });
    await stack.settle();
    clock.advance(5 * MINUTE);
    await stack.settle();
    expect(receiver.on('/restart')).toHaveLength(2);
    await stack.stop();

    // Down for 10 minutes; the third attempt (due 15 minutes after the second) is not due yet at restart.
    clock.advance(10 * MINUTE);
    stack = await startWebhookStack({ databaseUrl: db.url, clock, dispatch });
    await stack.settle();
    expect(receiver.on('/restart')).toHaveLength(2);
    clock.advance(5 * MINUTE);
    await stack.settle();
    clock.advance(30 * MINUTE);
    await stack.settle();
    clock.advance(2 * 60 * MINUTE);
    await stack.settle();

    const attempts = receiver.on('/restart');
    expect(attempts).toHaveLength(4);
    expect(
      attempts.map((a) => (Number(a.headers['webhook-timestamp']) * 1000 - t0.getTime()) / MINUTE),
    ).toEqual([0, 5, 20, 50]);
    const [row] = (await stack.events.list({ merchantId, limit: 1 })).rows;
    expect(row).toMatchObject({ deliveryStatus: 'delivered', attemptCount: 4 });
    const detail = await stack.events.get(merchantId, row?.id ?? '');
    expect(detail?.attempts.map((a) => [a.attemptNumber, a.responseStatus])).toEqual([
      [4, 200],
      [3, 500],
      [2, 500],
      [1, 500],
    ]);
  });

  it('an event leased by a dispatcher that died is delivered once, after the lease expires', async () => {
    if (!stack) throw new Error('no stack');
    const { merchantId } = await stack.createMerchant('Orphaned');
    await stack.configureWebhook(merchantId, receiver.url('/orphan'));
    // Recorded straight into the schedule (no wake-up of this process's dispatcher)...
    const now = clock.now();
    await stack.events.record([
      {
        event: {
          id: webhookEventId('orphan-domain-event', 'subscription.charge_succeeded', now),
          merchantId,
          type: 'subscription.charge_succeeded',
          createdAt: now,
          data: { object: { id: 'subc_orphan' } },
          origin: {
            source: 'test-charges',
            topic: TEST_TOPIC,
            eventId: 'orphan-domain-event',
            streamId: 'charge-subc_orphan',
            revision: 0,
          },
        },
        state: recordedDelivery(now),
        recordedAt: now,
      },
    ]);
    // ...and another process claims it and dies before writing anything back.
    const claimed = await stack.events.claimDue({
      now: clock.now(),
      limit: 10,
      perMerchantLimit: 10,
      busy: new Map(),
      inFlight: [],
      leaseToken: 'dead-dispatcher',
      leaseExpiresAt: new Date(clock.now().getTime() + LEASE_MS),
    });
    expect(claimed.map((r) => r.merchant_id)).toEqual([merchantId]);
    await stack.settle();
    expect(receiver.on('/orphan')).toHaveLength(0);
    clock.advance(LEASE_MS);
    await stack.settle();
    await stack.settle();
    expect(receiver.on('/orphan')).toHaveLength(1);
    const [row] = (await stack.events.list({ merchantId, limit: 1 })).rows;
    expect(row).toMatchObject({ deliveryStatus: 'delivered', attemptCount: 1 });
  });

  it('the timer loop delivers on its own after a restart (no test driving it)', async () => {
    await stack?.stop();
    stack = await startWebhookStack({
      databaseUrl: db.url,
      clock,
      dispatch: { ...dispatch, pollIntervalMs: 200 },
    });
    const { merchantId } = await stack.createMerchant('Looping');
    await stack.configureWebhook(merchantId, receiver.url('/loop'));
    receiver.script('/loop', { kind: 'status', status: 500 }, { kind: 'status', status: 204 });
    await stack.emit(merchantId, 'TestChargeSucceeded.v1', { chargeId: 'subc_loop', amount: '1' });
    await receiver.waitFor(1, '/loop');
    clock.advance(5 * MINUTE);
    await receiver.waitFor(2, '/loop');
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(receiver.on('/loop')).toHaveLength(2);
  });
});
