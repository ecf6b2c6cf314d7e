import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { Wallet, id } from 'ethers';
import { DataSource } from 'typeorm';
import { EVENT_STORE } from '@stablepay/aggregate';
import {
  connectPaymentDeposit,
  connectStablepayRegistry,
  connectTestStablecoin,
  toOnChainId,
} from '@stablepay/contracts';
import type { EventStore } from '@stablepay/event-store';
import { ANVIL_DEV_PRIVATE_KEYS, localChainProvider } from '@stablepay/local-chains';
import { signCapture, verifyWebhook } from '@stablepay/merchant-sdk';
import { paymentStreamId } from '@stablepay/payments-service';
import { createTestDatabase, eventually, type TestDatabase } from '@stablepay/testing';
import { ManualClock } from '@stablepay/util';
import { type EmbeddedStack, startEmbedded } from './embedded';

/**
 * Movements out of a deployed deposit that the payments service did not send reach the payment through the
 * indexer (the deposit contract is watched from its deployment): a TWO_STEP escrow captured by a third party who
 * submits the merchant's signed capture to the contract itself, and the payer's own reclaim after the authorization
 * expiry. Each moves the payment and sends its signed webhook; our own capture, seen by both its receipt and the
 * indexer, is one fact. Through HTTP on the embedded stack with a local anvil.
 */
type Json = Record<string, unknown>;
const CHAIN = 'eip155:8453';
const ORDER = '100000000'; // 100.000000 USD
const HOUR = 3_600;
const DAY = 86_400;
/** Payments record chain facts this deep (CHAIN_CONFIRMATIONS), so a reorg can undo a sighting before that. */
const CONFIRMATIONS = 3;

interface Hook {
  readonly body: string;
  readonly headers: IncomingHttpHeaders;
  readonly event: { id: string; type: string; data: { object: Json } };
}

const until = <T>(read: () => Promise<T>, done: (v: T) => boolean, what: string): Promise<T> =>
  eventually(read, done, what, { timeoutMs: 30_000, intervalMs: 100 });

describe('outflows someone else sends from a deposit reach the payment through the indexer', () => {
  let db: TestDatabase;
  let stack: EmbeddedStack;
  let receiver: Server;
  let secret: string;
  const received: Hook[] = [];
  const clock = new ManualClock(new Date());
  const merchantSigner = new Wallet(id('payment-deposit-outflows e2e merchant signer'));
  const settlement = Wallet.createRandom().address;

  const api = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${stack.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${stack.demoApiKey}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    return { status: res.status, body: (text ? JSON.parse(text) : {}) as Json };
  };

  const local = () => {
    const chain = stack.chains?.chains.find((c) => c.caip2 === CHAIN);
    if (!chain) throw new Error('no local chain');
    return chain;
  };
  const provider = () => localChainProvider(local().rpcUrl, local().chainId);
  const payer = () => new Wallet(ANVIL_DEV_PRIVATE_KEYS[5] ?? '', provider());
  /** Neither the merchant, the payer nor the operator: anyone who got hold of the merchant's signed capture. */
  const stranger = () => new Wallet(ANVIL_DEV_PRIVATE_KEYS[6] ?? '', provider());
  const usdc = () => local().addresses.stablecoins.USDC;
  const balance = (holder: string) => connectTestStablecoin(usdc(), provider()).balanceOf(holder);
  const chainTime = async () => BigInt((await provider().getBlock('latest'))?.timestamp ?? 0);
  const payment = async (paymentId: string) => (await api('GET', `/payments/${paymentId}`)).body;
  /** The blocks that give the latest one the payments service's CONFIRMATIONS. */
  const confirm = () => provider().send('anvil_mine', [`0x${(CONFIRMATIONS - 1).toString(16)}`]);

  const hook = (type: string, paymentId: string) =>
    until(
      async () => received.find((r) => r.event.type === type && r.event.data.object['id'] === paymentId),
      (h) => h !== undefined,
      `${type} of ${paymentId}`,
    ) as Promise<Hook>;
  const hooksOf = (type: string, paymentId: string) =>
    received.filter((r) => r.event.type === type && r.event.data.object['id'] === paymentId);

  const eventTypes = async (paymentId: string) => {
    const store = stack.service.app.get<EventStore>(EVENT_STORE, { strict: false });
    return (await store.readStream(paymentStreamId(paymentId))).map((e) => e.type);
  };
  const outflowRows = async (paymentId: string) => {
    const rows: { kind: string; state: string }[] = await stack.service.app
      .get(DataSource)
      .query('SELECT kind, state FROM payment_deposit_outflows WHERE payment_id = $1', [paymentId]);
    return rows;
  };

  /** A TWO_STEP checkout paid from an anvil wallet and deployed by the service's own flow. */
  const escrowed = async (extra: Json = {}): Promise<Json> => {
    const created = await api('POST', '/checkouts', {
      amount: ORDER,
      currency: 'USD',
      method: 'TWO_STEP',
      accepted_chains: [CHAIN],
      accepted_tokens: ['USDC'],
      ...extra,
    });
    expect(created.status).toBe(201);
    const paymentId = String(created.body['payment_id']);
    const deposit = String((await payment(paymentId))['deposit_address']);
    const coin = connectTestStablecoin(usdc(), payer());
    await (await coin.mint(payer().address, BigInt(ORDER))).wait();
    await (await coin.transfer(deposit, BigInt(ORDER))).wait();
    await confirm();
    return until(
      () => payment(paymentId),
      (p) => p['status'] === 'escrow_confirmed',
      'the escrow deployed by the payment flow',
    );
  };

  const signedCapture = async (p: Json, amount: bigint) => {
    const deadline = (await chainTime()) + 3_600n;
    const epoch = await connectStablepayRegistry(local().addresses.registry, provider()).merchantEpoch(
      toOnChainId(stack.demoMerchantId),
    );
    const { signature } = await signCapture(
      merchantSigner,
      { chain: String(p['detected_chain']), verifyingContract: String(p['deposit_address']) },
      {
        paymentId: String(p['on_chain_id']),
        token: String(p['detected_asset']),
        amount,
        epoch,
        deadline,
      },
    );
    return { deadline, signature };
  };

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
        STABLEPAY_LOCAL_CHAINS: 'true',
        LOCAL_CHAIN_IDS: '8453',
        INDEXER_POLL_MS: '100',
        ALLOW_LOCAL_WEBHOOKS: 'true',
        WEBHOOK_POLL_INTERVAL_MS: '50',
        CHAIN_CONFIRMATIONS: String(CONFIRMATIONS),
      },
      dataDir: 'memory',
      clock,
    });
    const signer = await api('POST', '/settings', {
      merchant_signer: merchantSigner.address,
      settlement_address: settlement,
    });
    expect(signer.status).toBe(200);
    const settings = await api('PATCH', '/settings', {
      webhook_url: `http://127.0.0.1:${address.port}/hooks`,
    });
    expect(settings.status).toBe(200);
    secret = String(settings.body['webhook_secret']);
    await until(
      () =>
        connectStablepayRegistry(local().addresses.registry, provider()).merchantAuth(
          toOnChainId(stack.demoMerchantId),
        ),
      (auth) => auth.signer === merchantSigner.address,
      'the merchant registered on chain',
    );
  }, 120_000);

  afterAll(async () => {
    await stack?.stop();
    await db?.drop();
    await new Promise<void>((resolve) => receiver?.close(() => resolve()));
  });

  it("records a capture a third party submitted with the merchant's signature: settled, payment.settled signed", async () => {
    const p = await escrowed();
    const paymentId = String(p['id']);
    const { deadline, signature } = await signedCapture(p, BigInt(ORDER));
    const before = await balance(settlement);
    const deposit = connectPaymentDeposit(String(p['deposit_address']), stranger());
    await (await deposit.capture(usdc(), BigInt(ORDER), deadline, signature)).wait();
    expect((await balance(settlement)) - before).toBe(BigInt(ORDER));
    await confirm();

    const settled = await until(
      () => payment(paymentId),
      (x) => x['status'] === 'settled',
      'the payment settled by the indexed capture',
    );
    expect(settled).toMatchObject({ amount_captured: ORDER, amount_refunded: '0' });
    const webhook = await hook('payment.settled', paymentId);
    expect(verifyWebhook(webhook.body, webhook.headers, secret, { now: clock.now() })).toMatchObject({
      valid: true,
    });
    expect(webhook.event.data.object).toMatchObject({
      id: paymentId,
      status: 'settled',
      amount_captured: ORDER,
    });
  });

  it('records our own capture once though both its receipt and the indexer saw it', async () => {
    const p = await escrowed();
    const paymentId = String(p['id']);
    const { deadline, signature } = await signedCapture(p, BigInt(ORDER));
    const res = await api('POST', `/payments/${paymentId}/capture`, {
      amount: ORDER,
      deadline: deadline.toString(),
      signature,
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'settled' });
    // The indexer's sighting of the same log is recorded too, and appends nothing.
    await confirm();
    await until(
      () => outflowRows(paymentId),
      (rows) => rows.some((r) => r.kind === 'captured' && r.state === 'recorded'),
      "the indexer's sighting of our capture recorded",
    );
    expect((await eventTypes(paymentId)).filter((t) => t === 'PaymentCaptured.v1')).toHaveLength(1);
    await hook('payment.settled', paymentId);
    expect(hooksOf('payment.settled', paymentId)).toHaveLength(1);
  });

  it('drops a sighting a reorg takes back before its confirmations; the capture sent again on the new fork counts', async () => {
    const p = await escrowed();
    const paymentId = String(p['id']);
    const { deadline, signature } = await signedCapture(p, BigInt(ORDER));
    const snapshot = (await provider().send('evm_snapshot', [])) as string;
    const deposit = () => connectPaymentDeposit(String(p['deposit_address']), stranger());
    await (await deposit().capture(usdc(), BigInt(ORDER), deadline, signature)).wait();
    await until(
      () => outflowRows(paymentId),
      (rows) => rows.length === 1 && rows[0]?.state === 'observed',
      'the capture seen by the indexer, not yet confirmed',
    );
    await provider().send('evm_revert', [snapshot]);
    // A longer fork without the capture: the follower sees the parent hashes change and retracts its sighting.
    await provider().send('anvil_mine', ['0x8']);
    await until(
      () => outflowRows(paymentId),
      (rows) => rows[0]?.state === 'retracted',
      'the sighting retracted',
    );
    expect(await payment(paymentId)).toMatchObject({ status: 'escrow_confirmed', amount_captured: '0' });
    expect(await eventTypes(paymentId)).not.toContain('PaymentCaptured.v1');

    // The merchant's signature was never used on this fork: whoever holds it can send it again, and that counts.
    const again = (await (await deposit().capture(usdc(), BigInt(ORDER), deadline, signature)).wait())?.hash;
    await confirm();
    const settled = await until(
      () => payment(paymentId),
      (x) => x['status'] === 'settled',
      'the payment settled by the capture on the new fork',
    );
    expect(settled['amount_captured']).toBe(ORDER);
    const captured = (
      await stack.service.app
        .get<EventStore>(EVENT_STORE, { strict: false })
        .readStream(paymentStreamId(paymentId))
    ).filter((e) => e.type === 'PaymentCaptured.v1');
    expect(captured.map((e) => (e.data as { txHash: string }).txHash)).toEqual([again]);
  });

  it('records the payer reclaiming an expired escrow on chain: refunded, payment.refunded signed', async () => {
    const p = await escrowed({ authorization_period: HOUR });
    const paymentId = String(p['id']);
    // Past the authorization expiry and the payer's 1-day challenge period (reclaim pays the final payer). Last test:
    // the chain's clock stays ahead, and a later deposit would be a straggler by block time.
    await provider().send('evm_increaseTime', [DAY + 1]);
    await provider().send('evm_mine', []);
    const before = await balance(payer().address);
    await (await connectPaymentDeposit(String(p['deposit_address']), payer()).reclaim()).wait();
    expect((await balance(payer().address)) - before).toBe(BigInt(ORDER));
    await confirm();

    const refunded = await until(
      () => payment(paymentId),
      (x) => x['status'] === 'refunded',
      'the payment refunded by the indexed reclaim',
    );
    expect(refunded).toMatchObject({ amount_refunded: ORDER, amount_captured: '0' });
    const webhook = await hook('payment.refunded', paymentId);
    expect(verifyWebhook(webhook.body, webhook.headers, secret, { now: clock.now() })).toMatchObject({
      valid: true,
    });
    expect(webhook.event.data.object).toMatchObject({ id: paymentId, status: 'refunded' });
  });
});
