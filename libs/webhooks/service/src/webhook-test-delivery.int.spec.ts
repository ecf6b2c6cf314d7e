import { eventually, type TestDatabase } from '@stablepay/testing';
import { ManualClock } from '@stablepay/util';
import { TestReceiver } from './testing/test-receiver';
import { createWebhookTestDatabase as createTestDatabase } from './testing/webhook-test-database';
import { startWebhookStack, type WebhookStack } from './testing/webhook-stack';

/**
 * POST /settings/webhook/test against a receiver that accepts the connection and never answers: the merchant gets
 * the documented test result with `error: "timeout"`. Before, the gateway's command timeout (COMMAND_TIMEOUT_MS,
 * 10 s) equalled the send deadline (10 s) and fired first: 503 service_unavailable. Both are shrunk here to the
 * same 2 s, as production's are both 10 s. And a merchant's test deliveries in flight are bounded (they hold a
 * connection each, outside the dispatcher's per-merchant slots).
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
      commandTimeoutMs: 2_000,
      dispatch: {
        pollIntervalMs: 60_000,
        testConcurrencyPerMerchant: 2,
        policy: { responseDeadlineMs: 2_000 },
      },
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

  it("refuses a merchant's third test delivery in flight with 409, and serves another merchant meanwhile", async () => {
    const busy = await stack.createMerchant('Busy');
    const other = await stack.createMerchant('Other');
    await stack.configureWebhook(busy.merchantId, receiver.url('/busy'));
    await stack.configureWebhook(other.merchantId, receiver.url('/other'));
    const first = [
      stack.api('POST', '/settings/webhook/test', busy.apiKey),
      stack.api('POST', '/settings/webhook/test', busy.apiKey),
    ];
    await eventually(
      async () => receiver.on('/busy').length,
      (n) => n === 2,
      'two test deliveries at the hanging receiver',
      { intervalMs: 10 },
    );
    const third = stack.api('POST', '/settings/webhook/test', busy.apiKey);
    const elsewhere = stack.api('POST', '/settings/webhook/test', other.apiKey);
    expect(await third).toMatchObject({
      status: 409,
      body: { error: { type: 'invalid_request', code: 'webhook_test_in_progress' } },
    });
    expect(await elsewhere).toMatchObject({ status: 200, body: { error: 'timeout' } });
    for (const res of await Promise.all(first))
      expect(res).toMatchObject({ status: 200, body: { error: 'timeout' } });
    expect(receiver.on('/busy')).toHaveLength(2);
    // Slots are given back: the next one runs.
    expect(await stack.api('POST', '/settings/webhook/test', busy.apiKey)).toMatchObject({ status: 200 });
  });
});
