import { Wallet } from 'ethers';
import {
  PAYMENT_SETTLEMENT_FEED,
  PaymentSettlementDeadlines,
  SandboxPaymentPayouts,
  type SandboxPaymentSettlementFeed,
} from '@stablepay/payments-service';
import { ManualClock } from '@stablepay/util';
import { createMerchant, type Json } from './test-support/http';
import { reorgLosing } from './test-support/anvil';
import { newPayment, paymentUntil, transferToken } from './test-support/payments';
import { OnChainStack } from './test-support/stack';
import { readyForSubscriptions } from './test-support/subscriptions';

/**
 * The fiat settlement of a fiat-settled business's one-time payment (SPEC Events > Fiat settlement delay and failure,
 * States > Payment "paid order, fiat-settled -> failed"), through HTTP on a local chain: a DIRECT payment is paid on
 * anvil and settles; then the settlement provider's reports (the sandbox feed, driven by the test or paying out on its
 * own) and SPEC's deadlines (the payments service's durable timer, by the injected clock) move its payout, with signed
 * payment.settlement_delayed / payment.settlement_failed webhooks whose data.object is the payment as GET
 * /payments/:id shows it.
 */
const ADMIN_TOKEN = 'admin-token-for-tests-0123456789';
const CHAIN = 'eip155:8453';
const HOUR = 3_600_000;
const SANDBOX_DELAY_MS = 10_000;
/** The sandbox provider's documented magic order amounts (docs/payments.md): 4.04 USD never credited, 4.02 rejected. */
const NEVER_CREDITED = '4040000';
const REJECTED = '4020000';
/** 4.08 USD: the bank transfer fails first (delayed), the payout completes one delay later. */
const LATE = '4080000';

describe('fiat settlement of one-time payments, on chain through HTTP', () => {
  const clock = new ManualClock(new Date());
  const e2e = new OnChainStack(clock);
  const { api, webhooks } = e2e;
  const chain = e2e.chain(CHAIN);
  let merchant: { id: string; apiKey: string };
  const payment = async (id: string) =>
    (await api('GET', `/payments/${id}`, undefined, merchant.apiKey)).body;
  const paymentIs = (id: string, done: (p: Json) => boolean, what: string) =>
    paymentUntil(api, id, done, what, merchant.apiKey);
  const hook = async (type: string, id: string) => (await webhooks.next(type, id)).data['object'] as Json;

  beforeAll(async () => {
    const stack = await e2e.start('8453', {
      ADMIN_TOKEN,
      SANDBOX_SETTLEMENT_DELAY_MS: String(SANDBOX_DELAY_MS),
    });
    merchant = await createMerchant(stack, ADMIN_TOKEN, 'Pampa Fiat SA', 'fiat');
    const configured = await api(
      'PUT',
      '/payments/settlement',
      {
        fiat: {
          currency: 'USD',
          beneficiary_name: 'Pampa Fiat SA',
          account_number: '0000003100010000000001',
          country: 'AR',
        },
      },
      merchant.apiKey,
    );
    expect(configured.body).toMatchObject({ settlement_mode: 'fiat', fiat: { complete: true } });
    await readyForSubscriptions(api, merchant.apiKey, merchant.id, [chain], {
      signer: Wallet.createRandom(),
      pauser: Wallet.createRandom(),
    });
    await e2e.receiveWebhooks(merchant.apiKey);
  }, 600_000);

  afterAll(() => e2e.stop());

  /**
   * A DIRECT checkout paid in full (USDC, 6 decimals like the order amount) by anvil account 3, once GET
   * /payments/:id says settled. The default 4.04 USD is the sandbox provider's "never credited" amount: it reports
   * nothing on its own, so only what a test delivers or the deadlines move the payout.
   */
  async function settledPayment(amount = NEVER_CREDITED): Promise<Json> {
    const p = await newPayment(
      api,
      { amount, method: 'DIRECT', accepted_chains: [CHAIN], accepted_tokens: ['USDC'] },
      merchant.apiKey,
    );
    const id = String(p['id']);
    await transferToken(chain, chain.wallet(3), 'USDC', String(p['deposit_address']), BigInt(amount));
    await webhooks.next('payment.settled', id);
    return paymentIs(id, (x) => x['status'] === 'settled', `payment ${id} settled`);
  }

  /**
   * `settledPayment`, paid from anvil account 3 after a snapshot: `lose()` then reorgs the chain back to it, losing the
   * account's mint and transfer (the service's own transactions are mined again), so the payment fails
   * deposit_lost_to_reorg (payment.failed), which it answers as the webhook's data.object.
   */
  async function settledThenLost(amount: string): Promise<{ id: string; lose: () => Promise<Json> }> {
    const provider = chain.provider();
    const snapshot = (await provider.send('evm_snapshot', [])) as string;
    const forkBlock = await provider.getBlockNumber();
    const id = String((await settledPayment(amount))['id']);
    return {
      id,
      lose: async () => {
        await reorgLosing(chain, snapshot, forkBlock, chain.wallet(3).address);
        return hook('payment.failed', id);
      },
    };
  }

  it('the provider reports a failed bank transfer (delayed), then rejects the payout (failed): signed webhooks, GET shows failed with the reason', async () => {
    const settled = await settledPayment();
    const id = String(settled['id']);
    expect(settled['settlement_status']).toBe('pending');
    expect(settled['settlement_failure_reason']).toBeUndefined();
    const feed = e2e.stack.service.app.get<SandboxPaymentSettlementFeed>(PAYMENT_SETTLEMENT_FEED);
    for (const kind of ['deposit_credited', 'withdraw_started', 'withdraw_failed'] as const)
      await feed.deliver({ paymentId: id, kind });

    expect(await hook('payment.settlement_delayed', id)).toMatchObject({
      id,
      status: 'settled',
      settlement_status: 'delayed',
      settlement_failure_reason: 'rampoff_withdraw_failed',
    });
    // The same report delivered again (the provider retrying) records nothing more.
    const report = await feed.deliver({ paymentId: id, kind: 'payout_rejected', id: 'prv_rejected_1' });
    await feed.deliver({ ...report });

    const failed = await hook('payment.settlement_failed', id);
    expect(failed).toMatchObject({
      id,
      status: 'failed',
      settlement_status: 'failed',
      settlement_failure_reason: 'provider_rejected',
      failure_reason: 'provider_rejected',
    });
    expect(await paymentIs(id, (x) => x['status'] === 'failed', 'GET to say failed')).toEqual(failed);
    expect(webhooks.all('payment.settlement_delayed', id)).toHaveLength(1);
    expect(webhooks.all('payment.settlement_failed', id)).toHaveLength(1);
    // A report about an unknown payment is refused, so the provider delivers it again later.
    await expect(feed.deliver({ paymentId: 'pay_unknown', kind: 'payout_completed' })).rejects.toMatchObject({
      status: 404,
    });
  }, 120_000);

  it('the deadlines by the injected clock: never credited -> payment.settlement_delayed at six hours (still settled), failed at 72', async () => {
    const settled = await settledPayment();
    const id = String(settled['id']);
    const deadlines = e2e.stack.service.app.get(PaymentSettlementDeadlines);
    clock.advance(6 * HOUR - 1000);
    await deadlines.tick();
    clock.advance(1000);
    await deadlines.tick();
    expect(await hook('payment.settlement_delayed', id)).toMatchObject({
      status: 'settled',
      settlement_status: 'delayed',
      settlement_failure_reason: 'deposit_not_credited',
    });
    await paymentIs(id, (x) => x['settlement_status'] === 'delayed', 'GET to say delayed');
    await deadlines.tick(); // nothing more until 72 hours
    expect(webhooks.all('payment.settlement_delayed', id)).toHaveLength(1);

    clock.advance(66 * HOUR);
    await deadlines.tick();
    expect(await hook('payment.settlement_failed', id)).toMatchObject({
      status: 'failed',
      settlement_status: 'failed',
      settlement_failure_reason: 'deposit_not_credited',
    });
    expect(await paymentIs(id, (x) => x['status'] === 'failed', 'GET to say failed')).toMatchObject({
      settlement_failure_reason: 'deposit_not_credited',
      failure_reason: 'deposit_not_credited',
    });
  }, 120_000);

  it('the sandbox provider pays test-mode payments out on its own, one delay after the settle: any amount completes, 4.02 is rejected', async () => {
    const completes = String((await settledPayment('12500000'))['id']);
    const rejected = String((await settledPayment(REJECTED))['id']);
    const payouts = e2e.stack.service.app.get(SandboxPaymentPayouts);
    await payouts.tick();
    expect((await payment(completes))['settlement_status']).toBe('pending');
    clock.advance(SANDBOX_DELAY_MS);
    await payouts.tick();
    expect(await hook('payment.settlement_failed', rejected)).toMatchObject({
      status: 'failed',
      settlement_status: 'failed',
      settlement_failure_reason: 'provider_rejected',
    });
    const done = await paymentIs(
      completes,
      (x) => x['settlement_status'] === 'completed',
      'the payout to complete',
    );
    expect(done['status']).toBe('settled');
    // Completed sends no webhook (SPEC names no payment event for it).
    expect(webhooks.all('payment.settlement_delayed', completes)).toEqual([]);
    expect(webhooks.all('payment.settlement_failed', completes)).toEqual([]);
  }, 120_000);

  it('a reorg takes the deposit of a payment the sandbox provider paid out: the failed payment shows the exposure (fiat paid for crypto we no longer hold), once', async () => {
    const { id, lose } = await settledThenLost('12500000');
    const payouts = e2e.stack.service.app.get(SandboxPaymentPayouts);
    clock.advance(SANDBOX_DELAY_MS);
    await payouts.tick();
    await paymentIs(id, (x) => x['settlement_status'] === 'completed', 'the payout to complete');

    // payment.failed carries the payment as of its fact; the exposure is the fact recorded with it (no webhook).
    expect(await lose()).toMatchObject({
      id,
      status: 'failed',
      failure_reason: 'deposit_lost_to_reorg',
      settlement_status: 'completed',
    });
    const exposed = await paymentIs(id, (x) => x['settlement_exposure'] != null, 'the exposure');
    expect(exposed).toMatchObject({
      status: 'failed',
      failure_reason: 'deposit_lost_to_reorg',
      settlement_status: 'completed',
      settlement_exposure: { reason: 'deposit_lost_to_reorg', amount: '12500000', currency: 'USD' },
    });
    // No second payout or settlement signal: the sandbox has nothing more for it.
    clock.advance(SANDBOX_DELAY_MS);
    await payouts.tick();
    expect(webhooks.all('payment.failed', id)).toHaveLength(1);
    expect(webhooks.all('payment.settlement_failed', id)).toEqual([]);
  }, 300_000);

  it('a reorg takes the deposit while the payout is under way: the sandbox sends nothing more for it; a payout the provider completes anyway is an exposure', async () => {
    const { id, lose } = await settledThenLost(LATE);
    const payouts = e2e.stack.service.app.get(SandboxPaymentPayouts);
    clock.advance(SANDBOX_DELAY_MS);
    await payouts.tick();
    expect(await hook('payment.settlement_delayed', id)).toMatchObject({ settlement_status: 'delayed' });

    const failed = await lose();
    expect(failed).toMatchObject({ status: 'failed', failure_reason: 'deposit_lost_to_reorg' });
    expect(failed['settlement_exposure']).toBeNull();
    // The script's next step (payout completed) is due now: not sent for a payment that is lost.
    clock.advance(SANDBOX_DELAY_MS);
    await payouts.tick();
    expect(await payment(id)).toMatchObject({ status: 'failed', settlement_status: 'delayed' });
    expect((await payment(id))['settlement_exposure']).toBeNull();

    // The provider completes the payout on its own all the same: recorded as the exposure, no webhook.
    const feed = e2e.stack.service.app.get<SandboxPaymentSettlementFeed>(PAYMENT_SETTLEMENT_FEED);
    await feed.deliver({ paymentId: id, kind: 'payout_completed' });
    const exposed = await paymentIs(id, (x) => x['settlement_exposure'] != null, 'the exposure');
    expect(exposed).toMatchObject({
      status: 'failed',
      failure_reason: 'deposit_lost_to_reorg',
      settlement_exposure: { reason: 'deposit_lost_to_reorg', amount: LATE, currency: 'USD' },
    });
    expect(webhooks.all('payment.failed', id)).toHaveLength(1);
    expect(webhooks.all('payment.settlement_failed', id)).toEqual([]);
  }, 300_000);
});
