import type { TestDatabase } from '@stablepay/testing';
import { createWebhookTestDatabase as createTestDatabase } from './testing/webhook-test-database';
import { ManualClock } from '@stablepay/util';
import { DEFAULT_DISPATCH_OPTIONS, dispatchOptions, dispatchOptionsFromEnv } from './dispatch.config';
import { TestReceiver } from './testing/test-receiver';
import { startWebhookStack, type WebhookStack } from './testing/webhook-stack';

/**
 * SPEC Delivery rule 1 / Limits: the webhook response deadline is 10 seconds. This is the one test that waits for
 * it in real time (every other test injects a short deadline): a dispatcher configured with the defaults gives
 * up on a hanging receiver after 10 s, not before, and records a timeout.
 */
describe('the default 10-second response deadline', () => {
  it('is what the defaults and the environment configure', () => {
    expect(DEFAULT_DISPATCH_OPTIONS.policy.responseDeadlineMs).toBe(10_000);
    expect(dispatchOptions().policy.responseDeadlineMs).toBe(10_000);
    expect(dispatchOptionsFromEnv({}).policy.responseDeadlineMs).toBe(10_000);
    expect(dispatchOptionsFromEnv({}).policy.maxAttempts).toBe(6);
  });

  it('rejects a bad environment value naming the variable', () => {
    expect(() => dispatchOptionsFromEnv({ WEBHOOK_CONCURRENCY: 'lots' })).toThrow(/WEBHOOK_CONCURRENCY/);
    expect(() =>
      dispatchOptionsFromEnv({ WEBHOOK_CONCURRENCY: '4', WEBHOOK_CONCURRENCY_PER_MERCHANT: '8' }),
    ).toThrow(/WEBHOOK_CONCURRENCY_PER_MERCHANT/);
  });

  describe('against a receiver that never answers', () => {
    const clock = new ManualClock('2026-11-01T00:00:00.000Z');
    let db: TestDatabase;
    let stack: WebhookStack;
    const receiver = new TestReceiver({ kind: 'hang' });

    beforeAll(async () => {
      db = await createTestDatabase();
      await receiver.start();
      // Only the poll interval differs from production's options; the policy is the default one.
      stack = await startWebhookStack({ databaseUrl: db.url, clock, dispatch: { pollIntervalMs: 60_000 } });
    });

    afterAll(async () => {
      await stack?.stop();
      await receiver.stop();
      await db?.drop();
    });

    it('gives up after 10 s (not before) and records a timeout', async () => {
      const { merchantId } = await stack.createMerchant('Hanging');
      await stack.configureWebhook(merchantId, receiver.url('/never'));
      await stack.emit(merchantId, 'TestChargeSucceeded.v1', { chargeId: 'subc_never', amount: '1' });
      await stack.settle();
      const [row] = (await stack.events.list({ merchantId, limit: 1 })).rows;
      expect(row).toMatchObject({ deliveryStatus: 'failed', lastError: 'timeout', attemptCount: 1 });
      const detail = await stack.events.get(merchantId, row?.id ?? '');
      const duration = detail?.attempts[0]?.durationMs ?? 0;
      expect(duration).toBeGreaterThanOrEqual(9_990);
      expect(duration).toBeLessThan(11_000);
    }, 30_000);
  });
});
