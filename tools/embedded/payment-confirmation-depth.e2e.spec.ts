import { Transaction, Wallet, id } from 'ethers';
import { EVENT_STORE } from '@stablepay/aggregate';
import { connectStablepayRegistry, connectTestStablecoin, toOnChainId } from '@stablepay/contracts';
import type { EventStore } from '@stablepay/event-store';
import { signCapture } from '@stablepay/merchant-sdk';
import { paymentStreamId } from '@stablepay/payments-service';
import { ManualClock } from '@stablepay/util';
import { webhookEventId } from '@stablepay/webhook-dispatch-service';
import { type Json, until } from './test-support/http';
import { newPayment, paymentUntil, paymentSigning, transferToken } from './test-support/payments';
import { OnChainStack } from './test-support/stack';

/**
 * What the payments service records from its own receipts at one confirmation (the deploy's forward or escrow, our
 * capture) is announced only once that block has the chain's confirmations (CHAIN_CONFIRMATIONS), and taken back when
 * a reorg the indexer never read removed it. The indexer reads INDEXER_CONFIRMATIONS behind the head here, as it does
 * on a real chain, so a reorg shallower than that has no sighting to retract. Through HTTP on the embedded stack with
 * a local anvil; reorgs by evm_snapshot / evm_revert.
 */
const CHAIN = 'eip155:8453';
const ORDER = '100000000'; // 100.000000 USD
/** Payments record chain facts this deep (CHAIN_CONFIRMATIONS). */
const CONFIRMATIONS = 3;
/** The indexer reads this far behind the head (INDEXER_CONFIRMATIONS). */
const INDEXER_DEPTH = 4;

describe('money is announced at the chain confirmations, and a capture a shallow reorg took back is undone', () => {
  const clock = new ManualClock(new Date());
  const e2e = new OnChainStack(clock);
  const { api, webhooks } = e2e;
  const chain = e2e.chain(CHAIN);
  const merchantSigner = new Wallet(id('payment-confirmation-depth e2e merchant signer'));
  const settlement = Wallet.createRandom().address;
  const payer = () => chain.wallet(5);
  const usdc = () => chain.local.addresses.stablecoins.USDC;
  const balance = (holder: string) => connectTestStablecoin(usdc(), chain.provider()).balanceOf(holder);
  const payment = async (paymentId: string) => (await api('GET', `/payments/${paymentId}`)).body;
  const events = async (paymentId: string) =>
    e2e.stack.service.app
      .get<EventStore>(EVENT_STORE, { strict: false })
      .readStream(paymentStreamId(paymentId));
  const types = async (paymentId: string) => (await events(paymentId)).map((e) => e.type);

  /** The payment paid from an anvil wallet, seen by the indexer and confirmed: the service deploys it. */
  const paid = async (method: 'DIRECT' | 'TWO_STEP'): Promise<Json> => {
    const p = await newPayment(api, {
      amount: ORDER,
      method,
      accepted_chains: [CHAIN],
      accepted_tokens: ['USDC'],
    });
    await transferToken(chain, payer(), 'USDC', String(p['deposit_address']), BigInt(ORDER));
    await chain.mine(INDEXER_DEPTH + CONFIRMATIONS);
    return p;
  };

  /** The webhook `type` of `paymentId` is the one its confirmation fact produces (its id derives from that event). */
  const fromFact = async (hook: { id: string }, paymentId: string, fact: string, type: string) => {
    const confirmed = (await events(paymentId)).find((e) => e.type === fact);
    const occurredAt = confirmed?.metadata.occurredAt;
    if (!confirmed || typeof occurredAt !== 'string') throw new Error(`no ${fact} in ${paymentId}`);
    expect(hook.id).toBe(webhookEventId(confirmed.id, type, new Date(occurredAt)));
  };

  beforeAll(async () => {
    await e2e.start('8453', {
      CHAIN_CONFIRMATIONS: String(CONFIRMATIONS),
      INDEXER_CONFIRMATIONS: String(INDEXER_DEPTH),
    });
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
  }, 240_000);

  afterAll(() => e2e.stop());

  it.each([
    ['DIRECT', 'settled', 'payment.settled'],
    ['TWO_STEP', 'escrow_confirmed', 'payment.escrow_confirmed'],
  ] as const)(
    "%s: the deploy shows %s from its receipt, and %s is sent once the deploy's block has the confirmations",
    async (method, status, webhook) => {
      const p = await paid(method);
      const paymentId = String(p['id']);
      await paymentUntil(
        api,
        paymentId,
        (x) => x['status'] === status,
        'the deploy recorded from its receipt',
      );
      await webhooks.next('payment.deposit_confirmed', paymentId);
      // One block on the deploy: a shallow reorg can still take it (and the forward or the escrow) back.
      expect(await types(paymentId)).not.toContain('PaymentDeploymentConfirmed.v1');

      await chain.mine(CONFIRMATIONS - 1);
      const hook = await webhooks.next(webhook, paymentId);
      expect(hook.data['object']).toMatchObject({ id: paymentId, status });
      await fromFact(hook, paymentId, 'PaymentDeploymentConfirmed.v1', webhook);
      expect(webhooks.all(webhook, paymentId)).toHaveLength(1);
    },
  );

  it('our capture whose block a reorg the indexer never read took back is undone at the confirmations, nothing announced; the same transaction mined again is recorded and announced once', async () => {
    const paymentId = String((await paid('TWO_STEP'))['id']);
    const p = await paymentUntil(
      api,
      paymentId,
      (x) => x['status'] === 'escrow_confirmed',
      'the escrow deployed',
    );
    await chain.mine(CONFIRMATIONS);
    await webhooks.next('payment.escrow_confirmed', paymentId);
    const s = await paymentSigning(chain, e2e.stack.demoMerchantId, p);
    const { signature } = await signCapture(merchantSigner, s.domain, {
      paymentId: s.paymentId,
      token: s.token,
      amount: BigInt(ORDER),
      epoch: s.epoch,
      deadline: s.deadline,
    });
    const snapshot = (await chain.provider().send('evm_snapshot', [])) as string;
    const body = { amount: ORDER, deadline: s.deadline.toString(), signature };
    expect((await api('POST', `/payments/${paymentId}/capture`, body)).body).toMatchObject({
      status: 'settled',
      amount_captured: ORDER,
    });
    const captured = (await events(paymentId)).find((e) => e.type === 'PaymentCaptured.v1');
    const sent = await chain.provider().getTransaction((captured?.data as { txHash: string }).txHash);
    if (!sent) throw new Error('our capture not found');

    // A reorg shallower than INDEXER_CONFIRMATIONS: the indexer never read the capture's block.
    await chain.provider().send('evm_revert', [snapshot]);
    await chain.mine(CONFIRMATIONS + 1);
    const undone = await paymentUntil(
      api,
      paymentId,
      (x) => x['status'] === 'escrow_confirmed',
      'the capture the chain no longer holds undone',
    );
    expect(undone['amount_captured']).toBe('0');
    expect(await balance(String(p['deposit_address']))).toBe(BigInt(ORDER));
    expect(await types(paymentId)).toContain('PaymentOutflowRetracted.v1');
    expect(await types(paymentId)).not.toContain('PaymentCaptureConfirmed.v1');
    expect(webhooks.all('payment.settled', paymentId)).toEqual([]);

    // The node puts it back and mines it again: the indexer reads it at its depth, the worker records it again.
    await chain.provider().send('eth_sendRawTransaction', [Transaction.from(sent).serialized]);
    await chain.mine(INDEXER_DEPTH + CONFIRMATIONS);
    const hook = await webhooks.next('payment.settled', paymentId);
    expect(hook.data['object']).toMatchObject({ status: 'settled', amount_captured: ORDER });
    expect(await payment(paymentId)).toMatchObject({ status: 'settled', amount_captured: ORDER });
    expect(webhooks.all('payment.settled', paymentId)).toHaveLength(1);
    expect((await types(paymentId)).filter((t) => t === 'PaymentCaptured.v1')).toHaveLength(2);
  });
});
