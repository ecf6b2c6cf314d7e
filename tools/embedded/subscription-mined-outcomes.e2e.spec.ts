import { MaxUint256, parseUnits, Wallet } from 'ethers';
import { connectTestStablecoin } from '@stablepay/contracts';
import { pooled, withoutAutomine } from './test-support/anvil';
import { type Json, until } from './test-support/http';
import { OnChainStack } from './test-support/stack';
import {
  approveForSubscribe,
  authorizeSubscribe,
  broadcastSubscribe,
  readyForSubscriptions,
  sendSubscribe,
  signedChargeBody,
} from './test-support/subscriptions';

/**
 * What only the mined block decides, on anvil through HTTP with the signed webhooks the merchant receives: a charge
 * that passed preflight and simulation but reverts when mined (the subscriber's balance drained, or its allowance
 * revoked, by a transaction mined ahead of it) fails with its transaction and pauses the subscription, and the next
 * successful charge unpauses it (the ledger's status filter lists each side); a subscribe transaction broadcast
 * before the merchant cancelled the intent lands and completes it late (SPEC: on-chain truth wins, the latest webhook
 * is authoritative).
 */
const CHAIN = 'eip155:8453';

describe('charges reverted when mined, and a late completion after a cancel (embedded stack, anvil)', () => {
  const e2e = new OnChainStack();
  const { api, webhooks } = e2e;
  const chain = e2e.chain(CHAIN);
  const signer = Wallet.createRandom();
  const subscriber = () => chain.wallet(3);
  let subscriptionId = '';
  let manager = '';
  let token = '';

  const subscription = async () => (await api('GET', `/subscriptions/${subscriptionId}`)).body;
  const signedCharge = async () => {
    const quote = await api('POST', `/subscriptions/${subscriptionId}/charge-quote`);
    expect(quote.status).toBe(201);
    return signedChargeBody(api, undefined, chain, {
      merchantId: e2e.stack.demoMerchantId,
      subscriptionId,
      managerAddress: manager,
      amount: String(quote.body['amount']),
      quoteCode: String(quote.body['quote_code']),
      signer,
    });
  };
  const charge = (body: object) => api('POST', `/subscriptions/${subscriptionId}/charge`, body);
  const coin = (wallet: Wallet) => connectTestStablecoin(token, wallet);
  /**
   * Mined ahead of anything the relayer pays a normal tip for. The gas limit is given: an estimate would run against
   * the pool's pending state, where the charge already took the funds.
   */
  const ahead = {
    maxPriorityFeePerGas: parseUnits('500', 'gwei'),
    maxFeePerGas: parseUnits('1000', 'gwei'),
    gasLimit: 200_000n,
  };

  beforeAll(async () => {
    await e2e.start('8453', {
      // The charge call waits for its receipt while the test mines by hand.
      CHARGE_RECEIPT_TIMEOUT_MS: '25000',
      COMMAND_TIMEOUT_MS: '30000',
    });
    await readyForSubscriptions(api, undefined, e2e.stack.demoMerchantId, [chain], {
      signer,
      pauser: Wallet.createRandom(),
    });
    await e2e.receiveWebhooks();
    const checkout = await api('POST', '/subscription-checkouts', {
      price: '150000',
      price_currency: 'ARS',
      period_duration: 3600,
      supported_chains: [CHAIN],
    });
    const { path, params, authorization } = await authorizeSubscribe(api, checkout.body, chain, subscriber());
    const txHash = await sendSubscribe(subscriber(), authorization);
    expect((await api('POST', path, { ...params, tx_hash: txHash }, null)).body['status']).toBe('recorded');
    subscriptionId = String(checkout.body['onchain_id']);
    manager = String(authorization['manager_address']);
    token = String(authorization['token_address']);
  }, 180_000);

  afterAll(() => e2e.stop());

  it.each([
    {
      what: 'balance drained',
      reason: 'InsufficientBalance',
      undercut: async () => {
        const all = await coin(subscriber()).balanceOf(subscriber().address);
        return coin(subscriber()).transfer(chain.wallet(6).address, all, ahead);
      },
      restore: async () => {
        const all = await coin(chain.wallet(6)).balanceOf(chain.wallet(6).address);
        await (await coin(chain.wallet(6)).transfer(subscriber().address, all)).wait();
      },
    },
    {
      what: 'allowance revoked',
      reason: 'InsufficientAllowance',
      undercut: () => coin(subscriber()).approve(manager, 0n, ahead),
      restore: async () => {
        await (await coin(subscriber()).approve(manager, MaxUint256)).wait();
      },
    },
  ])(
    'a charge reverted when mined ($what after preflight): failed with its transaction, paused; the next success unpauses',
    async ({ reason, undercut, restore }) => {
      const body = await signedCharge();
      const before = await subscription();
      expect(before['paused']).toBe(false);
      let undercutHash = '';
      const answer = await withoutAutomine(chain, async () => {
        // Preflight and simulation pass: the charge waits in the pool for its block.
        const pending = charge(body);
        await until(
          () => pooled(chain),
          (n) => n === 1,
          'the charge in the pool',
        );
        undercutHash = (await undercut()).hash;
        await until(
          () => pooled(chain),
          (n) => n === 2,
          'the undercut in the pool',
        );
        await chain.mine();
        return pending;
      });
      expect(answer.status).toBe(200);
      expect(answer.body).toMatchObject({
        status: 'failed',
        failure_reason: reason,
        charge_nonce: body.nonce,
        fee: '0',
        block_number: '0',
        fiat_amount: null,
        settlement_status: null,
      });
      const txHash = String(answer.body['tx_hash']);
      expect(txHash).toMatch(/^0x[0-9a-f]{64}$/);
      const [mined, undercutReceipt] = await Promise.all([
        chain.provider().getTransactionReceipt(txHash),
        chain.provider().getTransactionReceipt(undercutHash),
      ]);
      // Both in the same block, the undercut first: the charge itself reverted on chain.
      expect(mined?.status).toBe(0);
      expect(mined?.blockNumber).toBe(undercutReceipt?.blockNumber);
      expect(undercutReceipt?.index).toBeLessThan(mined?.index ?? 0);
      expect(await subscription()).toMatchObject({ paused: true, charge_nonce: body.nonce });
      const failed = await webhooks.next('subscription.charge_failed', String(answer.body['id']), {
        key: 'charge',
      });
      expect(failed.data['charge']).toEqual(answer.body);
      expect(failed.data['object']).toMatchObject({ paused: true });

      await restore();
      const next = await charge(await signedCharge());
      expect(next.body).toMatchObject({ status: 'succeeded', charge_nonce: body.nonce });
      expect(await subscription()).toMatchObject({ paused: false, charge_nonce: body.nonce + 1 });
      const succeeded = await webhooks.next('subscription.charge_succeeded', String(next.body['id']), {
        key: 'charge',
      });
      expect(succeeded.data['object']).toMatchObject({ paused: false });
      // The ledger's status filter on real rows: each side lists only its own.
      const listed = async (status: string) =>
        (
          (
            await api(
              'GET',
              `/merchants/${e2e.stack.demoMerchantId}/charges?subscription_id=${subscriptionId}&status=${status}&limit=100`,
            )
          ).body['data'] as Json[]
        ).map((c) => [c['id'], c['status']]);
      expect(await listed('failed')).toContainEqual([answer.body['id'], 'failed']);
      expect((await listed('failed')).every(([, status]) => status === 'failed')).toBe(true);
      expect(await listed('succeeded')).toContainEqual([next.body['id'], 'succeeded']);
      expect((await listed('succeeded')).every(([, status]) => status === 'succeeded')).toBe(true);
    },
    120_000,
  );

  it('a subscribe broadcast before the merchant cancelled the intent lands and completes it late: cancelled, then completed', async () => {
    const checkout = (
      await api('POST', '/subscription-checkouts', {
        price: '150000',
        price_currency: 'ARS',
        period_duration: 3600,
        supported_chains: [CHAIN],
      })
    ).body;
    const id = String(checkout['id']);
    const late = chain.wallet(4);
    const { authorization } = await authorizeSubscribe(api, checkout, chain, late);
    await approveForSubscribe(late, authorization);
    const sent = await withoutAutomine(chain, async () => {
      const tx = await broadcastSubscribe(late, authorization);
      const cancelled = await api('PATCH', `/subscription-checkouts/${id}/cancel`);
      expect(cancelled.status).toBe(200);
      expect(cancelled.body).toMatchObject({
        status: 'cancelled',
        cancellation_reason: 'merchant_cancelled',
      });
      await chain.mine();
      return tx;
    });
    expect((await sent.wait())?.status).toBe(1);
    const done = await until(
      () => api('GET', `/subscription-checkouts/${id}`),
      (r) => r.body['status'] === 'completed',
      'the late completion',
    );
    expect(done.body).toMatchObject({ subscriber: late.address });
    expect(done.body['cancelled_at']).not.toBeNull();
    const onchainId = String(checkout['onchain_id']);
    expect((await api('GET', `/subscriptions/${onchainId}`)).body).toMatchObject({
      status: 'active',
      subscriber: late.address,
    });
    const cancelledHook = await webhooks.next('subscription_checkout.cancelled', id);
    const completedHook = await webhooks.next('subscription_checkout.completed', id);
    expect(webhooks.all('subscription_checkout.completed', id)).toHaveLength(1);
    expect(Date.parse(String(completedHook.data['object']?.['completed_at']))).toBeGreaterThanOrEqual(
      Date.parse(String(cancelledHook.data['object']?.['cancelled_at'])),
    );
    expect(completedHook.data['subscription']).toMatchObject({ id: onchainId, status: 'active' } as Json);
    expect(completedHook.data['first_charge']).toMatchObject({ charge_nonce: 0, tx_hash: sent.hash });
  }, 120_000);
});
