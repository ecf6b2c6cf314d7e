import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { verifyWebhook } from '@stablepay/merchant-sdk';
import type { TestDatabase } from '@stablepay/testing';
import { createWebhookTestDatabase as createTestDatabase } from './testing/webhook-test-database';
import { HOUR, ManualClock, MINUTE, SecretBox } from '@stablepay/util';
import { TestReceiver } from './testing/test-receiver';
import { startWebhookStack, type WebhookStack } from './testing/webhook-stack';
import { WebhookEventStore } from './webhook-event.store';

/**
 * SPEC Events: envelope, headers, delivery and retries, end to end: synthetic domain events appended to the event
 * store -> source registry -> durable schedule -> a real HTTP receiver on loopback that verifies every delivery
 * with the merchant SDK's verifyWebhook. The clock is a ManualClock walked through the schedule.
 */
const clock = new ManualClock('2026-06-01T10:00:00.000Z');

function str(value: unknown): string {
  if (typeof value !== 'string') throw new Error(`expected a string, got ${JSON.stringify(value)}`);
  return value;
}

function body(raw: Buffer): Record<string, unknown> {
  return JSON.parse(raw.toString('utf8')) as Record<string, unknown>;
}

describe('webhook delivery (durable schedule, real receiver)', () => {
  let db: TestDatabase;
  let stack: WebhookStack;
  const receiver = new TestReceiver();

  beforeAll(async () => {
    db = await createTestDatabase();
    await receiver.start();
    stack = await startWebhookStack({
      databaseUrl: db.url,
      clock,
      dispatch: { pollIntervalMs: 60_000, policy: { jitterRatio: 0, responseDeadlineMs: 400 } },
    });
  });

  afterAll(async () => {
    await stack?.stop();
    await receiver.stop();
    await db?.drop();
  });

  let n = 0;
  /** A merchant whose webhook URL is the receiver's `path`; returns its id and secret. */
  async function merchantAt(path: string, eventTypes?: string[] | null) {
    const { merchantId, apiKey } = await stack.createMerchant(`M${++n}`);
    const secret = await stack.configureWebhook(merchantId, receiver.url(path), eventTypes);
    return { merchantId, apiKey, secret: str(secret) };
  }

  describe('SPEC Envelope and headers', () => {
    it('delivers the envelope with X-Webhook-Id, X-Signature and the Standard Webhooks headers, all verifying', async () => {
      const { merchantId, secret } = await merchantAt('/envelope');
      await stack.emit(merchantId, 'TestChargeSucceeded.v1', { chargeId: 'subc_env', amount: '1500000' });
      await stack.settle();
      const [delivery] = receiver.on('/envelope');
      if (!delivery) throw new Error('nothing delivered');
      const event = body(delivery.rawBody);
      expect(event).toEqual({
        id: expect.stringMatching(/^evt_[0-9a-z]{26}$/),
        object: 'event',
        type: 'subscription.charge_succeeded',
        created_at: clock.now().toISOString(),
        data: {
          object: { object: 'subscription', id: '0xsub', amount: '1500000' },
          charge: { object: 'subscription_charge', id: 'subc_env', amount: '1500000', status: 'succeeded' },
        },
      });
      expect('livemode' in event).toBe(false);
      expect(delivery.method).toBe('POST');
      expect(delivery.headers['content-type']).toBe('application/json');
      expect(delivery.headers['x-webhook-id']).toBe(event['id']);
      expect(delivery.headers['webhook-id']).toBe(event['id']);
      expect(delivery.headers['webhook-timestamp']).toBe(String(Math.floor(clock.now().getTime() / 1000)));
      expect(delivery.headers['x-signature']).toMatch(/^[0-9a-f]{64}$/);
      expect(delivery.headers['x-signature-previous']).toBeUndefined();
      expect(delivery.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
      const verified = verifyWebhook(delivery.rawBody, delivery.headers, secret, {
        now: clock.now(),
        requireTimestamp: true,
      });
      expect(verified).toMatchObject({
        valid: true,
        schemes: ['standard', 'stablepay'],
        webhookId: event['id'],
        matchedPreviousSecret: false,
      });
      // The signature covers the exact bytes: one changed byte fails.
      const tampered = Buffer.from(delivery.rawBody);
      tampered[tampered.length - 2] = 0x20;
      expect(verifyWebhook(tampered, delivery.headers, secret, { now: clock.now() }).valid).toBe(false);
      expect(
        verifyWebhook(delivery.rawBody, delivery.headers, 'whsec_wrong', { now: clock.now() }).valid,
      ).toBe(false);
    });

    it('records one event per domain event and type: the id is stable, a redelivered bus message adds nothing', async () => {
      const { merchantId } = await merchantAt('/dedupe');
      const domainEventId = await stack.emit(merchantId, 'TestSettled.v1', {
        chargeId: 'subc_dd',
        amount: '7',
      });
      await stack.settle();
      expect(
        receiver
          .on('/dedupe')
          .map((d) => body(d.rawBody)['type'])
          .sort(),
      ).toEqual(['payment.settled', 'subscription.charge_settled']);
      const [recorded] = await stack.eventStore.readStream('charge-subc_dd');
      if (!recorded) throw new Error('no domain event');
      expect(recorded.id).toBe(domainEventId);
      // The bus delivers at least once: the same message again.
      await stack.recorder.handle({
        id: recorded.id,
        topic: 'ledger.charge.v1',
        key: recorded.streamId,
        type: recorded.type,
        data: recorded.data,
        metadata: recorded.metadata,
        revision: recorded.revision,
        recordedAt: recorded.recordedAt.toISOString(),
      });
      await stack.settle();
      expect(receiver.on('/dedupe')).toHaveLength(2);
      const list = await stack.events.list({ merchantId, limit: 10 });
      expect(list.rows).toHaveLength(2);
    });

    it('a source that throws on a message does not block the topic: the message is skipped, later ones flow', async () => {
      const { merchantId } = await merchantAt('/broken');
      await stack.emit(merchantId, 'TestBroken.v1', { chargeId: 'subc_broken', amount: '1' });
      await stack.emit(merchantId, 'TestChargeSucceeded.v1', { chargeId: 'subc_after', amount: '2' });
      await stack.settle();
      expect(receiver.on('/broken')).toHaveLength(1);
    });
  });

  describe('SPEC Delivery rule 2: retries', () => {
    it('retries a 500 after 5, 15, 30, 60 and 60 minutes, with the same id, then abandons after 6 attempts', async () => {
      const { merchantId, secret } = await merchantAt('/retry', null);
      receiver.script('/retry', { kind: 'status', status: 500, body: 'nope' });
      const start = clock.now();
      await stack.emit(merchantId, 'TestChargeSucceeded.v1', { chargeId: 'subc_retry', amount: '1' });
      await stack.settle();
      expect(receiver.on('/retry')).toHaveLength(1);
      const gaps = [5, 15, 30, 60, 60];
      for (const [i, gap] of gaps.entries()) {
        clock.advance(gap * MINUTE - 1000);
        await stack.settle();
        expect(receiver.on('/retry')).toHaveLength(i + 1); // not a second early
        clock.advance(1000);
        await stack.settle();
        expect(receiver.on('/retry')).toHaveLength(i + 2);
      }
      clock.advance(24 * HOUR);
      await stack.settle();
      const attempts = receiver.on('/retry');
      expect(attempts).toHaveLength(6);
      const ids = new Set(attempts.map((a) => a.headers['x-webhook-id']));
      expect(ids.size).toBe(1);
      // Each attempt is signed afresh for the time it is sent, and verifies at that time.
      const stamps = attempts.map((a) => Number(a.headers['webhook-timestamp']));
      expect(stamps.map((s) => s - Math.floor(start.getTime() / 1000))).toEqual(
        [0, 5, 20, 50, 110, 170].map((m) => m * 60),
      );
      for (const a of attempts) {
        expect(
          verifyWebhook(a.rawBody, a.headers, secret, {
            now: new Date(Number(a.headers['webhook-timestamp']) * 1000),
          }).valid,
        ).toBe(true);
      }
      const [row] = (await stack.events.list({ merchantId, limit: 10 })).rows;
      expect(row).toMatchObject({
        deliveryStatus: 'abandoned',
        attemptCount: 6,
        lastResponseStatus: 500,
        lastError: 'http_status',
        nextAttemptAt: null,
      });
    });

    it('stops on the first 2xx', async () => {
      const { merchantId } = await merchantAt('/recover');
      receiver.script(
        '/recover',
        { kind: 'status', status: 503 },
        { kind: 'status', status: 500 },
        { kind: 'status', status: 200 },
      );
      await stack.emit(merchantId, 'TestChargeSucceeded.v1', { chargeId: 'subc_recover', amount: '1' });
      await stack.settle();
      clock.advance(5 * MINUTE);
      await stack.settle();
      clock.advance(15 * MINUTE);
      await stack.settle();
      clock.advance(2 * HOUR);
      await stack.settle();
      expect(receiver.on('/recover')).toHaveLength(3);
      const [row] = (await stack.events.list({ merchantId, limit: 1 })).rows;
      expect(row).toMatchObject({
        deliveryStatus: 'delivered',
        attemptCount: 3,
        lastResponseStatus: 200,
        nextAttemptAt: null,
        lastError: null,
      });
    });

    it.each([
      ['hangs past the deadline', { kind: 'hang' } as const, 'timeout', null],
      ['closes the connection', { kind: 'close' } as const, 'network_error', null],
      [
        'redirects (not followed)',
        { kind: 'redirect', status: 302, location: '/elsewhere' } as const,
        'redirect_not_followed',
        302,
      ],
      ['answers 500', { kind: 'status', status: 500 } as const, 'http_status', 500],
    ])(
      'a receiver that %s is a failed attempt, retried 5 minutes later',
      async (_name, behaviour, error, status) => {
        const path = `/fail-${error}`;
        const { merchantId } = await merchantAt(path);
        receiver.script(path, behaviour, { kind: 'status', status: 204 });
        await stack.emit(merchantId, 'TestChargeSucceeded.v1', { chargeId: `subc_${error}`, amount: '1' });
        await stack.settle();
        const [failed] = (await stack.events.list({ merchantId, limit: 1 })).rows;
        expect(failed).toMatchObject({
          deliveryStatus: 'failed',
          attemptCount: 1,
          lastError: error,
          lastResponseStatus: status,
        });
        expect(failed?.nextAttemptAt).toEqual(new Date(clock.now().getTime() + 5 * MINUTE));
        expect(receiver.on('/elsewhere')).toHaveLength(0);
        clock.advance(5 * MINUTE);
        await stack.settle();
        const [after] = (await stack.events.list({ merchantId, limit: 1 })).rows;
        expect(after).toMatchObject({
          deliveryStatus: 'delivered',
          attemptCount: 2,
          lastResponseStatus: 204,
        });
      },
    );
  });

  describe('SPEC Delivery rule 5: selection', () => {
    it('records an unselected type as not_selected and sends nothing; a manual redelivery sends it', async () => {
      const { merchantId, secret } = await merchantAt('/selected', ['payment.settled']);
      await stack.emit(merchantId, 'TestSettled.v1', { chargeId: 'subc_sel', amount: '3' });
      await stack.settle();
      expect(receiver.on('/selected').map((d) => body(d.rawBody)['type'])).toEqual(['payment.settled']);
      const unselected = (await stack.events.list({ merchantId, limit: 10, deliveryStatus: 'not_selected' }))
        .rows;
      expect(unselected).toHaveLength(1);
      expect(unselected[0]).toMatchObject({
        type: 'subscription.charge_settled',
        lastError: 'event_type_not_selected',
        attemptCount: 0,
        nextAttemptAt: null,
      });
      clock.advance(2 * HOUR);
      await stack.settle();
      expect(receiver.on('/selected')).toHaveLength(1);
      const id = unselected[0]?.id ?? '';
      await stack.events.requestRedelivery(merchantId, id, clock.now());
      await stack.settle();
      const sent = receiver.on('/selected');
      expect(sent).toHaveLength(2);
      expect(sent[1]?.headers['x-webhook-id']).toBe(id);
      expect(
        verifyWebhook(sent[1]?.rawBody ?? '', sent[1]?.headers ?? {}, secret, { now: clock.now() }).valid,
      ).toBe(true);
    });

    it('a secret the service keys no longer open is a failed attempt (webhook_secret_unreadable), retried, not a stuck event', async () => {
      const { merchantId } = await merchantAt('/unreadable-secret');
      // What an operator's key change without WEBHOOK_SECRET_ENCRYPTION_KEY_PREVIOUS leaves behind: a secret sealed
      // under a key the service no longer has.
      const sql = new Client({ connectionString: db.url });
      await sql.connect();
      try {
        const other = new SecretBox(randomBytes(32));
        const { rows } = await sql.query<{ secret_id: string }>(
          'SELECT secret_id FROM webhook_secrets WHERE merchant_id = $1',
          [merchantId],
        );
        for (const { secret_id } of rows)
          await sql.query('UPDATE webhook_secrets SET sealed_secret = $2 WHERE secret_id = $1', [
            secret_id,
            other.seal('whsec_lost', secret_id),
          ]);
      } finally {
        await sql.end();
      }
      await stack.emit(merchantId, 'TestChargeSucceeded.v1', { chargeId: 'subc_unreadable', amount: '1' });
      await stack.settle();
      const [row] = (await stack.events.list({ merchantId, limit: 1 })).rows;
      expect(row).toMatchObject({
        deliveryStatus: 'failed',
        lastError: 'webhook_secret_unreadable',
        attemptCount: 1,
        nextAttemptAt: expect.any(Date),
      });
      expect(receiver.on('/unreadable-secret')).toHaveLength(0);
    });

    it('a merchant without a webhook URL gets its events recorded as not_selected', async () => {
      const { merchantId } = await stack.createMerchant('NoUrl');
      await stack.emit(merchantId, 'TestChargeSucceeded.v1', { chargeId: 'subc_nourl', amount: '1' });
      await stack.settle();
      const [row] = (await stack.events.list({ merchantId, limit: 1 })).rows;
      expect(row).toMatchObject({ deliveryStatus: 'not_selected', lastError: 'no_webhook_url' });
    });

    it('an event the merchant would not get is settled when recorded: the dispatcher never claims it', async () => {
      const { merchantId: noUrl } = await stack.createMerchant('NoUrlNoClaim');
      const { merchantId: unselected } = await merchantAt('/unselected-no-claim', ['payment.settled']);
      const claimed: string[] = [];
      // On the prototype: the dispatcher's store is not the instance the stack exposes (the gateway's).
      const claimDue = WebhookEventStore.prototype.claimDue;
      const spy = jest.spyOn(WebhookEventStore.prototype, 'claimDue').mockImplementation(async function (
        this: WebhookEventStore,
        request,
      ) {
        const rows = await claimDue.call(this, request);
        claimed.push(...rows.map((r) => r.merchant_id));
        return rows;
      });
      try {
        await stack.emit(noUrl, 'TestChargeSucceeded.v1', { chargeId: 'subc_noclaim1', amount: '1' });
        await stack.emit(unselected, 'TestChargeSucceeded.v1', { chargeId: 'subc_noclaim2', amount: '1' });
        await stack.settle();
      } finally {
        spy.mockRestore();
      }
      expect(claimed).not.toContain(noUrl);
      expect(claimed).not.toContain(unselected);
      const [a] = (await stack.events.list({ merchantId: noUrl, limit: 1 })).rows;
      const [b] = (await stack.events.list({ merchantId: unselected, limit: 1 })).rows;
      expect(a).toMatchObject({
        deliveryStatus: 'not_selected',
        lastError: 'no_webhook_url',
        attemptCount: 0,
      });
      expect(b).toMatchObject({ deliveryStatus: 'not_selected', lastError: 'event_type_not_selected' });
      expect(receiver.on('/unselected-no-claim')).toHaveLength(0);
    });
  });
});
