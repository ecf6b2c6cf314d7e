import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { Client } from 'pg';
import { EVENT_STORE } from '@stablepay/aggregate';
import { EVENT_BUS, type EventBus } from '@stablepay/event-bus';
import type { EventStore } from '@stablepay/event-store';
import {
  CHARGE_TOPIC,
  ChargeLedgerProjection,
  SANDBOX_PAYOUT_LATE,
  SANDBOX_PAYOUT_NEVER_CREDITED,
  SANDBOX_PAYOUT_REJECTED,
  SandboxPayouts,
  type SandboxSettlementFeed,
  SETTLEMENT_FEED,
  SettlementDeadlines,
  SubscriptionChargesConsumer,
} from '@stablepay/charge-ledger-service';
import { verifyWebhook } from '@stablepay/merchant-sdk';
import { PaymentCommands, PaymentProjection } from '@stablepay/payments-service';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { ManualClock, SECOND } from '@stablepay/util';
import { WebhookDispatcher, WebhookEventRecorder, webhookEventId } from '@stablepay/webhook-dispatch-service';
import { type EmbeddedStack, startEmbedded } from './embedded';
import { chargeIdOf, type FactSubscription, subscriptionFacts, tx } from './subscription-facts';

/**
 * The charge webhooks through the embedded stack (SPEC Events > Subscription events rules 4-6, fiat field rules 1-6):
 * `data.charge` is the charge ledger's row as GET /merchants/:merchantId/charges lists it (created_at and the fiat
 * fields included), whichever path wrote it; a webhook is not attempted before the read model the merchant queries
 * next shows what it says (the ledger's row for charges, GET /payments/:id for payments). The subscription's charge
 * facts are appended as the subscriptions service appends them (see charge-ledger.e2e.spec.ts).
 */
const ADMIN_TOKEN = 'admin-token-for-tests-0123456789';
const FACTORY = '0x1234567890AbcdEF1234567890aBcdef12345678';
const clock = new ManualClock('2026-06-01T10:00:00.000Z');
/** The sandbox provider pays out this long (service clock) after a test-mode fiat charge is listed. */
const SANDBOX_DELAY_MS = 60 * SECOND;

type Json = Record<string, unknown>;
interface Hook {
  readonly body: string;
  readonly headers: IncomingHttpHeaders;
  readonly path: string;
  readonly event: { id: string; type: string; data: { object: Json; charge?: Json } };
}
interface Merchant {
  id: string;
  apiKey: string;
  secret: string;
  path: string;
}

describe('charge and payment webhooks: data.charge is the ledger row, nothing is attempted before it is readable', () => {
  let db: TestDatabase;
  let stack: EmbeddedStack;
  let store: EventStore;
  let receiver: Server;
  let receiverUrl: string;
  const received: Hook[] = [];

  const api = async (who: { apiKey: string }, method: string, path: string, body?: unknown) => {
    const res = await fetch(`${stack.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${who.apiKey}`,
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    return { status: res.status, body: (await res.json()) as Json };
  };
  const newMerchant = async (name: string, settlementMode: 'crypto' | 'fiat'): Promise<Merchant> => {
    const res = await fetch(`${stack.url}/admin/merchants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name, mode: 'test', settlement_mode: settlementMode }),
    });
    const created = (await res.json()) as { id: string; api_key: string };
    const path = `/hooks/${created.id}`;
    const settings = await api({ apiKey: created.api_key }, 'PATCH', '/settings', {
      webhook_url: `${receiverUrl}${path}`,
    });
    if (settings.status !== 200) throw new Error(JSON.stringify(settings.body));
    return { id: created.id, apiKey: created.api_key, secret: String(settings.body['webhook_secret']), path };
  };
  const charges = async (who: Merchant, subscriptionId: string) =>
    (await api(who, 'GET', `/merchants/${who.id}/charges?subscription_id=${subscriptionId}`)).body[
      'data'
    ] as Json[];
  const hooksOf = (who: Merchant, type: string) =>
    received.filter((h) => h.path === who.path && h.event.type === type);

  const facts = subscriptionFacts(
    () => store,
    () => clock.now().toISOString(),
  );
  const { append, subscription } = facts;
  /** Charged now (by the test clock): the settlement deadlines run from the charge's block time. */
  const charged = (owner: { id: string }, s: FactSubscription, nonce: number, writtenBy: 'api' | 'indexer') =>
    facts.charged(owner, s, nonce, writtenBy, clock.now().toISOString());
  /** Everything appended so far is in the ledger, recorded as webhook events and attempted once due. */
  const settle = async () => {
    await stack.service.app.get(SubscriptionChargesConsumer).caughtUp();
    await stack.service.app.get(ChargeLedgerProjection).caughtUp();
    await stack.service.app.get(WebhookEventRecorder).caughtUp();
    await stack.service.app.get(WebhookDispatcher).drain();
  };
  /**
   * Holds a read model back: an open transaction holding `table` in EXCLUSIVE mode blocks the projection's writes
   * (reads go on), as a projection lagging behind the webhook recorder would.
   */
  /** PGlite serves one session at a time: a lock held by a second client would stop the service itself there. */
  const skipOnPglite = (): boolean => {
    if (db.kind !== 'pglite') return false;
    console.log('skipped on PGlite: one session at a time, no second client can hold a read model back');
    return true;
  };
  const holdBack = async (table: string) => {
    const client = new Client({ connectionString: db.url });
    await client.connect();
    await client.query('BEGIN');
    await client.query(`LOCK TABLE ${table} IN EXCLUSIVE MODE`);
    return async () => {
      await client.query('COMMIT');
      await client.end();
    };
  };
  const webhookEvents = async (who: Merchant) =>
    (await api(who, 'GET', `/merchants/${who.id}/webhook-events?limit=100`)).body['data'] as Json[];

  beforeAll(async () => {
    receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        received.push({
          body,
          headers: req.headers,
          path: req.url ?? '',
          event: JSON.parse(body) as Hook['event'],
        });
        res.writeHead(200).end('ok');
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const address = receiver.address();
    if (address === null || typeof address === 'string') throw new Error('receiver has no port');
    receiverUrl = `http://127.0.0.1:${address.port}`;
    db = await createTestDatabase();
    stack = await startEmbedded({
      env: {
        DATABASE_URL: db.url,
        PORT: '0',
        ADMIN_TOKEN,
        LOG_LEVEL: 'error',
        ALLOW_LOCAL_WEBHOOKS: 'true',
        WEBHOOK_POLL_INTERVAL_MS: '50',
        PAYMENT_FACTORY_ADDRESS: FACTORY,
        SANDBOX_SETTLEMENT_DELAY_MS: String(SANDBOX_DELAY_MS),
      },
      dataDir: 'memory',
      localChains: false,
      clock,
    });
    store = stack.service.app.get<EventStore>(EVENT_STORE);
  });

  afterAll(async () => {
    await stack?.stop();
    await db?.drop();
    await new Promise<void>((resolve) => receiver.close(() => resolve()));
  });

  it('charge_succeeded on a fiat-settling business: data.charge is the listed row (created_at, fiat fields, settlement pending)', async () => {
    const m = await newMerchant('Fiat Co', 'fiat');
    const s = await subscription(m);
    await charged(m, s, 0, 'api');
    await settle();
    const [row] = await charges(m, s.subscriptionId);
    expect(row).toMatchObject({ fiat_amount: '150000', fiat_currency: 'ARS', settlement_status: 'pending' });
    const [hook] = hooksOf(m, 'subscription.charge_succeeded');
    if (!hook) throw new Error('no charge_succeeded');
    expect(verifyWebhook(hook.body, hook.headers, m.secret, { now: clock.now() })).toMatchObject({
      valid: true,
    });
    expect(hook.event.data.charge).toEqual(row);
    expect(hook.event.data.object).toMatchObject({
      object: 'subscription',
      subscription_id: s.subscriptionId,
      charge_nonce: 1,
      subscription_charge_id: row?.['id'],
      tx_hash: row?.['tx_hash'],
      fee: '1200',
    });
  });

  it('indexer first, then the subscribe call: charge_succeeded without fiat fields, then again with them (same charge id)', async () => {
    const m = await newMerchant('Backfill Co', 'fiat');
    const s = await subscription(m);
    await charged(m, s, 0, 'indexer');
    await settle();
    const [first] = hooksOf(m, 'subscription.charge_succeeded');
    expect(first?.event.data.charge).toEqual((await charges(m, s.subscriptionId))[0]);
    expect(first?.event.data.charge).toMatchObject({ fiat_amount: null, settlement_status: null });

    await append(m, s.subscriptionId, 'SubscriptionFirstChargeReported.v1', {
      chargeId: chargeIdOf(s.subscriptionId, 0),
      txHash: tx(s.n * 1000),
      reportedAt: clock.now().toISOString(),
    });
    await settle();
    const both = hooksOf(m, 'subscription.charge_succeeded');
    expect(both).toHaveLength(2);
    const [row] = await charges(m, s.subscriptionId);
    expect(both[1]?.event.data.charge).toEqual(row);
    expect(row).toMatchObject({
      id: first?.event.data.charge?.['id'],
      fiat_amount: '150000',
      settlement_status: 'pending',
    });
    expect(both[1]?.event.data.object['subscription_charge_id']).toBe(row?.['id']);
    expect(both[1]?.event.id).not.toBe(first?.event.id);
  });

  it('upgrade safe: a charge webhook has the id the subscriptions source gave its fact; reading ledger.charge.v1 from its start again records and sends nothing', async () => {
    const m = await newMerchant('Upgrade Co', 'fiat');
    const s = await subscription(m);
    const fact = await charged(m, s, 0, 'indexer');
    await append(m, s.subscriptionId, 'SubscriptionFirstChargeReported.v1', {
      chargeId: chargeIdOf(s.subscriptionId, 0),
      txHash: tx(s.n * 1000),
      reportedAt: clock.now().toISOString(),
    });
    await settle();
    // Delivery order is not guaranteed (SPEC: "Order is not guaranteed"; the dispatcher runs claims side by side),
    // so the two deliveries are told apart by id, not by arrival.
    const ids = hooksOf(m, 'subscription.charge_succeeded').map((h) => h.event.id);
    // Before the charge ledger sent charge webhooks, the subscriptions source sent this one from the same fact:
    // webhookEventDraft's id of that bus message. Same id, so the store's ON CONFLICT (id) keeps the one recorded.
    if (!fact || typeof fact.metadata.occurredAt !== 'string') throw new Error('no charge fact');
    const factEventId = webhookEventId(
      fact.id,
      'subscription.charge_succeeded',
      new Date(fact.metadata.occurredAt),
    );
    expect(ids).toHaveLength(2);
    expect(ids).toContain(factEventId);
    expect(ids.filter((id) => id !== factEventId)).toHaveLength(1);

    // A consumer group that starts the topic at its first event (Kafka's fromBeginning for a topic the group adds).
    const recorded = await webhookEvents(m);
    const deliveries = received.length;
    const recorder = stack.service.app.get(WebhookEventRecorder);
    const fromStart = await stack.service.app.get<EventBus>(EVENT_BUS).consume({
      group: 'upgrade-test.ledger-charges-from-start',
      topics: [CHARGE_TOPIC],
      handler: (message) => recorder.handle(message),
      handleBatch: (messages) => recorder.handleBatch(messages),
    });
    await fromStart.caughtUp();
    await fromStart.stop();
    await settle();
    expect(await webhookEvents(m)).toEqual(recorded);
    expect(received).toHaveLength(deliveries);
  });

  it('charge_failed: data.charge is the listed failed row (fee 0, tx_hash null), the nonces equal', async () => {
    const m = await newMerchant('Failing Co', 'crypto');
    const s = await subscription(m);
    await charged(m, s, 0, 'api');
    await append(m, s.subscriptionId, 'SubscriptionChargeFailed.v1', {
      chargeId: 'subc_failedhook0000000000001',
      nonce: 1,
      amount: '5000000',
      txHash: null,
      failureReason: 'InsufficientBalance',
      stage: 'simulation',
      failedAt: clock.now().toISOString(),
    });
    await settle();
    const [hook] = hooksOf(m, 'subscription.charge_failed');
    const failedRow = (await charges(m, s.subscriptionId)).find((c) => c['status'] === 'failed');
    expect(hook?.event.data.charge).toEqual(failedRow);
    expect(failedRow).toMatchObject({ fee: '0', tx_hash: null, created_at: expect.any(String) });
    expect(hook?.event.data.object).toMatchObject({ charge_nonce: 1, failure_reason: 'InsufficientBalance' });
    expect(hook?.event.data.object).not.toHaveProperty('fee');
  });

  it('a charge webhook waits while the ledger lags: not attempted (no attempt counted), delivered once the row is listed', async () => {
    if (skipOnPglite()) return;
    const m = await newMerchant('Lagging Ledger Co', 'crypto');
    const s = await subscription(m);
    const release = await holdBack('subscription_charges');
    try {
      await charged(m, s, 0, 'api');
      await stack.service.app.get(SubscriptionChargesConsumer).caughtUp();
      await stack.service.app.get(WebhookEventRecorder).caughtUp();
      await stack.service.app.get(WebhookDispatcher).drain();
      const [event] = (await webhookEvents(m)).filter((e) => e['type'] === 'subscription.charge_succeeded');
      expect(event).toMatchObject({ delivery_status: 'pending', attempt_count: 0 });
      expect(hooksOf(m, 'subscription.charge_succeeded')).toHaveLength(0);
      expect(await charges(m, s.subscriptionId)).toEqual([]);
    } finally {
      await release();
    }
    clock.advance(15 * SECOND);
    await settle();
    const [hook] = hooksOf(m, 'subscription.charge_succeeded');
    expect(hook?.event.data.charge).toEqual((await charges(m, s.subscriptionId))[0]);
  }, 60_000);

  it('a payment webhook waits until GET /payments/:id shows the payment as of its event', async () => {
    if (skipOnPglite()) return;
    const m = await newMerchant('Lagging Payments Co', 'crypto');
    const checkout = await api(m, 'POST', '/checkouts', { amount: '12500000', currency: 'USD' });
    if (checkout.status !== 201) throw new Error(JSON.stringify(checkout.body));
    const paymentId = String(checkout.body['payment_id']);
    const release = await holdBack('payments');
    try {
      await stack.service.app
        .get(PaymentCommands)
        .run({ id: paymentId, merchant_id: m.id, mode: 'test' }, { type: 'Cancel' });
      await stack.service.app.get(WebhookEventRecorder).caughtUp();
      await stack.service.app.get(WebhookDispatcher).drain();
      const [event] = (await webhookEvents(m)).filter((e) => e['type'] === 'payment.cancelled');
      expect(event).toMatchObject({ delivery_status: 'pending', attempt_count: 0 });
      expect(hooksOf(m, 'payment.cancelled')).toHaveLength(0);
      expect((await api(m, 'GET', `/payments/${paymentId}`)).body['status']).toBe('pending');
    } finally {
      await release();
    }
    await stack.service.app.get(PaymentProjection).caughtUp();
    clock.advance(15 * SECOND);
    await settle();
    const [hook] = hooksOf(m, 'payment.cancelled');
    expect(hook?.event.data.object).toEqual((await api(m, 'GET', `/payments/${paymentId}`)).body);
    expect(hook?.event.data.object['status']).toBe('cancelled');
  }, 60_000);

  describe('fiat settlement: the provider feed moves the row and sends the settlement webhooks (summary as data.object)', () => {
    const feed = () => stack.service.app.get<SandboxSettlementFeed>(SETTLEMENT_FEED);
    const summaries = (who: Merchant, type: string) => hooksOf(who, type).map((h) => h.event.data.object);
    /** A merchant whose subscription (priced in ARS) has its first charge (the API path's, charged now) listed. */
    const firstCharge = async (name: string, settlementMode: 'crypto' | 'fiat', price = '150000') => {
      const m = await newMerchant(name, settlementMode);
      const s = await subscription(m, { price, priceCurrency: 'ARS' });
      await charged(m, s, 0, 'api');
      await settle();
      return { m, s };
    };

    it('a failed bank transfer: delayed at once with its reason; the payout completes: settled; a report sent twice counts once', async () => {
      const { m, s } = await firstCharge('Payout Co', 'fiat');
      const chargeId = chargeIdOf(s.subscriptionId, 0);
      await feed().deliver({ chargeId, kind: 'withdraw_started' });
      const failedTransfer = await feed().deliver({ chargeId, kind: 'withdraw_failed' });
      await settle();
      const delayed = hooksOf(m, 'subscription.charge_settlement_delayed');
      expect(delayed).toHaveLength(1);
      expect(
        verifyWebhook(delayed[0]?.body ?? '', delayed[0]?.headers ?? {}, m.secret, { now: clock.now() }),
      ).toMatchObject({
        valid: true,
      });
      expect(delayed[0]?.event.data.object).toEqual({
        subscription_id: s.subscriptionId,
        charge_nonce: 0,
        amount: '5000000',
        fiat_amount: '150000',
        fiat_currency: 'ARS',
        settlement_status: 'delayed',
        settlement_failure_reason: 'rampoff_withdraw_failed',
      });
      expect((await charges(m, s.subscriptionId))[0]).toMatchObject({ settlement_status: 'delayed' });

      await feed().deliver(failedTransfer);
      await feed().deliver({ chargeId, kind: 'payout_completed' });
      await settle();
      expect(hooksOf(m, 'subscription.charge_settlement_delayed')).toHaveLength(1);
      expect(summaries(m, 'subscription.charge_settled')).toEqual([
        {
          subscription_id: s.subscriptionId,
          charge_nonce: 0,
          amount: '5000000',
          fiat_amount: '150000',
          fiat_currency: 'ARS',
          settlement_status: 'completed',
        },
      ]);
      const [row] = await charges(m, s.subscriptionId);
      expect(row).toMatchObject({ settlement_status: 'completed' });
      // The charge webhook that came first still shows the row as of the charge (settlement pending).
      expect(hooksOf(m, 'subscription.charge_succeeded')[0]?.event.data.charge).toEqual({
        ...row,
        settlement_status: 'pending',
      });
    });

    it('a compliance rejection fails the settlement with provider_rejected', async () => {
      const { m, s } = await firstCharge('Rejected Co', 'fiat');
      await feed().deliver({ chargeId: chargeIdOf(s.subscriptionId, 0), kind: 'payout_rejected' });
      await settle();
      expect(summaries(m, 'subscription.charge_settlement_failed')).toEqual([
        expect.objectContaining({
          settlement_status: 'failed',
          settlement_failure_reason: 'provider_rejected',
        }),
      ]);
      expect((await charges(m, s.subscriptionId))[0]).toMatchObject({ settlement_status: 'failed' });
    });

    it('refuses reports about an unknown charge or one without a fiat settlement, changing nothing', async () => {
      const { m, s } = await firstCharge('Crypto Settled Co', 'crypto');
      await expect(
        feed().deliver({ chargeId: 'subc_unknown000000000000000', kind: 'payout_completed' }),
      ).rejects.toMatchObject({
        code: 'resource_missing',
      });
      await expect(
        feed().deliver({ chargeId: chargeIdOf(s.subscriptionId, 0), kind: 'payout_completed' }),
      ).rejects.toMatchObject({ code: 'charge_not_fiat_settled' });
      await settle();
      expect(hooksOf(m, 'subscription.charge_settled')).toHaveLength(0);
      expect((await charges(m, s.subscriptionId))[0]).toMatchObject({ settlement_status: null });
    });

    describe('the sandbox provider pays out on its own (SANDBOX_SETTLEMENT_DELAY_MS, magic fiat amounts)', () => {
      const payouts = () => stack.service.app.get(SandboxPayouts);
      /** Moves the service clock and lets the sandbox send what is due by then. */
      const after = async (ms: number) => {
        clock.advance(ms);
        await payouts().tick();
        await settle();
      };

      it('any other amount: pending until the delay has passed, then completed in GET /merchants/:id/charges with charge_settled', async () => {
        const { m, s } = await firstCharge('Sandbox Payout Co', 'fiat');
        await after(SANDBOX_DELAY_MS - SECOND);
        expect((await charges(m, s.subscriptionId))[0]).toMatchObject({ settlement_status: 'pending' });
        expect(hooksOf(m, 'subscription.charge_settled')).toHaveLength(0);

        await after(SECOND);
        const [row] = await charges(m, s.subscriptionId);
        expect(row).toMatchObject({
          status: 'succeeded',
          fiat_amount: '150000',
          settlement_status: 'completed',
        });
        const [hook] = hooksOf(m, 'subscription.charge_settled');
        expect(
          verifyWebhook(hook?.body ?? '', hook?.headers ?? {}, m.secret, { now: clock.now() }),
        ).toMatchObject({
          valid: true,
        });
        expect(hook?.event.data.object).toEqual({
          subscription_id: s.subscriptionId,
          charge_nonce: 0,
          amount: '5000000',
          fiat_amount: '150000',
          fiat_currency: 'ARS',
          settlement_status: 'completed',
        });
        // Sent again (another replica, a restart): the reports are recorded once, nothing more is sent.
        await after(SANDBOX_DELAY_MS);
        expect(hooksOf(m, 'subscription.charge_settled')).toHaveLength(1);
      });

      it(`${SANDBOX_PAYOUT_REJECTED}: the provider rejects the payout -> failed provider_rejected`, async () => {
        const { m, s } = await firstCharge('Sandbox Rejected Co', 'fiat', SANDBOX_PAYOUT_REJECTED);
        await after(SANDBOX_DELAY_MS);
        expect(summaries(m, 'subscription.charge_settlement_failed')).toEqual([
          expect.objectContaining({
            fiat_amount: SANDBOX_PAYOUT_REJECTED,
            settlement_status: 'failed',
            settlement_failure_reason: 'provider_rejected',
          }),
        ]);
        expect((await charges(m, s.subscriptionId))[0]).toMatchObject({ settlement_status: 'failed' });
      });

      it(`${SANDBOX_PAYOUT_LATE}: the bank transfer fails (delayed rampoff_withdraw_failed), then completes one delay later`, async () => {
        const { m, s } = await firstCharge('Sandbox Late Co', 'fiat', SANDBOX_PAYOUT_LATE);
        await after(SANDBOX_DELAY_MS);
        expect(summaries(m, 'subscription.charge_settlement_delayed')).toEqual([
          expect.objectContaining({
            settlement_status: 'delayed',
            settlement_failure_reason: 'rampoff_withdraw_failed',
          }),
        ]);
        expect((await charges(m, s.subscriptionId))[0]).toMatchObject({ settlement_status: 'delayed' });
        await after(SANDBOX_DELAY_MS);
        expect(summaries(m, 'subscription.charge_settled')).toEqual([
          expect.objectContaining({ settlement_status: 'completed' }),
        ]);
        expect((await charges(m, s.subscriptionId))[0]).toMatchObject({ settlement_status: 'completed' });
      });

      it(`an ad-hoc charge is paid out by the amount it was quoted at, not the plan price: quoted ${SANDBOX_PAYOUT_REJECTED} on a 150000 plan -> provider_rejected; quoted 123457 -> settled with fiat_amount 123457 in the summary, the row keeps 150000`, async () => {
        const m = await newMerchant('Sandbox Add-on Co', 'fiat');
        const s = await subscription(m, { price: '150000', priceCurrency: 'ARS' });
        await charged(m, s, 0, 'api');
        const addOn = (nonce: number, quotedFiatAmount: string) =>
          facts.charged(m, s, nonce, 'api', clock.now().toISOString(), { quotedFiatAmount });
        await addOn(1, SANDBOX_PAYOUT_REJECTED);
        await addOn(2, '123457');
        await settle();
        await after(SANDBOX_DELAY_MS);
        const failed = summaries(m, 'subscription.charge_settlement_failed');
        expect(failed).toEqual([
          expect.objectContaining({
            charge_nonce: 1,
            fiat_amount: SANDBOX_PAYOUT_REJECTED,
            settlement_failure_reason: 'provider_rejected',
          }),
        ]);
        expect(summaries(m, 'subscription.charge_settled')).toEqual(
          expect.arrayContaining([
            expect.objectContaining({ charge_nonce: 0, fiat_amount: '150000' }),
            expect.objectContaining({
              charge_nonce: 2,
              fiat_amount: '123457',
              settlement_status: 'completed',
            }),
          ]),
        );
        const rows = await charges(m, s.subscriptionId);
        expect(rows.map((r) => [r['charge_nonce'], r['fiat_amount'], r['settlement_status']])).toEqual(
          expect.arrayContaining([
            [0, '150000', 'completed'],
            [1, '150000', 'failed'],
            [2, '150000', 'completed'],
          ]),
        );
      });

      it('a crypto-settled business: the sandbox reports nothing', async () => {
        const { m, s } = await firstCharge('Sandbox Crypto Co', 'crypto');
        await after(SANDBOX_DELAY_MS);
        expect((await charges(m, s.subscriptionId))[0]).toMatchObject({
          fiat_amount: '150000',
          settlement_status: null,
        });
        expect(hooksOf(m, 'subscription.charge_settled')).toHaveLength(0);
      });
    });

    it(`the deadlines by the clock (sandbox amount ${SANDBOX_PAYOUT_NEVER_CREDITED}: never credited): after six hours -> delayed once; after 72 hours -> failed deposit_not_credited`, async () => {
      const { m, s } = await firstCharge('Slow Provider Co', 'fiat', SANDBOX_PAYOUT_NEVER_CREDITED);
      const deadlines = stack.service.app.get(SettlementDeadlines);
      clock.advance(6 * 3_600 * SECOND - SECOND);
      await deadlines.tick();
      await settle();
      expect(hooksOf(m, 'subscription.charge_settlement_delayed')).toHaveLength(0);
      clock.advance(SECOND);
      await deadlines.tick();
      await settle();
      await deadlines.tick();
      await settle();
      expect(summaries(m, 'subscription.charge_settlement_delayed')).toEqual([
        expect.objectContaining({
          settlement_status: 'delayed',
          settlement_failure_reason: 'deposit_not_credited',
        }),
      ]);
      clock.advance(66 * 3_600 * SECOND);
      await deadlines.tick();
      await settle();
      expect(summaries(m, 'subscription.charge_settlement_failed')).toEqual([
        expect.objectContaining({
          settlement_status: 'failed',
          settlement_failure_reason: 'deposit_not_credited',
        }),
      ]);
      expect((await charges(m, s.subscriptionId))[0]).toMatchObject({ settlement_status: 'failed' });
    });
  });
});
