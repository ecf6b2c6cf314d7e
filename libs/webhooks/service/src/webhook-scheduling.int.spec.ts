import type { TestDatabase } from '@stablepay/testing';
import { createWebhookTestDatabase as createTestDatabase } from './testing/webhook-test-database';
import { ManualClock, SECOND } from '@stablepay/util';
import type { RecordedWebhookEvent } from './sources';
import { TestReceiver } from './testing/test-receiver';
import { startWebhookStack, testSource, type WebhookStack } from './testing/webhook-stack';

/**
 * Fairness (a slow or dead endpoint never delays other merchants: bounded concurrency per merchant, claims taken
 * round-robin across merchants) and read-your-writes (no delivery before the source's read model holds the record).
 */
describe('fair scheduling across merchants', () => {
  const clock = new ManualClock('2026-09-01T09:00:00.000Z');
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
        pollIntervalMs: 100,
        concurrency: 4,
        perMerchantConcurrency: 2,
        policy: { jitterRatio: 0, responseDeadlineMs: 4_000 },
      },
    });
  });

  afterAll(async () => {
    await stack?.stop();
    await receiver.stop();
    await db?.drop();
  });

  it('a hanging endpoint holds at most its per-merchant slots while another merchant is served at once', async () => {
    const slow = await stack.createMerchant('Slow');
    const fast = await stack.createMerchant('Fast');
    await stack.configureWebhook(slow.merchantId, receiver.url('/slow'));
    await stack.configureWebhook(fast.merchantId, receiver.url('/fast'));
    receiver.script('/slow', { kind: 'hang' });
    for (let i = 0; i < 6; i++)
      await stack.emit(slow.merchantId, 'TestChargeSucceeded.v1', {
        chargeId: `subc_slow_${i}`,
        amount: '1',
      });
    await receiver.waitFor(2, '/slow', 5_000);
    for (let i = 0; i < 5; i++)
      await stack.emit(fast.merchantId, 'TestChargeSucceeded.v1', {
        chargeId: `subc_fast_${i}`,
        amount: '1',
      });
    await receiver.waitFor(5, '/fast', 3_900);
    // All five arrived while the slow endpoint still held its two connections: had the fast merchant waited for
    // the slow one's slots, the slow deadline (4 s) would have expired first and a third slow attempt started.
    expect(receiver.on('/slow')).toHaveLength(2);
    // The slow merchant's backlog proceeds two at a time as deadlines expire, and is retried on schedule.
    await receiver.waitFor(6, '/slow', 30_000);
    await stack.dispatcher.drain();
    const slowRows = (await stack.events.list({ merchantId: slow.merchantId, limit: 10 })).rows;
    expect(slowRows.map((r) => [r.deliveryStatus, r.lastError])).toEqual(
      Array(6).fill(['failed', 'timeout']),
    );
    const fastRows = (await stack.events.list({ merchantId: fast.merchantId, limit: 10 })).rows;
    expect(fastRows.every((r) => r.deliveryStatus === 'delivered')).toBe(true);
  });
});

describe('read-your-writes', () => {
  const clock = new ManualClock('2026-09-02T09:00:00.000Z');
  let db: TestDatabase;
  let stack: WebhookStack;
  const receiver = new TestReceiver();
  const readable = new Set<string>();
  const checks: string[] = [];
  const isReadable = async (event: RecordedWebhookEvent) => {
    const charge = event.data['charge'];
    const id = typeof charge === 'object' && charge !== null && 'id' in charge ? String(charge.id) : '';
    checks.push(id);
    return readable.has(id);
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    await receiver.start();
    stack = await startWebhookStack({
      databaseUrl: db.url,
      clock,
      sources: [testSource({ isReadable })],
      dispatch: {
        pollIntervalMs: 60_000,
        readModelWaitMs: 150,
        readModelRetryMs: 15 * SECOND,
        policy: { jitterRatio: 0 },
      },
    });
  });

  afterAll(async () => {
    await stack?.stop();
    await receiver.stop();
    await db?.drop();
  });

  it('does not deliver a charge event before the charges read model holds the row; the wait is not an attempt', async () => {
    const { merchantId } = await stack.createMerchant('Ryw');
    await stack.configureWebhook(merchantId, receiver.url('/ryw'));
    await stack.emit(merchantId, 'TestChargeSucceeded.v1', { chargeId: 'subc_lagging', amount: '1' });
    await stack.settle();
    expect(receiver.on('/ryw')).toHaveLength(0);
    expect(checks).toContain('subc_lagging');
    const [row] = (await stack.events.list({ merchantId, limit: 1 })).rows;
    expect(row).toMatchObject({
      deliveryStatus: 'pending',
      attemptCount: 0,
      nextAttemptAt: new Date(clock.now().getTime() + 15 * SECOND),
    });

    readable.add('subc_lagging');
    clock.advance(15 * SECOND);
    await stack.settle();
    expect(receiver.on('/ryw')).toHaveLength(1);
    const [after] = (await stack.events.list({ merchantId, limit: 1 })).rows;
    expect(after).toMatchObject({ deliveryStatus: 'delivered', attemptCount: 1 });
  });

  it('waits briefly within one attempt when the read model catches up in time', async () => {
    const { merchantId } = await stack.createMerchant('Ryw2');
    await stack.configureWebhook(merchantId, receiver.url('/ryw2'));
    setTimeout(() => readable.add('subc_soon'), 40);
    await stack.emit(merchantId, 'TestChargeSucceeded.v1', { chargeId: 'subc_soon', amount: '1' });
    await stack.settle();
    expect(receiver.on('/ryw2')).toHaveLength(1);
  });

  it('checks the read model once per event: retries of a confirmed event do not wait again', async () => {
    const { merchantId } = await stack.createMerchant('Ryw3');
    await stack.configureWebhook(merchantId, receiver.url('/ryw3'));
    receiver.script('/ryw3', { kind: 'status', status: 500 }, { kind: 'status', status: 200 });
    readable.add('subc_once');
    await stack.emit(merchantId, 'TestChargeSucceeded.v1', { chargeId: 'subc_once', amount: '1' });
    await stack.settle();
    const before = checks.filter((c) => c === 'subc_once').length;
    clock.advance(5 * 60 * SECOND);
    await stack.settle();
    expect(receiver.on('/ryw3')).toHaveLength(2);
    expect(checks.filter((c) => c === 'subc_once').length).toBe(before);
  });
});
