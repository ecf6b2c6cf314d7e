import { Wallet } from 'ethers';
import { EVENT_STORE } from '@stablepay/aggregate';
import { connectTestStablecoin } from '@stablepay/contracts';
import { OperatorRelayers } from '@stablepay/chain-operator';
import type { EventStore } from '@stablepay/event-store';
import { DepositFlow, paymentStreamId } from '@stablepay/payments-service';
import { SANDBOX_SANCTIONED_PAYER } from '@stablepay/evm';
import { signCapture, signRefund, signRescue } from '@stablepay/merchant-sdk';
import { ManualClock } from '@stablepay/util';
import { type Json, until } from './test-support/http';
import { newPayment, paymentSigning, paymentUntil, transferToken } from './test-support/payments';
import { pooled, withoutAutomine } from './test-support/anvil';
import { OnChainStack } from './test-support/stack';
import { readyForSubscriptions } from './test-support/subscriptions';

/**
 * The payer's and the compliance side of a payment after its deposit, through HTTP on the embedded stack with a
 * local anvil, funds moved by real transfers and the service's own flow (indexer, screening, the operator's
 * deploy): an abandoned deposit recovered to its payer through the API (refused with payer_not_final inside the
 * one-day challenge period on chain time), a TWO_STEP refund received as a signed `payment.refunded`, and capture
 * and refund of a flagged payment refused before anything is sent.
 */
const CHAIN = 'eip155:8453';
const USDC = 10n ** 6n;

describe('payment recovery, refund webhook and flagged refusals through HTTP (embedded stack, anvil)', () => {
  const clock = new ManualClock(new Date());
  const e2e = new OnChainStack(clock);
  const { api, webhooks } = e2e;
  const chain = e2e.chain(CHAIN);
  const signer = Wallet.createRandom();
  const merchantId = () => e2e.stack.demoMerchantId;
  const usdc = (holder: string) =>
    connectTestStablecoin(chain.local.addresses.stablecoins.USDC, chain.provider()).balanceOf(holder);
  const relayerNonce = () =>
    chain
      .provider()
      .getTransactionCount(
        e2e.stack.service.app.get(OperatorRelayers, { strict: false }).require().for(CHAIN).address,
      );

  /**
   * Waits for the abandoned deposit's NONE deployment and checks what the payment says is the payer's, in which
   * token and on which chain: nothing funded the order, so SPEC's detected_* stay null and only the recoverable
   * fields name the unit of recoverable_amount.
   */
  const abandonedRecoverable = async (
    id: string,
    payer: string,
    amount: string,
    token: 'USDC' | 'USDT',
  ): Promise<Json> => {
    const recoverable = await paymentUntil(
      api,
      id,
      (x) => x['status'] === 'recoverable' && x['deploy_tx_hash'] !== null,
      'recoverable (abandoned) after the NONE deployment',
    );
    expect(recoverable).toMatchObject({
      recoverable_reason: 'abandoned',
      recovery_destination: payer,
      recoverable_amount: amount,
      recoverable_chain: CHAIN,
      detected_asset: null,
      detected_chain: null,
    });
    expect(String(recoverable['recoverable_asset']).toLowerCase()).toBe(
      `${CHAIN}/erc20:${chain.local.addresses.stablecoins[token]}`.toLowerCase(),
    );
    return recoverable;
  };

  beforeAll(async () => {
    await e2e.start('8453', { PAYMENT_EXPIRY_POLL_MS: '50' });
    await readyForSubscriptions(api, undefined, merchantId(), [chain], {
      signer,
      pauser: Wallet.createRandom(),
    });
    await e2e.receiveWebhooks();
  }, 180_000);

  afterAll(() => e2e.stop());

  it('refunds a TWO_STEP escrow: the merchant receives payment.refunded, signed, with the payment object as of the refund', async () => {
    const p = await newPayment(api, {
      amount: '40000000',
      method: 'TWO_STEP',
      accepted_chains: [CHAIN],
      accepted_tokens: ['USDC'],
    });
    const id = String(p['id']);
    const payer = chain.wallet(5);
    await transferToken(chain, payer, 'USDC', String(p['deposit_address']), 40n * USDC);
    const escrowed = await paymentUntil(
      api,
      id,
      (x) => x['status'] === 'escrow_confirmed',
      'escrow_confirmed',
    );
    const s = await paymentSigning(chain, merchantId(), escrowed);
    const { signature } = await signRefund(signer, s.domain, {
      paymentId: s.paymentId,
      token: s.token,
      payer: payer.address,
      amount: 40n * USDC,
      epoch: s.epoch,
      deadline: s.deadline,
    });
    const before = await usdc(payer.address);
    const refunded = await api('POST', `/payments/${id}/refund`, {
      amount: (40n * USDC).toString(),
      deadline: Number(s.deadline),
      signature,
    });
    expect(refunded.status).toBe(200);
    expect((await usdc(payer.address)) - before).toBe(40n * USDC);
    const hook = await webhooks.next('payment.refunded', id);
    expect(hook.data['object']).toMatchObject({
      id,
      status: 'refunded',
      amount_refunded: '40000000',
      payer_addresses: [payer.address],
    });
    expect(hook.data['object']).toEqual((await api('GET', `/payments/${id}`)).body);
  }, 180_000);

  it('refuses capture and refund of a flagged payment, signed by the merchant, sending nothing', async () => {
    const sanctioned = chain.wallet(9);
    expect(sanctioned.address).toBe(SANDBOX_SANCTIONED_PAYER);
    const p = await newPayment(api, {
      amount: '30000000',
      method: 'TWO_STEP',
      accepted_chains: [CHAIN],
      accepted_tokens: ['USDC'],
    });
    const id = String(p['id']);
    await transferToken(chain, sanctioned, 'USDC', String(p['deposit_address']), 30n * USDC);
    const flagged = await paymentUntil(api, id, (x) => x['status'] === 'flagged', 'flagged');
    await webhooks.next('payment.flagged', id);
    const s = await paymentSigning(chain, merchantId(), flagged);
    const nonce = await relayerNonce();
    const capture = await api('POST', `/payments/${id}/capture`, {
      amount: (30n * USDC).toString(),
      deadline: s.deadline.toString(),
      signature: (await signCapture(signer, s.domain, { ...s, amount: 30n * USDC, deadline: s.deadline }))
        .signature,
    });
    const refund = await api('POST', `/payments/${id}/refund`, {
      amount: (30n * USDC).toString(),
      deadline: Number(s.deadline),
      signature: (await signRefund(signer, s.domain, { ...s, payer: sanctioned.address, amount: 30n * USDC }))
        .signature,
    });
    for (const refused of [capture, refund]) {
      expect(refused.status).toBe(422);
      expect(refused.body['error']).toMatchObject({ type: 'cannot_process', code: 'payment_flagged' });
    }
    expect(await relayerNonce()).toBe(nonce);
    expect(await usdc(String(p['deposit_address']))).toBe(30n * USDC);
    expect((await api('GET', `/payments/${id}`)).body).toMatchObject({ status: 'flagged' } as Json);
  }, 180_000);
  // Last: it moves the chain's time a day past the service clock, which would make later transfers stragglers.
  it('recovers an abandoned deposit to its payer: 422 payer_not_final inside the challenge period, then the funds reach the payer', async () => {
    const p = await newPayment(api, { amount: '25000000', expires_in: 300, accepted_chains: [CHAIN] });
    const id = String(p['id']);
    // Past the expiry: the service clock (the expiry timer) and the chain's time together.
    clock.advance(301_000);
    await chain.increaseTime(301);
    await paymentUntil(api, id, (x) => x['status'] === 'expired', 'expired');
    const payer = chain.wallet(4);
    await transferToken(chain, payer, 'USDC', String(p['deposit_address']), 25n * USDC);
    const recoverable = await abandonedRecoverable(id, payer.address, '25000000', 'USDC');
    const notice = await webhooks.next('payment.recoverable', id);
    expect(notice.data['object']).toMatchObject({
      recoverable_reason: 'abandoned',
      recoverable_asset: recoverable['recoverable_asset'],
      recoverable_chain: CHAIN,
    });

    const nonce = await relayerNonce();
    const early = await api('POST', `/payments/${id}/recover`);
    expect(early.status).toBe(422);
    expect(early.body['error']).toMatchObject({ type: 'cannot_process', code: 'payer_not_final' });
    expect(await relayerNonce()).toBe(nonce);
    expect(await usdc(String(p['deposit_address']))).toBe(25n * USDC);

    // The payer attestation is final one day later by block time.
    await chain.increaseTime(86_401);
    const before = await usdc(payer.address);
    const recovered = await api('POST', `/payments/${id}/recover`);
    expect(recovered.body['error']).toBeUndefined();
    expect(recovered.status).toBe(200);
    expect((await usdc(payer.address)) - before).toBe(25n * USDC);
    expect(await usdc(String(p['deposit_address']))).toBe(0n);
    expect(recovered.body).toMatchObject({ status: 'expired', payer_addresses: [payer.address] });
    expect(recovered.body).not.toHaveProperty('recoverable_amount');
    // The merchant is told the funds left, by which transaction, in which token, how much and to whom.
    const done = await webhooks.next('payment.recovered', id);
    expect(done.data['transfer']).toEqual({
      tx_hash: expect.stringMatching(/^0x[0-9a-f]{64}$/),
      asset: recoverable['recoverable_asset'],
      token_symbol: 'USDC',
      chain: CHAIN,
      amount: '25000000',
      to: payer.address,
    });
    expect(done.data['object']).toMatchObject({ id, status: 'expired' });
    expect(done.data['object']).not.toHaveProperty('recoverable_amount');
    const onChain = await chain
      .provider()
      .getTransactionReceipt(String((done.data['transfer'] as Json)['tx_hash']));
    expect(onChain?.status).toBe(1);
    const again = await api('POST', `/payments/${id}/recover`);
    expect([409, 422]).toContain(again.status);
    expect(again.body['error']).toMatchObject({ type: expect.any(String), code: expect.any(String) });
    expect((await usdc(payer.address)) - before).toBe(25n * USDC);
  }, 180_000);

  it("holds an expired checkout's dust below the order's dust share until the merchant asks: no screening or deploy before, recovered to its sender after", async () => {
    const p = await newPayment(api, { amount: '25000000', expires_in: 300, accepted_chains: [CHAIN] });
    const id = String(p['id']);
    const deposit = String(p['deposit_address']);
    clock.advance(301_000);
    await chain.increaseTime(301);
    await paymentUntil(api, id, (x) => x['status'] === 'expired', 'expired');
    // One unit from a stranger: the share is 1% of 25 USDC (250000 units).
    const stranger = chain.wallet(8);
    await transferToken(chain, stranger, 'USDC', deposit, 1n);
    const announced = await paymentUntil(
      api,
      id,
      (x) => x['status'] === 'recoverable',
      'the dust announced recoverable',
    );
    expect(announced).toMatchObject({
      recoverable_reason: 'abandoned',
      recovery_destination: stranger.address,
      recoverable_amount: '1',
      deploy_tx_hash: null,
    });
    // The deposit flow handled the notice and did nothing on the operator's account: no screening, no deploy.
    await e2e.stack.service.app.get(DepositFlow, { strict: false }).caughtUp();
    const types = (
      await e2e.stack.service.app
        .get<EventStore>(EVENT_STORE, { strict: false })
        .readStream(paymentStreamId(id))
    ).map((e) => e.type);
    expect(types).not.toContain('PaymentPayerCleared.v1');
    expect(types).not.toContain('PaymentDeployRequested.v1');

    // The merchant asks: 202, the request on the payment, and the deposit deployed for the stranger. Asked again
    // while that deploy waits in the node's pool: the same 202, nothing recorded twice.
    const [asked, again] = await withoutAutomine(chain, async () => {
      const first = await api('POST', `/payments/${id}/recover`);
      await until(
        () => pooled(chain),
        (n) => n > 0,
        'the NONE deploy in the pool',
      );
      const second = await api('POST', `/payments/${id}/recover`);
      await chain.mine();
      return [first, second];
    });
    expect(asked.body['error']).toBeUndefined();
    expect(asked.status).toBe(202);
    expect(asked.body).toMatchObject({
      status: 'recoverable',
      deploy_tx_hash: null,
      recoverable_amount: '1',
    });
    const requestedAt = asked.body['recovery_requested_at'];
    expect(typeof requestedAt).toBe('string');
    expect(again.status).toBe(202);
    expect(again.body).toMatchObject({ recovery_requested_at: requestedAt, deploy_tx_hash: null });
    const requests = (
      await e2e.stack.service.app
        .get<EventStore>(EVENT_STORE, { strict: false })
        .readStream(paymentStreamId(id))
    ).filter((e) => e.type === 'PaymentDustRecoveryRequested.v1');
    expect(requests).toHaveLength(1);

    // Deployed: recover runs as for any deposit, refused inside the payer's challenge period, then returning the unit.
    await paymentUntil(api, id, (x) => x['deploy_tx_hash'] !== null, 'the NONE deployment');
    const early = await api('POST', `/payments/${id}/recover`);
    expect([early.status, (early.body['error'] as Json | undefined)?.['code']]).toEqual([
      422,
      'payer_not_final',
    ]);
    await chain.increaseTime(86_401);
    const before = await usdc(stranger.address);
    const recovered = await api('POST', `/payments/${id}/recover`);
    expect(recovered.body['error']).toBeUndefined();
    expect(recovered.status).toBe(200);
    expect((await usdc(stranger.address)) - before).toBe(1n);
    expect(await usdc(deposit)).toBe(0n);
    expect(recovered.body).toMatchObject({ status: 'expired', recovery_requested_at: requestedAt });
  }, 180_000);

  it("returns a token the checkout did not accept to its sender once the checkout expired (recoverable abandoned, NONE deployment, recover); an accepted token sent after that deployment is a straggler the merchant rescues, and the first stays the payer's", async () => {
    const usdt = (holder: string) =>
      connectTestStablecoin(chain.local.addresses.stablecoins.USDT, chain.provider()).balanceOf(holder);
    const p = await newPayment(api, {
      amount: '3000000',
      expires_in: 300,
      accepted_chains: [CHAIN],
      accepted_tokens: ['USDC'],
    });
    const id = String(p['id']);
    const deposit = String(p['deposit_address']);
    const payer = chain.wallet(5);
    await transferToken(chain, payer, 'USDT', deposit, 3n * USDC);
    const listed = await paymentUntil(
      api,
      id,
      (x) => (x['transactions'] as Json[]).some((t) => t['confirmed'] === true),
      'the wrong-token transfer confirmed',
    );
    expect(listed).toMatchObject({ status: 'pending', non_funding_transactions_count: 1 });
    expect((listed['transactions'] as Json[])[0]).toMatchObject({ non_funding_reason: 'wrong_token' });

    clock.advance(301_000);
    await chain.increaseTime(301);
    await abandonedRecoverable(id, payer.address, '3000000', 'USDT');
    await webhooks.next('payment.expired', id);
    await webhooks.next('payment.recoverable', id);

    // The deposit is bound to USDT on chain. USDC the checkout accepts, sent now by someone else, pays nothing.
    const late = chain.wallet(6);
    await transferToken(chain, late, 'USDC', deposit, 5n * USDC);
    const straggled = await paymentUntil(
      api,
      id,
      (x) => (x['transactions'] as Json[]).filter((t) => t['confirmed'] === true).length === 2,
      'the late USDC confirmed',
    );
    expect((straggled['transactions'] as Json[])[1]).toMatchObject({
      from: late.address,
      is_funding: false,
      non_funding_reason: 'straggler',
    });
    // Still the USDT sender's 3 USDT, not a notice for the USDC.
    const recoverable = await abandonedRecoverable(id, payer.address, '3000000', 'USDT');
    const s = await paymentSigning(chain, merchantId(), {
      ...recoverable,
      detected_chain: recoverable['recoverable_chain'],
    });
    const rescueOf = async (token: 'USDC' | 'USDT', amount: bigint) => {
      const address = chain.local.addresses.stablecoins[token];
      const { signature } = await signRescue(signer, s.domain, {
        paymentId: s.paymentId,
        token: address,
        to: late.address,
        amount,
        epoch: s.epoch,
        deadline: s.deadline,
      });
      return api('POST', `/payments/${id}/rescue`, {
        token: `${CHAIN}/erc20:${address}`,
        to: late.address,
        amount: amount.toString(),
        deadline: s.deadline.toString(),
        signature,
      });
    };
    const nonce = await relayerNonce();
    const payerOwned = await rescueOf('USDT', 3n * USDC);
    expect(payerOwned.status).toBe(422);
    expect(payerOwned.body['error']).toMatchObject({ code: 'payer_owned_token', param: 'token' });
    expect(await relayerNonce()).toBe(nonce);
    expect(await usdt(deposit)).toBe(3n * USDC);
    // Recover returns only the bound token; the merchant's signed rescue moves the USDC (here back to its sender).
    const lateBefore = await usdc(late.address);
    // The late sender is screened once its transfer is confirmed (the flow does it on its own); until then the
    // rescue is refused with nothing sent.
    const rescued = await until(
      () => rescueOf('USDC', 5n * USDC),
      (r) => (r.body['error'] as Json | undefined)?.['code'] !== 'sender_screening_pending',
      'the late USDC sender screened',
    );
    expect(rescued.body['error']).toBeUndefined();
    expect(rescued.status).toBe(200);
    expect((await usdc(late.address)) - lateBefore).toBe(5n * USDC);
    expect(await usdc(deposit)).toBe(0n);
    const rescueHook = await webhooks.next('payment.rescued', id);
    expect(rescueHook.data['transfer']).toEqual({
      tx_hash: expect.stringMatching(/^0x[0-9a-f]{64}$/),
      asset: `${CHAIN}/erc20:${chain.local.addresses.stablecoins.USDC}`,
      token_symbol: 'USDC',
      chain: CHAIN,
      amount: (5n * USDC).toString(),
      to: late.address,
    });

    await chain.increaseTime(86_401);
    const before = await usdt(payer.address);
    const recovered = await api('POST', `/payments/${id}/recover`);
    expect(recovered.body['error']).toBeUndefined();
    expect(recovered.body).toMatchObject({ status: 'expired' });
    expect((await usdt(payer.address)) - before).toBe(3n * USDC);
    expect(await usdt(deposit)).toBe(0n);
    expect((await webhooks.next('payment.recovered', id)).data['transfer']).toMatchObject({
      asset: `${CHAIN}/erc20:${chain.local.addresses.stablecoins.USDT}`,
      token_symbol: null,
      amount: (3n * USDC).toString(),
      to: payer.address,
    });
  }, 180_000);
});
