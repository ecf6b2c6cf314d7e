import type { TestDatabase } from '@stablepay/testing';
import { ManualClock } from '@stablepay/util';
import { TestReceiver } from './testing/test-receiver';
import { createWebhookTestDatabase as createTestDatabase } from './testing/webhook-test-database';
import { startWebhookStack, type WebhookStack } from './testing/webhook-stack';

/**
 * POST /settings/webhook/test against a receiver that accepts the connection and never answers: the merchant gets
 * the documented test result with `error: "timeout"`. Before, the gateway's command timeout (COMMAND_TIMEOUT_MS,
 * 10 s) equalled the send deadline (10 s) and fired first: 503 service_unavailable. Both are shrunk here to the
 * same 600 ms, as production's are both 10 s.
 */
describe('POST /settings/webhook/test to a receiver that never answers', () => {
  const clock = new ManualClock('2026-11-01T00:00:00.000Z');
  let db: TestDatabase;
  let stack: WebhookStack;
  const receiver = new TestReceiver({ kind: 'hang' });

  beforeAll(async () => {
    [db] = await Promise.all([createTestDatabase(), receiver.start()]);
    stack = await startWebhookStack({
      databaseUrl: db.url,
      clock,
      commandTimeoutMs: 600,
      dispatch: { pollIntervalMs: 60_000, policy: { responseDeadlineMs: 600 } },
    });
  });

  afterAll(async () => {
    await stack?.stop();
    await Promise.all([receiver.stop(), db?.drop()]);
  });

  it('answers 200 with the timeout result, not 503 from the command timeout', async () => {
    const { merchantId, apiKey } = await stack.createMerchant('Hanging');
    await stack.configureWebhook(merchantId, receiver.url('/hang'));
    const res = await stack.api('POST', '/settings/webhook/test', apiKey);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      object: 'webhook_test_delivery',
      type: 'subscription.charge_succeeded',
      url: receiver.url('/hang'),
      delivered: false,
      response_status: null,
      error: 'timeout',
    });
    expect(receiver.on('/hang')).toHaveLength(1);
  });
});
