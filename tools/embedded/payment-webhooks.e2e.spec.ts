import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { verifyWebhook } from '@stablepay/merchant-sdk';
import { PaymentCommands } from '@stablepay/payments-service';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { ManualClock } from '@stablepay/util';
import { type EmbeddedStack, startEmbedded } from './embedded';

/**
 * Every payment event is a signed webhook whose `data.object` is the payment object as of that event (issue 10),
 * through the webhook source registry; the durable expiry timer expires a pending payment by the injected clock;
 * facts appended by other use cases of the aggregate (here: the chain feed's, appended directly) show up in the
 * payment object, the webhooks and the hosted status without the projection knowing about them.
 */
const FACTORY = '0x1234567890AbcdEF1234567890aBcdef12345678';
const BASE = 'eip155:8453';
const USDC_BASE = `${BASE}/erc20:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913`;
const USDT_POLYGON = 'eip155:137/erc20:0xc2132D05D31c914a87C6611C10748AEb04B58e8F';
const PAYER = '0x1111111111111111111111111111111111111111';
const SETTLEMENT = '0x3333333333333333333333333333333333333333';
const clock = new ManualClock('2026-06-01T10:00:00.000Z');

type Json = Record<string, unknown>;
interface Hook {
  readonly body: string;
  readonly headers: IncomingHttpHeaders;
  readonly event: { id: string; type: string; object: string; data: { object: Json } };
}

describe('payment events are delivered as signed webhooks; pending payments expire on time', () => {
  let db: TestDatabase;
  let stack: EmbeddedStack;
  let receiver: Server;
  let secret: string;
  let commands: PaymentCommands;
  const received: Hook[] = [];

  const api = async (method: string, path: string, body?: unknown, auth = true) => {
    const res = await fetch(`${stack.url}${path}`, {
      method,
      headers: {
        ...(auth ? { authorization: `Bearer ${stack.demoApiKey}` } : {}),
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    return { status: res.status, body: (await res.json()) as Json };
  };

  const waitFor = async (type: string, paymentId: string): Promise<Hook> => {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const hit = received.find((r) => r.event.type === type && r.event.data.object['id'] === paymentId);
      if (hit) return hit;
      if (Date.now() > deadline)
        throw new Error(`no ${type} of ${paymentId}; got ${received.map((r) => r.event.type).join(', ')}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  const eventually = async (probe: () => Promise<boolean>) => {
    const deadline = Date.now() + 30_000;
    while (!(await probe())) {
      if (Date.now() > deadline) throw new Error('condition not met in time');
      await new Promise((r) => setTimeout(r, 50));
    }
  };

  const newCheckout = async (body: Json = {}) => {
    const res = await api('POST', '/checkouts', { amount: '12500000', currency: 'USD', ...body });
    if (res.status !== 201) throw new Error(JSON.stringify(res.body));
    return { id: String(res.body['id']), paymentId: String(res.body['payment_id']) };
  };
  /** The payment as the chain feed addresses it (the demo merchant's, test mode). */
  const owner = (paymentId: string) => ({
    id: paymentId,
    merchant_id: stack.demoMerchantId,
    mode: 'test' as const,
  });

  beforeAll(async () => {
    receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        received.push({ body, headers: req.headers, event: JSON.parse(body) as Hook['event'] });
        res.writeHead(200).end('ok');
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
        LOG_LEVEL: 'error',
        ALLOW_LOCAL_WEBHOOKS: 'true',
        WEBHOOK_POLL_INTERVAL_MS: '50',
        PAYMENT_EXPIRY_POLL_MS: '50',
        PAYMENT_FACTORY_ADDRESS: FACTORY,
      },
      dataDir: 'memory',
      localChains: false,
      clock,
    });
    commands = stack.service.app.get(PaymentCommands);
    const settings = await api('PATCH', '/settings', {
      webhook_url: `http://127.0.0.1:${address.port}/hooks`,
    });
    if (settings.status !== 200) throw new Error(JSON.stringify(settings.body));
    secret = String(settings.body['webhook_secret']);
  });

  afterAll(async () => {
    await stack?.stop();
    await db?.drop();
    await new Promise<void>((resolve) => receiver.close(() => resolve()));
  });

  it('sends payment.cancelled, signed, with the payment object as data.object', async () => {
    const { id, paymentId } = await newCheckout({ metadata: { order_id: 'o-9' } });
    expect((await api('POST', `/checkouts/${id}/cancel`)).status).toBe(200);
    const hook = await waitFor('payment.cancelled', paymentId);
    expect(verifyWebhook(hook.body, hook.headers, secret, { now: clock.now() })).toMatchObject({
      valid: true,
    });
    expect(hook.headers['x-webhook-id']).toBe(hook.event.id);
    expect(hook.event.object).toBe('event');
    expect(hook.event.data.object).toEqual((await api('GET', `/payments/${paymentId}`)).body);
    expect(hook.event.data.object).toMatchObject({ status: 'cancelled', metadata: { order_id: 'o-9' } });
  });

  it('shows chain facts in the payment object and sends deposit_confirmed then settled, each object as of its event', async () => {
    const { id, paymentId } = await newCheckout();
    const me = owner(paymentId);
    const tx = `0x${'ab'.repeat(32)}`;
    const transfer = {
      txHash: tx,
      logIndex: 3,
      from: PAYER,
      asset: USDC_BASE,
      chain: BASE,
      amount: '12500000',
      blockNumber: '1234',
    };
    await commands.run(me, { type: 'ObserveTransfer', transfer, blockTime: clock.now() });
    // A wrong-token transfer on another chain is listed and counted, never funding.
    await commands.run(me, {
      type: 'ObserveTransfer',
      transfer: {
        ...transfer,
        txHash: `0x${'cd'.repeat(32)}`,
        asset: USDT_POLYGON,
        chain: 'eip155:137',
        amount: '5',
      },
      blockTime: clock.now(),
    });
    await eventually(
      async () =>
        (await api('GET', `/hosted/pay/${id}/status`, undefined, false)).body['status'] === 'confirming',
    );

    await commands.run(me, { type: 'ConfirmTransfer', chain: BASE, txHash: tx, logIndex: 3 });
    const confirmed = await waitFor('payment.deposit_confirmed', paymentId);
    expect(verifyWebhook(confirmed.body, confirmed.headers, secret, { now: clock.now() })).toMatchObject({
      valid: true,
    });
    expect(confirmed.event.data.object).toMatchObject({
      id: paymentId,
      status: 'pending',
      amount_paid: '12500000',
      detected_asset: USDC_BASE,
      detected_token_symbol: 'USDC',
      detected_chain: BASE,
      token_amount: '12500000',
      token_amount_decimal: '12.5',
      payer_addresses: [PAYER],
      deploy_tx_hash: null,
      non_funding_transactions_count: 1,
    });
    expect(confirmed.event.data.object['transactions']).toEqual([
      {
        tx_hash: tx,
        log_index: 3,
        from: PAYER,
        minted: false,
        amount: '12500000',
        asset: USDC_BASE,
        token_symbol: 'USDC',
        chain: BASE,
        block_number: '1234',
        is_funding: true,
        non_funding_reason: null,
        confirmed: true,
      },
      expect.objectContaining({ is_funding: false, non_funding_reason: 'wrong_chain', confirmed: false }),
    ]);

    await commands.run(me, { type: 'RecordScreening', result: { kind: 'clear', addresses: [PAYER] } });
    const deployTx = `0x${'ef'.repeat(32)}`;
    await commands.run(me, {
      type: 'RecordDeployed',
      method: 'DIRECT',
      txHash: deployTx,
      chain: BASE,
      payer: PAYER,
      payerFinalAt: new Date(clock.now().getTime() + 86_400_000),
      amount: '12500000',
      settlementAddress: SETTLEMENT,
    });
    // payment.settled goes out once the deploy's block has the chain's confirmations (the deposit worker's call).
    await commands.run(me, { type: 'ConfirmDeployment', txHash: deployTx });
    const settled = await waitFor('payment.settled', paymentId);
    expect(verifyWebhook(settled.body, settled.headers, secret, { now: clock.now() })).toMatchObject({
      valid: true,
    });
    expect(settled.event.data.object).toMatchObject({ status: 'settled', deploy_tx_hash: deployTx });
    // Redelivered or not, the earlier event keeps the object as of its own event.
    expect(
      (await waitFor('payment.deposit_confirmed', paymentId)).event.data.object['deploy_tx_hash'],
    ).toBeNull();

    // The run above does not wait for the read model (the gateway's commands do): the projection catches up.
    await eventually(async () => (await api('GET', `/payments/${paymentId}`)).body['status'] === 'settled');
    const payment = await api('GET', `/payments/${paymentId}`);
    expect(payment.body).toMatchObject({
      status: 'settled',
      deploy_tx_hash: deployTx,
      amount_paid: '12500000',
    });
    expect((await api('GET', `/checkouts/${id}`)).body['status']).toBe('paid');
    expect((await api('GET', `/hosted/pay/${id}/status`, undefined, false)).body).toMatchObject({
      status: 'paid',
      payment_status: 'settled',
      detected_chain: BASE,
    });
    const cancel = await api('POST', `/checkouts/${id}/cancel`);
    expect(cancel.status).toBe(409);
  });

  it('expires pending payments once expires_at passes by the injected clock, with payment.expired', async () => {
    const untouched = await newCheckout({ expires_in: 300 });
    const partial = await newCheckout({ expires_in: 300 });
    const later = await newCheckout({ expires_in: 3600 });
    await commands.run(owner(partial.paymentId), {
      type: 'ObserveTransfer',
      transfer: {
        txHash: `0x${'12'.repeat(32)}`,
        logIndex: 0,
        from: PAYER,
        asset: USDC_BASE,
        chain: BASE,
        amount: '1000000',
        blockNumber: '10',
      },
      blockTime: clock.now(),
    });
    clock.advance(301_000);
    for (const c of [untouched, partial]) {
      const hook = await waitFor('payment.expired', c.paymentId);
      expect(verifyWebhook(hook.body, hook.headers, secret, { now: clock.now() })).toMatchObject({
        valid: true,
      });
      expect(hook.event.data.object).toMatchObject({ status: 'expired', expires_at: expect.any(String) });
      // The webhook and the read model are separate consumers of the same event: the read model catches up.
      await eventually(async () => (await api('GET', `/checkouts/${c.id}`)).body['status'] === 'expired');
    }
    expect((await api('GET', `/payments/${partial.paymentId}`)).body).toMatchObject({
      status: 'expired',
      amount_paid: '1000000',
    });
    expect((await api('GET', `/payments/${later.paymentId}`)).body['status']).toBe('pending');
    expect(
      received.some(
        (r) => r.event.type === 'payment.expired' && r.event.data.object['id'] === later.paymentId,
      ),
    ).toBe(false);
    const cancel = await api('POST', `/checkouts/${untouched.id}/cancel`);
    expect(cancel.status).toBe(409);
  });
});
