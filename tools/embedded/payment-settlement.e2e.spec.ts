import { createServer, type Server } from 'node:http';
import { Wallet } from 'ethers';
import { connectTestStablecoin } from '@stablepay/contracts';
import { ANVIL_DEV_PRIVATE_KEYS, localChainProvider } from '@stablepay/local-chains';
import { verifyWebhook } from '@stablepay/merchant-sdk';
import { MerchantChainRegistration } from '@stablepay/merchants-service';
import {
  PAYMENT_SETTLEMENT_FEED,
  type PaymentObject,
  PaymentSettlementDeadlines,
  type SandboxPaymentSettlementFeed,
} from '@stablepay/payments-service';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { ManualClock } from '@stablepay/util';
import { type EmbeddedStack, startEmbedded } from './embedded';

/**
 * The fiat settlement of a fiat-settled business's one-time payment (SPEC Events > Fiat settlement delay and failure,
 * States > Payment "paid order, fiat-settled -> failed"), through HTTP on a local chain: a DIRECT payment is paid on
 * anvil and settles; then the settlement provider's reports (the sandbox feed) and SPEC's deadlines (the payments
 * service's durable timer, by the injected clock) move its payout, with signed payment.settlement_delayed /
 * payment.settlement_failed webhooks whose data.object is the payment as GET /payments/:id shows it.
 */
const ADMIN_TOKEN = 'admin-token-for-tests-0123456789';
const HOUR = 3_600_000;

async function until<T>(probe: () => Promise<T | null | undefined | false>, what: string): Promise<T> {
  for (let i = 0; i < 900; i++) {
    const value = await probe();
    if (value) return value;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

interface Hook {
  readonly type: string;
  readonly object: PaymentObject & Record<string, unknown>;
}

describe('fiat settlement of one-time payments, on chain through HTTP', () => {
  let db: TestDatabase;
  let stack: EmbeddedStack;
  let receiver: Server;
  let apiKey: string;
  let webhookSecret: string;
  const hooks: Hook[] = [];
  const clock = new ManualClock(new Date());

  const http = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${stack.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${apiKey}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  const ok = async (method: string, path: string, body?: unknown) => {
    const res = await http(method, path, body);
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body;
  };

  beforeAll(async () => {
    receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        // Only deliveries whose signature verifies count (the suite moves the service clock by days).
        const verified = verifyWebhook(body, req.headers, webhookSecret, {
          now: clock.now(),
          toleranceSeconds: 7 * 86_400,
        });
        if (verified.valid) {
          const event = JSON.parse(body) as { type: string; data: { object: Hook['object'] } };
          hooks.push({ type: event.type, object: event.data.object });
        }
        res.writeHead(verified.valid ? 200 : 400).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const address = receiver.address();
    if (address === null || typeof address === 'string') throw new Error('receiver has no port');
    db = await createTestDatabase();
    stack = await startEmbedded({
      env: {
        DATABASE_URL: db.url,
        PORT: '0',
        ADMIN_TOKEN,
        LOG_LEVEL: 'error',
        LOCAL_CHAIN_IDS: '8453',
        WEBHOOK_POLL_INTERVAL_MS: '50',
      },
      dataDir: 'memory',
      clock,
    });
    const created = (await (
      await fetch(`${stack.url}/admin/merchants`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'Pampa Fiat SA', mode: 'test', settlement_mode: 'fiat' }),
      })
    ).json()) as { id: string; api_key: string };
    apiKey = created.api_key;
    await ok('POST', '/settings', {
      merchant_signer: Wallet.createRandom().address,
      settlement_address: Wallet.createRandom().address,
    });
    await ok('PUT', '/payments/settlement', {
      fiat: {
        currency: 'usd',
        beneficiary_name: 'Pampa Fiat SA',
        account_number: '0000003100010000000001',
        country: 'ar',
      },
    });
    const hooked = await ok('PATCH', '/settings', { webhook_url: `http://127.0.0.1:${address.port}/hooks` });
    webhookSecret = String(hooked['webhook_secret']);
    const registration = stack.service.app.get(MerchantChainRegistration);
    await until(
      async () => (await registration.statusOf(created.id))[0]?.status === 'registered',
      'registration',
    );
  }, 180_000);

  afterAll(async () => {
    await stack?.stop();
    await db?.drop();
    await new Promise<void>((resolve) => receiver?.close(() => resolve()));
  });

  const payment = async (id: string) => (await ok('GET', `/payments/${id}`)) as unknown as PaymentObject;
  const hookArrives = (id: string, type: string) =>
    until(async () => hooks.find((h) => h.object.id === id && h.type === type), `webhook ${type} of ${id}`);
  const hooksOf = (id: string, type: string) => hooks.filter((h) => h.object.id === id && h.type === type);

  /** A DIRECT checkout paid in full from a customer key on anvil, once GET /payments/:id says settled. */
  async function settledPayment(): Promise<PaymentObject> {
    const created = await ok('POST', '/checkouts', { amount: '12500000', currency: 'USD', method: 'DIRECT' });
    const id = String(created['payment_id']);
    const { deposit_address: to } = await payment(id);
    const local = stack.chains?.chains[0];
    if (!local) throw new Error('no local chain');
    const provider = localChainProvider(local.rpcUrl, local.chainId);
    try {
      const payer = new Wallet(ANVIL_DEV_PRIVATE_KEYS[3], provider);
      const token = connectTestStablecoin(local.addresses.stablecoins.USDC, payer);
      await (await token.mint(payer.address, 12_500_000n)).wait();
      await (await token.transfer(to, 12_500_000n)).wait();
    } finally {
      provider.destroy();
    }
    await hookArrives(id, 'payment.settled');
    return until(async () => {
      const p = await payment(id);
      return p.status === 'settled' ? p : null;
    }, `payment ${id} settled`);
  }

  it('the provider reports a failed bank transfer (delayed), then rejects the payout (failed): signed webhooks, GET shows failed with the reason', async () => {
    const settled = await settledPayment();
    expect(settled.settlement_status).toBe('pending');
    expect(settled.settlement_failure_reason).toBeUndefined();
    const feed = stack.service.app.get<SandboxPaymentSettlementFeed>(PAYMENT_SETTLEMENT_FEED);
    for (const kind of ['deposit_credited', 'withdraw_started', 'withdraw_failed'] as const)
      await feed.deliver({ paymentId: settled.id, kind });

    const delayed = await hookArrives(settled.id, 'payment.settlement_delayed');
    expect(delayed.object).toMatchObject({
      id: settled.id,
      status: 'settled',
      settlement_status: 'delayed',
      settlement_failure_reason: 'rampoff_withdraw_failed',
    });
    // The same report delivered again (the provider retrying) records nothing more.
    const report = await feed.deliver({
      paymentId: settled.id,
      kind: 'payout_rejected',
      id: 'prv_rejected_1',
    });
    await feed.deliver({ ...report });

    const failed = await hookArrives(settled.id, 'payment.settlement_failed');
    expect(failed.object).toMatchObject({
      id: settled.id,
      status: 'failed',
      settlement_status: 'failed',
      settlement_failure_reason: 'provider_rejected',
      failure_reason: 'provider_rejected',
    });
    const read = await until(async () => {
      const p = await payment(settled.id);
      return p.status === 'failed' ? p : null;
    }, 'GET to say failed');
    expect(read).toEqual(failed.object);
    expect(hooksOf(settled.id, 'payment.settlement_delayed')).toHaveLength(1);
    expect(hooksOf(settled.id, 'payment.settlement_failed')).toHaveLength(1);
    // A provider report about a payment that has no payout (unknown id) is refused, so the provider retries it.
    await expect(feed.deliver({ paymentId: 'pay_unknown', kind: 'payout_completed' })).rejects.toMatchObject({
      status: 404,
    });
  }, 120_000);

  it('the deadlines by the injected clock: never credited -> payment.settlement_delayed at six hours (still settled), failed at 72', async () => {
    const settled = await settledPayment();
    const deadlines = stack.service.app.get(PaymentSettlementDeadlines);
    clock.advance(6 * HOUR - 1000);
    await deadlines.tick();
    clock.advance(1000);
    // The row's due time is written by the projection, which has caught up once GET said settled.
    await deadlines.tick();
    const delayed = await hookArrives(settled.id, 'payment.settlement_delayed');
    expect(delayed.object).toMatchObject({
      status: 'settled',
      settlement_status: 'delayed',
      settlement_failure_reason: 'deposit_not_credited',
    });
    await until(
      async () => (await payment(settled.id)).settlement_status === 'delayed',
      'GET to say delayed',
    );
    await deadlines.tick(); // nothing more until 72 hours
    expect(hooksOf(settled.id, 'payment.settlement_delayed')).toHaveLength(1);

    clock.advance(66 * HOUR);
    await deadlines.tick();
    const failed = await hookArrives(settled.id, 'payment.settlement_failed');
    expect(failed.object).toMatchObject({
      status: 'failed',
      settlement_status: 'failed',
      settlement_failure_reason: 'deposit_not_credited',
    });
    expect(
      await until(async () => {
        const p = await payment(settled.id);
        return p.status === 'failed' ? p : null;
      }, 'GET to say failed'),
    ).toMatchObject({
      settlement_failure_reason: 'deposit_not_credited',
      failure_reason: 'deposit_not_credited',
    });
  }, 120_000);
});
