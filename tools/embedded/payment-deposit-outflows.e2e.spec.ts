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
import { signCapture } from '@stablepay/merchant-sdk';
import { paymentStreamId } from '@stablepay/payments-service';
import { ManualClock } from '@stablepay/util';
import { type Json, until } from './test-support/http';
import { newPayment, paymentUntil, transferToken } from './test-support/payments';
import { OnChainStack } from './test-support/stack';

/**
 * Movements out of a deployed deposit that the payments service did not send reach the payment through the
 * indexer (the deposit contract is watched from its deployment): a TWO_STEP escrow captured by a third party who
 * submits the merchant's signed capture to the contract itself, and the payer's own reclaim after the authorization
 * expiry. Each moves the payment and sends its signed webhook; our own capture, seen by both its receipt and the
 * indexer, is one fact; a sighting a reorg takes back before its confirmations is never recorded. Through HTTP on
 * the embedded stack with a local anvil.
 */
const CHAIN = 'eip155:8453';
const ORDER = '100000000'; // 100.000000 USD
const HOUR = 3_600;
const DAY = 86_400;
/** Payments record chain facts this deep (CHAIN_CONFIRMATIONS), so a reorg can undo a sighting before that. */
const CONFIRMATIONS = 3;

describe('outflows someone else sends from a deposit reach the payment through the indexer', () => {
  const clock = new ManualClock(new Date());
  const e2e = new OnChainStack(clock);
  const { api, webhooks } = e2e;
  const chain = e2e.chain(CHAIN);
  const merchantSigner = new Wallet(id('payment-deposit-outflows e2e merchant signer'));
  const settlement = Wallet.createRandom().address;

  const payer = () => chain.wallet(5);
  /** Neither the merchant, the payer nor the operator: anyone who got hold of the merchant's signed capture. */
  const stranger = () => chain.wallet(6);
  const usdc = () => chain.local.addresses.stablecoins.USDC;
  const balance = (holder: string) => connectTestStablecoin(usdc(), chain.provider()).balanceOf(holder);
  const payment = async (paymentId: string) => (await api('GET', `/payments/${paymentId}`)).body;
  /** The blocks that give the latest one the payments service's CONFIRMATIONS. */
  const confirm = () => chain.mine(CONFIRMATIONS - 1);

  const events = async (paymentId: string) =>
    e2e.stack.service.app
      .get<EventStore>(EVENT_STORE, { strict: false })
      .readStream(paymentStreamId(paymentId));
  const outflowRows = async (paymentId: string): Promise<{ kind: string; state: string }[]> =>
    e2e.stack.service.app
      .get(DataSource)
      .query('SELECT kind, state FROM payment_deposit_outflows WHERE payment_id = $1', [paymentId]);

  /** A TWO_STEP checkout paid from an anvil wallet and deployed by the service's own flow. */
  const escrowed = async (extra: Json = {}): Promise<Json> => {
    const p = await newPayment(api, {
      amount: ORDER,
      method: 'TWO_STEP',
      accepted_chains: [CHAIN],
      accepted_tokens: ['USDC'],
      ...extra,
    });
    await transferToken(chain, payer(), 'USDC', String(p['deposit_address']), BigInt(ORDER));
    await confirm();
    return paymentUntil(
      api,
      String(p['id']),
      (x) => x['status'] === 'escrow_confirmed',
      'the escrow deployed by the payment flow',
    );
  };

  const signedCapture = async (p: Json, amount: bigint) => {
    const deadline = (await chain.now()) + 3_600n;
    const epoch = await connectStablepayRegistry(
      chain.local.addresses.registry,
      chain.provider(),
    ).merchantEpoch(toOnChainId(e2e.stack.demoMerchantId));
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
    await e2e.start('8453', { CHAIN_CONFIRMATIONS: String(CONFIRMATIONS) });
    const signer = await api('POST', '/settings', {
      merchant_signer: merchantSigner.address,
      settlement_address: settlement,
    });
    expect(signer.status).toBe(200);
    await e2e.receiveWebhooks();
    await until(
      () =>
        connectStablepayRegistry(chain.local.addresses.registry, chain.provider()).merchantAuth(
          toOnChainId(e2e.stack.demoMerchantId),
        ),
      (auth) => auth.signer === merchantSigner.address,
      'the merchant registered on chain',
    );
  }, 120_000);

  afterAll(() => e2e.stop());

  it("records a capture a third party submitted with the merchant's signature: settled, payment.settled signed", async () => {
    const p = await escrowed();
    const paymentId = String(p['id']);
    const { deadline, signature } = await signedCapture(p, BigInt(ORDER));
    const before = await balance(settlement);
    const deposit = connectPaymentDeposit(String(p['deposit_address']), stranger());
    await (await deposit.capture(usdc(), BigInt(ORDER), deadline, signature)).wait();
    expect((await balance(settlement)) - before).toBe(BigInt(ORDER));
    await confirm();

    const settled = await paymentUntil(
      api,
      paymentId,
      (x) => x['status'] === 'settled',
      'the payment settled by the indexed capture',
    );
    expect(settled).toMatchObject({ amount_captured: ORDER, amount_refunded: '0' });
    // Signature verified by the receiver.
    expect((await webhooks.next('payment.settled', paymentId)).data['object']).toMatchObject({
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
    expect((await events(paymentId)).filter((e) => e.type === 'PaymentCaptured.v1')).toHaveLength(1);
    await webhooks.next('payment.settled', paymentId);
    expect(webhooks.all('payment.settled', paymentId)).toHaveLength(1);
  });

  it('drops a sighting a reorg takes back before its confirmations; the capture sent again on the new fork counts', async () => {
    const p = await escrowed();
    const paymentId = String(p['id']);
    const { deadline, signature } = await signedCapture(p, BigInt(ORDER));
    const snapshot = (await chain.provider().send('evm_snapshot', [])) as string;
    const deposit = () => connectPaymentDeposit(String(p['deposit_address']), stranger());
    await (await deposit().capture(usdc(), BigInt(ORDER), deadline, signature)).wait();
    await until(
      () => outflowRows(paymentId),
      (rows) => rows.length === 1 && rows[0]?.state === 'observed',
      'the capture seen by the indexer, not yet confirmed',
    );
    await chain.provider().send('evm_revert', [snapshot]);
    // A longer fork without the capture: the follower sees the parent hashes change and retracts its sighting.
    await chain.provider().send('anvil_mine', ['0x8']);
    await until(
      () => outflowRows(paymentId),
      (rows) => rows[0]?.state === 'retracted',
      'the sighting retracted',
    );
    expect(await payment(paymentId)).toMatchObject({ status: 'escrow_confirmed', amount_captured: '0' });
    expect((await events(paymentId)).map((e) => e.type)).not.toContain('PaymentCaptured.v1');

    // The merchant's signature was never used on this fork: whoever holds it can send it again, and that counts.
    const again = (await (await deposit().capture(usdc(), BigInt(ORDER), deadline, signature)).wait())?.hash;
    await confirm();
    const settled = await paymentUntil(
      api,
      paymentId,
      (x) => x['status'] === 'settled',
      'the payment settled by the capture on the new fork',
    );
    expect(settled['amount_captured']).toBe(ORDER);
    const captured = (await events(paymentId)).filter((e) => e.type === 'PaymentCaptured.v1');
    expect(captured.map((e) => (e.data as { txHash: string }).txHash)).toEqual([again]);
  });

  it('records the payer reclaiming an expired escrow on chain: refunded, payment.refunded signed', async () => {
    const p = await escrowed({ authorization_period: HOUR });
    const paymentId = String(p['id']);
    // Past the authorization expiry and the payer's 1-day challenge period (reclaim pays the final payer). Last test:
    // the chain's clock stays ahead, and a later deposit would be a straggler by block time.
    await chain.increaseTime(DAY + 1);
    const before = await balance(payer().address);
    await (await connectPaymentDeposit(String(p['deposit_address']), payer()).reclaim()).wait();
    expect((await balance(payer().address)) - before).toBe(BigInt(ORDER));
    await confirm();

    const refunded = await paymentUntil(
      api,
      paymentId,
      (x) => x['status'] === 'refunded',
      'the payment refunded by the indexed reclaim',
    );
    expect(refunded).toMatchObject({ amount_refunded: ORDER, amount_captured: '0' });
    expect((await webhooks.next('payment.refunded', paymentId)).data['object']).toMatchObject({
      id: paymentId,
      status: 'refunded',
    });
  });
});
