import { Transaction, type TransactionResponse, Wallet, id } from 'ethers';
import { DataSource } from 'typeorm';
import { EVENT_STORE } from '@stablepay/aggregate';
import {
  connectPaymentDeposit,
  connectStablepayRegistry,
  connectTestStablecoin,
  toOnChainId,
} from '@stablepay/contracts';
import type { EventStore } from '@stablepay/event-store';
import { deployCallBatcher } from '@stablepay/local-chains';
import { signCapture } from '@stablepay/merchant-sdk';
import { paymentStreamId } from '@stablepay/payments-service';
import { ManualClock } from '@stablepay/util';
import { webhookEventId } from '@stablepay/webhook-dispatch-service';
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
  /** The payment object catches up with its stream (a projection): waits for it, failing if it never reads so. */
  const reads = (paymentId: string, status: string, amountCaptured: string) =>
    paymentUntil(
      api,
      paymentId,
      (x) => x['status'] === status && x['amount_captured'] === amountCaptured,
      `the payment to read ${status} with ${amountCaptured} captured`,
    );
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

  /** The payment's claims of recorded outflows by logs mined again (PaymentOutflowMinedAgain.v1). */
  const claims = async (paymentId: string) =>
    (await events(paymentId))
      .filter((e) => e.type === 'PaymentOutflowMinedAgain.v1')
      .map((e) => e.data as { recordedLogIndex: number; logIndex: number; blockHash: string });

  /** Once the indexer saw the payment's one outflow, back to `snapshot` and a longer fork without it. */
  const revertSighting = async (paymentId: string, snapshot: string) => {
    await until(
      () => outflowRows(paymentId),
      (rows) => rows.length === 1 && rows[0]?.state === 'observed',
      'the outflow seen by the indexer, not yet confirmed',
    );
    await chain.provider().send('evm_revert', [snapshot]);
    // The follower sees the parent hashes change and retracts its sighting.
    await chain.provider().send('anvil_mine', ['0x8']);
    await until(
      () => outflowRows(paymentId),
      (rows) => rows[0]?.state === 'retracted',
      'the sighting retracted',
    );
  };

  /** The transaction mined again on the new fork: its first sighting retracted, the second recorded. */
  const firstSightingRetractedSecondRecorded = (paymentId: string) =>
    until(
      () => outflowRows(paymentId),
      (rows) =>
        rows
          .map((r) => r.state)
          .sort()
          .join() === 'recorded,retracted',
      'the first sighting retracted, the second recorded',
    );

  /**
   * Back to `snapshot`, and `sent` mined again on the new fork behind one approval (one log) by each of `ahead` (the
   * highest tip goes first): its logs at other indexes. Its receipt there.
   */
  const mineAgainBehind = async (snapshot: string, sent: TransactionResponse, ahead: readonly Wallet[]) => {
    await chain.provider().send('evm_revert', [snapshot]);
    await chain.provider().send('evm_setAutomine', [false]);
    try {
      for (const wallet of ahead) {
        await connectTestStablecoin(usdc(), wallet).approve(settlement, 1n, {
          maxPriorityFeePerGas: 1_000_000_000_000n,
          maxFeePerGas: 2_000_000_000_000n,
          gasLimit: 100_000n,
        });
      }
      await chain.provider().send('eth_sendRawTransaction', [Transaction.from(sent).serialized]);
      await chain.provider().send('anvil_mine', ['0x8']);
    } finally {
      await chain.provider().send('evm_setAutomine', [true]);
    }
    return chain.provider().getTransactionReceipt(sent.hash);
  };

  /** An escrowed payment captured through the API (recorded from its receipt) after a chain snapshot. */
  const ownCaptureAfterSnapshot = async () => {
    const p = await escrowed();
    const paymentId = String(p['id']);
    const { deadline, signature } = await signedCapture(p, BigInt(ORDER));
    const snapshot = (await chain.provider().send('evm_snapshot', [])) as string;
    const body = { amount: ORDER, deadline: deadline.toString(), signature };
    expect((await api('POST', `/payments/${paymentId}/capture`, body)).body).toMatchObject({
      status: 'settled',
    });
    return { p, paymentId, body, snapshot };
  };

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

  const signedCapture = async (p: Json, amount: bigint, validFor = 3_600n) => {
    const deadline = (await chain.now()) + validFor;
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

  it('announces our own capture (payment.settled) once its block has the confirmations, not from its receipt', async () => {
    const p = await escrowed();
    const paymentId = String(p['id']);
    const { deadline, signature } = await signedCapture(p, BigInt(ORDER));
    const body = { amount: ORDER, deadline: deadline.toString(), signature };
    const res = await api('POST', `/payments/${paymentId}/capture`, body);
    // Recorded from the action's receipt at one confirmation: the API shows it at once.
    expect(res.body).toMatchObject({ status: 'settled', amount_captured: ORDER });
    await confirm();
    const hook = await webhooks.next('payment.settled', paymentId);
    expect(hook.data['object']).toMatchObject({ status: 'settled', amount_captured: ORDER });
    // The webhook is the confirmation fact's (its id derives from that event), not the receipt's record.
    const confirmed = (await events(paymentId)).find((e) => e.type === 'PaymentCaptureConfirmed.v1');
    expect(confirmed).toBeDefined();
    const occurredAt = confirmed?.metadata.occurredAt;
    if (!confirmed || typeof occurredAt !== 'string') throw new Error('no capture confirmation fact');
    expect(hook.id).toBe(webhookEventId(confirmed.id, 'payment.settled', new Date(occurredAt)));
    expect(webhooks.all('payment.settled', paymentId)).toHaveLength(1);
  });

  it('undoes our own capture a reorg takes back before its confirmations, announcing nothing; the capture sent again is announced', async () => {
    const { p, paymentId, body, snapshot } = await ownCaptureAfterSnapshot();
    await revertSighting(paymentId, snapshot);
    const types = (await events(paymentId)).map((e) => e.type);
    expect(types).toContain('PaymentCaptured.v1');
    expect(types).toContain('PaymentOutflowRetracted.v1');
    expect(types).not.toContain('PaymentCaptureConfirmed.v1');
    expect(webhooks.all('payment.settled', paymentId)).toEqual([]);
    // The escrow still holds the order on this fork, and the payment says so: the merchant can capture it again.
    expect(await balance(String(p['deposit_address']))).toBe(BigInt(ORDER));
    await reads(paymentId, 'escrow_confirmed', '0');
    const again = await api('POST', `/payments/${paymentId}/capture`, body);
    expect(again.body).toMatchObject({ status: 'settled', amount_captured: ORDER });
    await confirm();
    expect((await webhooks.next('payment.settled', paymentId)).data['object']).toMatchObject({
      status: 'settled',
      amount_captured: ORDER,
    });
    expect(webhooks.all('payment.settled', paymentId)).toHaveLength(1);
  });

  it('records our own capture again when the reorg that undid it is followed by the same transaction mined again', async () => {
    const { paymentId, snapshot } = await ownCaptureAfterSnapshot();
    const captured = (await events(paymentId)).find((e) => e.type === 'PaymentCaptured.v1');
    const hash = (captured?.data as { txHash: string } | undefined)?.txHash ?? '';
    const sent = await chain.provider().getTransaction(hash);
    if (!sent) throw new Error(`capture ${hash} not found`);
    await until(
      () => outflowRows(paymentId),
      (rows) => rows.length === 1 && rows[0]?.state === 'observed',
      'our capture seen by the indexer, not yet confirmed',
    );
    await chain.provider().send('evm_revert', [snapshot]);
    // A node that puts an orphaned transaction back in its pool mines it again on the new fork: the same bytes.
    await chain.provider().send('eth_sendRawTransaction', [Transaction.from(sent).serialized]);
    await chain.provider().send('anvil_mine', ['0x8']);
    await firstSightingRetractedSecondRecorded(paymentId);
    const types = (await events(paymentId)).map((e) => e.type);
    expect(types.filter((t) => t === 'PaymentCaptured.v1')).toHaveLength(2);
    expect(types).toContain('PaymentOutflowRetracted.v1');
    await reads(paymentId, 'settled', ORDER);
    await webhooks.next('payment.settled', paymentId);
    expect(webhooks.all('payment.settled', paymentId)).toHaveLength(1);
  });

  it('records our own capture once when a reorg deeper than its confirmations mines the same transaction again at another log index', async () => {
    const { p, paymentId, snapshot } = await ownCaptureAfterSnapshot();
    const captured = (await events(paymentId)).find((e) => e.type === 'PaymentCaptured.v1');
    const first = captured?.data as { txHash: string; logIndex: number } | undefined;
    const sent = await chain.provider().getTransaction(first?.txHash ?? '');
    if (!first || !sent) throw new Error('our capture not found');
    await confirm();
    await webhooks.next('payment.settled', paymentId);
    await until(
      () => outflowRows(paymentId),
      (rows) => rows.length === 1 && rows[0]?.state === 'recorded',
      'our capture recorded and confirmed by the deposit worker',
    );
    // The new fork mines it again behind another transaction's log: another log index.
    const again = await mineAgainBehind(snapshot, sent, [stranger()]);
    const deposit = String(p['deposit_address']).toLowerCase();
    const log = again?.logs.find((l) => l.address.toLowerCase() === deposit);
    expect(log?.index).toBeDefined();
    expect(log?.index).not.toBe(first.logIndex);
    await firstSightingRetractedSecondRecorded(paymentId);
    const types = (await events(paymentId)).map((e) => e.type);
    expect(types.filter((t) => t === 'PaymentCaptured.v1')).toHaveLength(1);
    // The log mined again claimed the recorded capture: a fact naming both logs.
    expect((await claims(paymentId)).map((c) => [c.recordedLogIndex, c.logIndex])).toEqual([
      [first.logIndex, log?.index],
    ]);
    await reads(paymentId, 'settled', ORDER);
    expect(webhooks.all('payment.settled', paymentId)).toHaveLength(1);
  });

  it('records a batch of two equal captures once each when a reorg deeper than their confirmations mines the batch again with its logs moved onto each other', async () => {
    const p = await escrowed();
    const paymentId = String(p['id']);
    const depositAddress = String(p['deposit_address']);
    const half = BigInt(ORDER) / 2n;
    // Two signed captures of half the order (their deadlines differ), batched into one transaction by a wallet.
    const signed = [await signedCapture(p, half), await signedCapture(p, half, 3_601n)];
    const deposit = connectPaymentDeposit(depositAddress, stranger());
    const calls = signed.map(({ deadline, signature }) =>
      deposit.interface.encodeFunctionData('capture', [usdc(), half, deadline, signature]),
    );
    const batcher = await deployCallBatcher(stranger());
    const snapshot = (await chain.provider().send('evm_snapshot', [])) as string;
    const batch = await (await batcher.getFunction('run')([depositAddress, depositAddress], calls)).wait();
    const outflowLogs = (receipt: { logs: readonly { address: string; index: number }[] } | null) =>
      (receipt?.logs ?? [])
        .filter((l) => l.address.toLowerCase() === depositAddress.toLowerCase())
        .map((l) => l.index);
    const first = outflowLogs(batch);
    expect(first).toHaveLength(2);
    const sent = await chain.provider().getTransaction(batch?.hash ?? '');
    if (!sent) throw new Error('the batch not found');
    await confirm();
    await until(
      () => outflowRows(paymentId),
      (rows) => rows.length === 2 && rows.every((r) => r.state === 'recorded'),
      'both captures recorded and confirmed by the deposit worker',
    );
    await paymentUntil(
      api,
      paymentId,
      (x) => x['status'] === 'settled' && x['amount_captured'] === ORDER,
      'both captures on the payment',
    );
    // One payment.settled per capture confirmed.
    await until(
      async () => webhooks.all('payment.settled', paymentId).length,
      (n) => n === 2,
      'both captures announced',
    );
    // The new fork mines the batch again behind as many logs as lie between its two captures' logs: the second
    // capture's log of the new block takes the first one's index of the old block.
    const shift = (first[1] ?? 0) - (first[0] ?? 0);
    const ahead = Array.from({ length: shift }, (_, i) => chain.wallet(7 + i));
    const again = outflowLogs(await mineAgainBehind(snapshot, sent, ahead));
    expect(again).toEqual(first.map((i) => i + shift));
    expect(again[0]).toBe(first[1]);
    await until(
      () => outflowRows(paymentId),
      (rows) =>
        rows
          .map((r) => r.state)
          .sort()
          .join() === 'recorded,recorded,retracted,retracted',
      'the first sightings retracted, the second recorded',
    );
    await until(
      () => claims(paymentId),
      (c) => c.length === 2,
      'both logs mined again claimed a capture',
    );
    // Each recorded capture claimed by one log of the new block, each log claiming one: still two.
    const claimed = await claims(paymentId);
    expect(claimed.map((c) => c.recordedLogIndex).sort()).toEqual([...first].sort());
    expect(claimed.map((c) => c.logIndex).sort()).toEqual([...again].sort());
    const types = (await events(paymentId)).map((e) => e.type);
    expect(types.filter((t) => t === 'PaymentCaptured.v1')).toHaveLength(2);
    await reads(paymentId, 'settled', ORDER);
    expect(webhooks.all('payment.settled', paymentId)).toHaveLength(2);
  });

  it('drops a sighting a reorg takes back before its confirmations; the capture sent again on the new fork counts', async () => {
    const p = await escrowed();
    const paymentId = String(p['id']);
    const { deadline, signature } = await signedCapture(p, BigInt(ORDER));
    const snapshot = (await chain.provider().send('evm_snapshot', [])) as string;
    const deposit = () => connectPaymentDeposit(String(p['deposit_address']), stranger());
    await (await deposit().capture(usdc(), BigInt(ORDER), deadline, signature)).wait();
    await revertSighting(paymentId, snapshot);
    await reads(paymentId, 'escrow_confirmed', '0');
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
