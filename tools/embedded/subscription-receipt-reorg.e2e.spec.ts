import { Transaction, Wallet } from 'ethers';
import { DataSource } from 'typeorm';
import {
  connectStablepayRegistry,
  connectSubscriptionManager,
  connectTestStablecoin,
  toOnChainId,
} from '@stablepay/contracts';
import { quoteHash } from '@stablepay/evm';
import { signCancelSubscription } from '@stablepay/merchant-sdk';
import { type Json, until } from './test-support/http';
import { OnChainStack } from './test-support/stack';
import {
  authorizeSubscribe,
  newArsSubscriptionCheckout,
  readyForSubscriptions,
  sendSubscribe,
  signedChargeBody,
} from './test-support/subscriptions';

/**
 * The API path records a charge or a subscribe from the receipt it read, at one confirmation; the indexer reads a
 * block only once INDEXER_CONFIRMATIONS blocks sit on it (4 here, 12 by default). A reorg that takes the receipt's
 * block out before the indexer read it (evm_snapshot, the call, evm_revert, a longer fork with anvil_mine) is never
 * retracted by the indexer, which never saw the log: the receipt check undoes the API path's fact (docs/subscriptions.md,
 * Reorgs). The same transaction mined again on the new fork stands. Through HTTP on the embedded stack and a local
 * anvil. The lost-charge case runs last: the operator's orphaned charge transaction is not sent again, so its nonce
 * has no transaction under it afterwards.
 */
const CHAIN = 'eip155:8453';
const INDEXER_CONFIRMATIONS = 4;

describe('a reorg of a receipt the API path recorded, before the indexer read its block (anvil)', () => {
  const e2e = new OnChainStack();
  const { api, webhooks } = e2e;
  const chain = e2e.chain(CHAIN);
  const signer = Wallet.createRandom();
  const pauser = Wallet.createRandom();

  const subscription = async (id: string) => (await api('GET', `/subscriptions/${id}`)).body;
  const ledgerRow = async (chargeId: string) =>
    (
      (await api('GET', `/merchants/${e2e.stack.demoMerchantId}/charges?limit=100`)).body['data'] as Json[]
    ).find((r) => r['id'] === chargeId);
  /** Whether the indexer itself reported a log of `txHash` (rows the API path kept have `receipt:` ids). */
  const indexerObserved = async (txHash: string) =>
    (
      await e2e.stack.service.app.get(DataSource).query(
        `SELECT 1 FROM subscription_chain_observations
            WHERE lower(tx_hash) = lower($1) AND observation_id NOT LIKE 'receipt:%'`,
        [txHash],
      )
    ).length > 0;
  /** The receipt check's row of `txHash`, every column (those a release adds included). */
  const receiptRow = async (txHash: string): Promise<Json> =>
    (
      (await e2e.stack.service.app.get(DataSource).query(
        `SELECT to_jsonb(o) AS row FROM subscription_chain_observations o
            WHERE observation_id LIKE 'receipt:%' AND lower(tx_hash) = lower($1)`,
        [txHash],
      )) as { row: Json }[]
    )[0]?.row ?? {};
  const newCheckout = () => newArsSubscriptionCheckout(api, CHAIN);
  /** A subscription through the hosted subscribe and the report (API path), read by the indexer too. */
  const subscribed = async (subscriber: Wallet) => {
    const checkout = await newCheckout();
    const { path, params, authorization } = await authorizeSubscribe(api, checkout, chain, subscriber);
    const txHash = await sendSubscribe(subscriber, authorization);
    expect((await api('POST', path, { ...params, tx_hash: txHash }, null)).body).toMatchObject({
      status: 'recorded',
    });
    await chain.mine(INDEXER_CONFIRMATIONS + 1);
    await until(() => indexerObserved(txHash), Boolean, 'the indexer to read the subscribe');
    return { id: String(checkout['onchain_id']), manager: String(authorization['manager_address']) };
  };
  /** The merchant's signed charge of the next nonce at the quoted amount. */
  const signedCharge = async (s: { id: string; manager: string }) => {
    const quote = await api('POST', `/subscriptions/${s.id}/charge-quote`);
    expect(quote.status).toBe(201);
    return signedChargeBody(api, undefined, chain, {
      merchantId: e2e.stack.demoMerchantId,
      subscriptionId: s.id,
      managerAddress: s.manager,
      amount: String(quote.body['amount']),
      quoteCode: String(quote.body['quote_code']),
      signer,
    });
  };
  /** Another sender lands the merchant's signed charge first (the service learns of it from the chain). */
  const frontRun = async (s: { id: string; manager: string }, body: Json) => {
    const theirs = await connectSubscriptionManager(s.manager, chain.wallet(8)).charge(
      s.id,
      BigInt(String(body['amount'])),
      Number(body['nonce']),
      quoteHash(String(body['quote_code'])),
      BigInt(Number(body['deadline'])),
      String(body['signature']),
    );
    await theirs.wait();
    return theirs.hash;
  };
  const charge = async (s: { id: string; manager: string }, signed?: Json) => {
    const body = signed ?? (await signedCharge(s));
    const charged = await api('POST', `/subscriptions/${s.id}/charge`, body);
    expect(charged.status).toBe(200);
    expect(charged.body).toMatchObject({ status: 'succeeded' });
    return charged.body;
  };
  const snapshot = async () => (await chain.provider().send('evm_snapshot', [])) as string;
  /** Back to `id`, then a fork longer than the indexer's confirmations without what came after it. */
  const reorgTo = async (id: string, resend: readonly string[] = []) => {
    await chain.provider().send('evm_revert', [id]);
    for (const raw of resend) await chain.provider().send('eth_sendRawTransaction', [raw]);
    await chain.provider().send('anvil_mine', [`0x${(INDEXER_CONFIRMATIONS * 2).toString(16)}`]);
  };

  beforeAll(async () => {
    await e2e.start('8453', { INDEXER_CONFIRMATIONS: String(INDEXER_CONFIRMATIONS) });
    await readyForSubscriptions(api, undefined, e2e.stack.demoMerchantId, [chain], { signer, pauser });
    await e2e.receiveWebhooks();
  }, 180_000);

  afterAll(() => e2e.stop());

  it('the charge transaction mined again on the new fork stands: still charged once, the row succeeded, no charge_failed', async () => {
    const s = await subscribed(chain.wallet(3));
    const point = await snapshot();
    const charged = await charge(s);
    const chargeTx = String(charged['tx_hash']);
    const sent = await chain.provider().getTransaction(chargeTx);
    if (!sent) throw new Error('charge transaction not found');
    await reorgTo(point, [Transaction.from(sent).serialized]);

    await until(() => indexerObserved(chargeTx), Boolean, 'the indexer to read the charge on the new fork');
    await until(
      async () =>
        (
          await e2e.stack.service.app.get(DataSource).query(
            `SELECT 1 FROM subscription_chain_observations
                WHERE observation_id LIKE 'receipt:%' AND lower(tx_hash) = lower($1) AND settled_at IS NOT NULL`,
            [chargeTx],
          )
        ).length > 0,
      Boolean,
      'the receipt check to settle the charge',
    );
    expect(await subscription(s.id)).toMatchObject({ charge_nonce: 2 });
    expect(await ledgerRow(String(charged['id']))).toMatchObject({ status: 'succeeded', tx_hash: chargeTx });
    expect(webhooks.all('subscription.charge_failed', String(charged['id']), 'charge')).toEqual([]);
  }, 180_000);

  it('a charge whose transaction is back in the pool after the reorg is kept while pending, and stands once mined again: no charge_failed, the row succeeded', async () => {
    const s = await subscribed(chain.wallet(6));
    const point = await snapshot();
    const charged = await charge(s);
    const chargeTx = String(charged['tx_hash']);
    const nonce = (await subscription(s.id))['charge_nonce'];
    const sent = await chain.provider().getTransaction(chargeTx);
    if (!sent) throw new Error('charge transaction not found');
    await reorgTo(point);
    // A real node puts an orphaned block's transactions back in its pool: here it is sent again by hand, with
    // automine off so that it stays there until the check has looked at it.
    await chain.provider().send('evm_setAutomine', [false]);
    try {
      await chain.provider().send('eth_sendRawTransaction', [Transaction.from(sent).serialized]);
      const looked = await until(
        () => receiptRow(chargeTx),
        (r) => r['retracted_at'] != null || r['pending_since'] != null,
        'the receipt check to find the block gone',
      );
      expect(looked['retracted_at']).toBeNull();
      expect(await subscription(s.id)).toMatchObject({ charge_nonce: nonce });
      await chain.provider().send('evm_mine', []);
    } finally {
      await chain.provider().send('evm_setAutomine', [true]);
    }
    await chain.mine(INDEXER_CONFIRMATIONS + 1);

    await until(() => indexerObserved(chargeTx), Boolean, 'the indexer to read the charge mined again');
    const settled = await until(
      () => receiptRow(chargeTx),
      (r) => r['settled_at'] != null || r['retracted_at'] != null,
      'the receipt check to settle the charge',
    );
    expect(settled['retracted_at']).toBeNull();
    expect(await subscription(s.id)).toMatchObject({ charge_nonce: nonce });
    expect(await ledgerRow(String(charged['id']))).toMatchObject({ status: 'succeeded', tx_hash: chargeTx });
    expect(webhooks.all('subscription.charge_failed', String(charged['id']), 'charge')).toEqual([]);
  }, 180_000);

  it('a subscribe whose block is taken out before the indexer read it: the intent back to pending (subscription_checkout.reorged), the subscription cancelled, its first charge charge_lost_to_reorg', async () => {
    const subscriber = chain.wallet(4);
    const checkout = await newCheckout();
    const { path, params, authorization } = await authorizeSubscribe(api, checkout, chain, subscriber);
    const point = await snapshot();
    const txHash = await sendSubscribe(subscriber, authorization);
    expect((await api('POST', path, { ...params, tx_hash: txHash }, null)).body).toMatchObject({
      status: 'recorded',
    });
    const checkoutId = String(checkout['id']);
    await webhooks.next('subscription_checkout.completed', checkoutId);
    await reorgTo(point);

    const reorged = await webhooks.next('subscription_checkout.reorged', checkoutId);
    expect(reorged.data['object']).toMatchObject({ id: checkoutId, status: 'pending' });
    const id = String(checkout['onchain_id']);
    await until(
      () => subscription(id),
      (x) => x['status'] === 'cancelled',
      'the subscription gone with its subscribe',
    );
    const lost = await webhooks.next('subscription.charge_failed', id, { key: 'object' });
    expect(lost.data['charge']).toMatchObject({ charge_nonce: 0, failure_reason: 'charge_lost_to_reorg' });
  }, 180_000);

  it("a charge another sender landed first, recorded by the charge call from the chain's log, is undone when a reorg takes its block out before the indexer read it", async () => {
    const s = await subscribed(chain.wallet(7));
    const before = await subscription(s.id);
    const point = await snapshot();
    const body = await signedCharge(s);
    const theirs = await frontRun(s, body);
    const charged = await charge(s, body);
    expect(charged['tx_hash']).toBe(theirs);
    await reorgTo(point);

    const after = await until(
      () => subscription(s.id),
      (x) => x['charge_nonce'] === before['charge_nonce'],
      'the landed charge undone',
    );
    expect(after['spent_this_period']).toBe(before['spent_this_period']);
    const lost = await webhooks.next('subscription.charge_failed', String(charged['id']), { key: 'charge' });
    expect(lost.data['charge']).toMatchObject({ tx_hash: theirs, failure_reason: 'charge_lost_to_reorg' });
  }, 180_000);

  it("a charge that overtook a merchant cancel, recorded by the cancel from the chain's log, is undone when a reorg takes its block out before the indexer read it", async () => {
    const s = await subscribed(chain.wallet(3));
    const before = await subscription(s.id);
    const point = await snapshot();
    const theirs = await frontRun(s, await signedCharge(s));
    const nonce = Number(before['charge_nonce']);
    const registry = connectStablepayRegistry(chain.local.addresses.registry, chain.provider());
    const { epoch } = await registry.merchantAuth(toOnChainId(e2e.stack.demoMerchantId));
    const deadline = (await chain.now()) + 3600n;
    const { signature } = await signCancelSubscription(
      signer,
      { chain: CHAIN, verifyingContract: s.manager },
      { subscriptionId: s.id, nonce, epoch, deadline },
    );
    const overtaken = await api('POST', `/subscriptions/${s.id}/cancel`, {
      nonce,
      deadline: Number(deadline),
      signature,
    });
    expect(overtaken.status).toBe(409);
    expect(await subscription(s.id)).toMatchObject({ charge_nonce: nonce + 1 });
    await reorgTo(point);

    await until(
      () => subscription(s.id),
      (x) => x['charge_nonce'] === nonce,
      'the charge that overtook the cancel undone',
    );
    const lost = await webhooks.next('subscription.charge_failed', s.id, { key: 'object' });
    expect(lost.data['charge']).toMatchObject({ tx_hash: theirs, failure_reason: 'charge_lost_to_reorg' });
  }, 180_000);

  it('a charge whose block is taken out before the indexer read it is undone: charge_nonce and spent_this_period back, the row failed charge_lost_to_reorg, subscription.charge_failed', async () => {
    const subscriber = chain.wallet(5);
    const s = await subscribed(subscriber);
    const before = await subscription(s.id);
    const token = connectTestStablecoin(chain.local.addresses.stablecoins.USDC, chain.provider());
    const balance = await token.balanceOf(subscriber.address);
    const point = await snapshot();
    const charged = await charge(s);
    expect(await subscription(s.id)).toMatchObject({ charge_nonce: Number(before['charge_nonce']) + 1 });
    await reorgTo(point);

    const after = await until(
      () => subscription(s.id),
      (x) => x['charge_nonce'] === before['charge_nonce'],
      'the charge undone',
    );
    expect(after['spent_this_period']).toBe(before['spent_this_period']);
    expect(await token.balanceOf(subscriber.address)).toBe(balance);
    const lost = await webhooks.next('subscription.charge_failed', String(charged['id']), { key: 'charge' });
    expect(lost.data['charge']).toMatchObject({
      id: charged['id'],
      status: 'failed',
      failure_reason: 'charge_lost_to_reorg',
    });
    expect(await ledgerRow(String(charged['id']))).toMatchObject({
      status: 'failed',
      failure_reason: 'charge_lost_to_reorg',
    });
  }, 180_000);
});
