import { toBusMessage } from '@stablepay/event-bus';
import { eventually, type TestDatabase } from '@stablepay/testing';
import { ManualClock } from '@stablepay/util';
import { domainEventSource } from './sources';
import { TestReceiver } from './testing/test-receiver';
import { startWebhookStack, TEST_TOPIC, type WebhookStack } from './testing/webhook-stack';
import { createWebhookTestDatabase as createTestDatabase } from './testing/webhook-test-database';
import { RELATED_WAIT_LIMIT_MS, RelatedStreamsNotReadyError } from './webhook-event.recorder';

/**
 * A source whose related stream another scope writes after the message's own (the charge ledger records a first charge
 * after the checkout completion that names it): `relatedReady` holds the message back, retried, until that stream
 * holds what the message refers to; the webhook is then recorded once, from the related stream as written.
 */
const clock = new ManualClock('2026-08-01T09:00:00.000Z');
const relatedStream = (chargeId: string) => `ledgertest-${chargeId}`;
const source = domainEventSource({
  name: 'related-test',
  topic: TEST_TOPIC,
  withHistory: true,
  relatedStreams: (event) =>
    event.type === 'TestNeedsRelated.v1'
      ? [relatedStream((event.data as { chargeId: string }).chargeId)]
      : [],
  relatedReady: (event, _history, related) =>
    (related.get(relatedStream((event.data as { chargeId: string }).chargeId))?.length ?? 0) > 0,
  map: (event, _history, related) => {
    if (event.type !== 'TestNeedsRelated.v1') return null;
    const row = related.get(relatedStream((event.data as { chargeId: string }).chargeId))?.[0];
    return {
      type: 'subscription_checkout.completed',
      data: { object: { object: 'subscription_checkout' }, first_charge: row?.data ?? null },
    };
  },
});

describe('webhook sources with related streams written later (relatedReady)', () => {
  let db: TestDatabase;
  const receiver = new TestReceiver();
  let stack: WebhookStack | undefined;

  beforeAll(async () => {
    db = await createTestDatabase();
    await receiver.start();
    stack = await startWebhookStack({ databaseUrl: db.url, clock, sources: [source] });
  });

  afterAll(async () => {
    await stack?.stop();
    await receiver.stop();
    await db?.drop();
  });

  it('given the related stream is not written yet, then nothing is recorded and the message is retried; once it is, the webhook carries what it holds', async () => {
    if (!stack) throw new Error('no stack');
    const { merchantId } = await stack.createMerchant('Related');
    await stack.configureWebhook(merchantId, receiver.url('/related'));
    await stack.emit(merchantId, 'TestNeedsRelated.v1', { chargeId: 'subc_later', amount: '1' });
    const [stored] = await stack.eventStore.readStream('charge-subc_later');
    if (!stored) throw new Error('not stored');
    const message = toBusMessage(stored);

    await expect(stack.recorder.handle(message)).rejects.toBeInstanceOf(RelatedStreamsNotReadyError);

    await stack.eventStore.appendToStream(relatedStream('subc_later'), [
      { id: crypto.randomUUID(), type: 'TestRow.v1', data: { id: 'subc_later', created_at: 'then' } },
    ]);
    await stack.recorder.handle(message);
    await stack.settle();
    const deliveries = receiver.on('/related');
    expect(deliveries).toHaveLength(1);
    const body = JSON.parse(deliveries[0]?.rawBody.toString('utf8') ?? '{}') as {
      type: string;
      data: { first_charge: unknown };
    };
    expect(body).toMatchObject({
      type: 'subscription_checkout.completed',
      data: { first_charge: { id: 'subc_later', created_at: 'then' } },
    });
  });

  it("given the related stream is never written, then after the wait limit the message is recorded without it (one merchant's missing write holds no other webhook forever)", async () => {
    if (!stack) throw new Error('no stack');
    const { merchantId } = await stack.createMerchant('Never related');
    await stack.configureWebhook(merchantId, receiver.url('/never'));
    stack.recorder.relatedWaitLimitMs = 50;
    try {
      // The stack's own consumer retries the message; past the limit it records it with the related stream empty.
      await stack.emit(merchantId, 'TestNeedsRelated.v1', { chargeId: 'subc_never', amount: '1' });
      await eventually(
        async () => {
          await stack?.settle();
          return receiver.on('/never').length;
        },
        (delivered) => delivered === 1,
        'the webhook recorded after the wait limit',
      );
    } finally {
      stack.recorder.relatedWaitLimitMs = RELATED_WAIT_LIMIT_MS;
    }
    const deliveries = receiver.on('/never');
    expect(deliveries).toHaveLength(1);
    const body = JSON.parse(deliveries[0]?.rawBody.toString('utf8') ?? '{}') as {
      data: { first_charge: unknown };
    };
    expect(body.data.first_charge).toBeNull();
  });
});
