import { Wallet } from 'ethers';
import { connectSubscriptionManager } from '@stablepay/contracts';
import { type SandboxSettlementFeed, SETTLEMENT_FEED } from '@stablepay/charge-ledger-service';
import { quoteHash } from '@stablepay/evm';
import { createMerchant, type Json, until } from './test-support/http';
import { OnChainStack } from './test-support/stack';
import {
  authorizeSubscribe,
  newArsSubscriptionCheckout,
  readyForSubscriptions,
  sendSubscribe,
  signedChargeBody,
} from './test-support/subscriptions';

/**
 * A fiat-settling business's subscriptions on anvil, through HTTP (SPEC fiat field rules 1-5, Quote behavior): the
 * subscribe writes the three fiat fields on the first charge, a later charge redeems a `plk_` price lock, and the
 * charge ledger merges its two writers both ways on the chain: the API path first, then the indexer's read of the same
 * transaction; the indexer first, then the API path (the subscribe call backfills the fiat fields, rule 3; a charge
 * call finds its charge landed and leaves the indexer's row as it is, rule 4). Each ledger row is unique by tx_hash.
 *
 * The indexer reads a block only once two blocks sit on it (INDEXER_CONFIRMATIONS=2), so which writer comes first is
 * decided by the test mining blocks, not by a race.
 */
const ADMIN_TOKEN = 'admin-token-for-tests-0123456789';
const CHAIN = 'eip155:8453';

describe('fiat-settled subscriptions on chain: fiat fields, price locks, the ledger merge both ways (anvil)', () => {
  const e2e = new OnChainStack();
  const { api, webhooks } = e2e;
  const chain = e2e.chain(CHAIN);
  let merchant: { id: string; apiKey: string };
  const signer = Wallet.createRandom();
  const pauser = Wallet.createRandom();
  const as = (method: string, path: string, body?: unknown) => api(method, path, body, merchant.apiKey);

  const rows = async (subscriptionId: string) =>
    (await as('GET', `/merchants/${merchant.id}/charges?subscription_id=${subscriptionId}&limit=100`)).body[
      'data'
    ] as Json[];
  const subscription = async (id: string) => (await as('GET', `/subscriptions/${id}`)).body;
  /** A fresh price lock (of the plan price unless the body asks an ad-hoc fiat_amount) and the charge signed over it. */
  const lockedCharge = async (id: string, manager: string, quoteBody?: Json) => {
    const quote = await as('POST', `/subscriptions/${id}/charge-quote`, quoteBody);
    expect(quote.status).toBe(201);
    const body = await signedChargeBody(api, merchant.apiKey, chain, {
      merchantId: merchant.id,
      subscriptionId: id,
      managerAddress: manager,
      amount: String(quote.body['amount']),
      quoteCode: String(quote.body['quote_code']),
      signer,
    });
    return { quote: quote.body, body };
  };
  /**
   * Mines the blocks the indexer waits for, then waits until it has read past them: the subscriber raises its budget
   * by one in a later block, and the service seeing that change means every earlier block was read and handled.
   */
  const indexerCaughtUp = async (subscriptionId: string, subscriber: Wallet, managerAddress: string) => {
    const budget = BigInt(String((await subscription(subscriptionId))['budget'])) + 1n;
    await (
      await connectSubscriptionManager(managerAddress, subscriber.connect(chain.provider())).updateBudget(
        subscriptionId,
        budget,
      )
    ).wait();
    await chain.mine(2);
    await until(
      () => subscription(subscriptionId),
      (s) => s['budget'] === budget.toString(),
      'the indexer to read past the marker',
    );
  };
  /** The fiat settlement configuration (PUT /payments/settlement); null removes it. */
  const configure = async (fiat: Json | null) =>
    expect((await as('PUT', '/payments/settlement', { fiat })).status).toBe(200);
  const fiatArs = {
    currency: 'ARS',
    beneficiary_name: 'Pampa Fiat SA',
    account_number: '0000003100010000000001',
    country: 'AR',
  };
  const newCheckout = () => newArsSubscriptionCheckout(api, CHAIN, merchant.apiKey);

  beforeAll(async () => {
    // The sandbox provider reports nothing on its own: a settlement stays `pending` unless a test moves it.
    const stack = await e2e.start('8453', {
      ADMIN_TOKEN,
      INDEXER_CONFIRMATIONS: '2',
      SANDBOX_SETTLEMENT_DELAY_MS: 'off',
    });
    merchant = await createMerchant(stack, ADMIN_TOKEN, 'Pampa Fiat SA', 'fiat');
    const configured = await as('PUT', '/payments/settlement', { fiat: fiatArs });
    expect(configured.body).toMatchObject({ settlement_mode: 'fiat', fiat: { complete: true } });
    await readyForSubscriptions(api, merchant.apiKey, merchant.id, [chain], { signer, pauser });
    await e2e.receiveWebhooks(merchant.apiKey);
  }, 180_000);

  afterAll(() => e2e.stop());

  /** The subscription the API path wrote first (subscriber: anvil account 3). */
  const apiFirst = { id: '', manager: '' };

  it('API first: the subscribe call writes the first charge with the three fiat fields (pending); the indexer reading the same transaction later merges into that row', async () => {
    const checkout = await newCheckout();
    const subscriber = chain.wallet(3);
    const { path, params, authorization } = await authorizeSubscribe(api, checkout, chain, subscriber);
    const txHash = await sendSubscribe(subscriber, authorization);
    const reported = await api('POST', path, { ...params, tx_hash: txHash }, null);
    expect(reported.body).toMatchObject({ status: 'recorded', tx_hash: txHash });
    const id = String(checkout['onchain_id']);
    apiFirst.id = id;
    apiFirst.manager = String(authorization['manager_address']);

    // The charges list is the ledger's projection: the subscribe answer does not wait for it (it failed a loaded
    // CI run read at once).
    const [first, ...others] = await until(
      () => rows(id),
      (r) => r.length > 0,
      'the ledger to list the first charge',
    );
    expect(others).toEqual([]);
    expect(first).toMatchObject({
      subscription_id: id,
      charge_nonce: 0,
      status: 'succeeded',
      tx_hash: txHash,
      amount: authorization['first_charge_amount'],
      fiat_amount: '150000',
      fiat_currency: 'ARS',
      settlement_status: 'pending',
    });
    const hook = await webhooks.next('subscription.charge_succeeded', String(first?.['id']), {
      key: 'charge',
    });
    expect(hook.data['charge']).toEqual(first);

    await indexerCaughtUp(id, subscriber, apiFirst.manager);
    expect(await rows(id)).toEqual([first]);
    expect(webhooks.all('subscription.charge_succeeded', String(first?.['id']), 'charge')).toHaveLength(1);
  }, 120_000);

  it('a later charge redeems a plk_ price lock: charged at the locked amount, the row with the plan price in ARS and settlement pending; the indexer merges into it', async () => {
    const { id, manager } = apiFirst;
    const subscriber = chain.wallet(3);
    const { quote, body } = await lockedCharge(id, manager);
    expect(quote).toMatchObject({ kind: 'price_lock', fiat_amount: '150000', fiat_currency: 'ARS' });
    expect(quote['quote_code']).toMatch(/^plk_[0-9a-f]{24}$/);
    expect(quote['price_lock_code']).toBe(quote['quote_code']);
    const charged = await as('POST', `/subscriptions/${id}/charge`, body);
    expect(charged.status).toBe(200);
    expect(charged.body).toMatchObject({
      status: 'succeeded',
      charge_nonce: 1,
      amount: quote['amount'],
      fiat_amount: '150000',
      fiat_currency: 'ARS',
      settlement_status: 'pending',
    });
    const hook = await webhooks.next('subscription.charge_succeeded', String(charged.body['id']), {
      key: 'charge',
    });
    expect(hook.data['charge']).toEqual(charged.body);
    // The lock is spent: a second charge with it is refused before anything is sent.
    const again = await as(
      'POST',
      `/subscriptions/${id}/charge`,
      await signedChargeBody(api, merchant.apiKey, chain, {
        merchantId: merchant.id,
        subscriptionId: id,
        managerAddress: manager,
        amount: String(quote['amount']),
        quoteCode: String(quote['quote_code']),
        signer,
      }),
    );
    expect(again.body['error']).toMatchObject({ code: 'quote_already_used' });

    await indexerCaughtUp(id, subscriber, manager);
    const listed = await rows(id);
    expect(listed.filter((r) => r['tx_hash'] === charged.body['tx_hash'])).toEqual([charged.body]);
    expect(listed).toHaveLength(2);
  }, 120_000);

  it('an ad-hoc charge (a 1,234.57 ARS add-on on the 1,500.00 ARS plan) is paid out at the quoted 123457: the settlement summary says so, the row keeps the plan price as fiat_amount (SPEC)', async () => {
    const { id, manager } = apiFirst;
    const { quote, body } = await lockedCharge(id, manager, { fiat_amount: '123457' });
    expect(quote).toMatchObject({ kind: 'price_lock', fiat_amount: '123457', fiat_currency: 'ARS' });
    const charged = await as('POST', `/subscriptions/${id}/charge`, body);
    expect(charged.status).toBe(200);
    expect(charged.body).toMatchObject({
      status: 'succeeded',
      amount: quote['amount'],
      fiat_amount: '150000',
      fiat_currency: 'ARS',
      settlement_status: 'pending',
    });
    // The provider pays the charge out (a report about a row not listed yet is refused, so it waits for the row):
    // what it settled is the amount the charge was quoted at.
    await until(
      () => rows(id),
      (r) => r.some((row) => row['id'] === charged.body['id']),
      'the ledger to list the add-on',
    );
    const feed = e2e.stack.service.app.get<SandboxSettlementFeed>(SETTLEMENT_FEED);
    await feed.deliver({ chargeId: String(charged.body['id']), kind: 'payout_completed' });
    const [settled] = await until(
      async () =>
        webhooks.where(
          'subscription.charge_settled',
          (d) => d['object']?.['subscription_id'] === id && d['object']['charge_nonce'] === body.nonce,
        ),
      (h) => h.length > 0,
      'subscription.charge_settled of the add-on',
    );
    expect(settled?.data['object']).toEqual({
      subscription_id: id,
      charge_nonce: body.nonce,
      amount: quote['amount'],
      fiat_amount: '123457',
      fiat_currency: 'ARS',
      settlement_status: 'completed',
    });
    const listed = await until(
      () => rows(id),
      (r) => r.some((row) => row['id'] === charged.body['id'] && row['settlement_status'] === 'completed'),
      'the add-on row to show its settlement completed',
    );
    expect(listed.find((row) => row['id'] === charged.body['id'])).toMatchObject({ fiat_amount: '150000' });
  }, 120_000);

  it('a price lock issued before the fiat configuration changed is not redeemed (removed: 422 fiat_settlement_required; moved to USD: 422 currency_mismatch): nothing sent, nothing written; back in ARS the same lock charges', async () => {
    const { id, manager } = apiFirst;
    const { quote, body } = await lockedCharge(id, manager);
    expect(quote).toMatchObject({ kind: 'price_lock', fiat_currency: 'ARS' });
    const before = { rows: await rows(id), subscription: await subscription(id) };
    const onChain = connectSubscriptionManager(manager, chain.provider());
    try {
      for (const [fiat, code] of [
        [null, 'fiat_settlement_required'],
        [{ ...fiatArs, currency: 'USD', country: 'US' }, 'currency_mismatch'],
      ] as const) {
        await configure(fiat);
        const refused = await as('POST', `/subscriptions/${id}/charge`, body);
        expect(refused.status).toBe(422);
        expect(refused.body['error']).toMatchObject({ type: 'cannot_process', code, param: 'quote_code' });
      }
      // Nothing went to the chain (the nonce is unused there) and nothing was recorded.
      expect(await onChain.chargeNonceUsed(id, body.nonce)).toBe(false);
      expect(await rows(id)).toEqual(before.rows);
      expect(await subscription(id)).toEqual(before.subscription);
    } finally {
      await configure(fiatArs);
    }
    // The lock was refused for the configuration, not spent: paid out in ARS again, it is redeemed.
    const charged = await as('POST', `/subscriptions/${id}/charge`, body);
    expect(charged.body).toMatchObject({
      status: 'succeeded',
      charge_nonce: body.nonce,
      fiat_currency: 'ARS',
      settlement_status: 'pending',
    });
  }, 120_000);

  it('indexer first: the indexer writes the first charge without fiat fields, then the subscribe call backfills them onto the same row (charge_succeeded again)', async () => {
    const checkout = await newCheckout();
    const subscriber = chain.wallet(4);
    const { path, params, authorization } = await authorizeSubscribe(api, checkout, chain, subscriber);
    const txHash = await sendSubscribe(subscriber, authorization);
    const id = String(checkout['onchain_id']);
    await chain.mine(2);
    const [byIndexer] = await until(
      () => rows(id),
      (r) => r.length === 1,
      "the indexer's row of the first charge",
    );
    expect(byIndexer).toMatchObject({
      charge_nonce: 0,
      status: 'succeeded',
      tx_hash: txHash,
      fiat_amount: null,
      fiat_currency: null,
      settlement_status: null,
    });
    const chargeId = String(byIndexer?.['id']);
    const first = await webhooks.next('subscription.charge_succeeded', chargeId, { key: 'charge' });
    expect(first.data['charge']).toEqual(byIndexer);

    const reported = await api('POST', path, { ...params, tx_hash: txHash }, null);
    expect(reported.status).toBe(200);
    expect(reported.body['tx_hash']).toBe(txHash);
    const [merged, ...others] = await until(
      () => rows(id),
      (r) => r[0]?.['fiat_amount'] !== null,
      'the fiat fields backfilled',
    );
    expect(others).toEqual([]);
    expect(merged).toEqual({
      ...byIndexer,
      fiat_amount: '150000',
      fiat_currency: 'ARS',
      settlement_status: 'pending',
    });
    // Events rule 6: charge_succeeded again, same charge id, a new event, with the backfilled fields.
    const second = await webhooks.next('subscription.charge_succeeded', chargeId, {
      key: 'charge',
      count: 2,
    });
    expect(second.id).not.toBe(first.id);
    expect(second.data['charge']).toEqual(merged);
  }, 120_000);

  it('indexer first on a later charge: the signed charge lands through another sender, the indexer writes the row (no fiat fields, rule 4); the merchant call answers that row and adds none', async () => {
    const { id, manager } = apiFirst;
    const { quote, body } = await lockedCharge(id, manager);
    const sent = await connectSubscriptionManager(manager, chain.wallet(8)).charge(
      id,
      BigInt(body.amount),
      body.nonce,
      quoteHash(String(quote['quote_code'])),
      BigInt(body.deadline),
      body.signature,
    );
    await sent.wait();
    await chain.mine(2);
    const listed = await until(
      () => rows(id),
      (r) => r.some((c) => c['tx_hash'] === sent.hash),
      "the indexer's row of the charge",
    );
    const byIndexer = listed.find((c) => c['tx_hash'] === sent.hash);
    expect(byIndexer).toMatchObject({ charge_nonce: body.nonce, fiat_amount: null, settlement_status: null });

    const answered = await as('POST', `/subscriptions/${id}/charge`, body);
    expect(answered.status).toBe(200);
    expect(answered.body).toEqual(byIndexer);
    expect((await rows(id)).filter((c) => c['tx_hash'] === sent.hash)).toEqual([byIndexer]);
    expect(await subscription(id)).toMatchObject({ charge_nonce: body.nonce + 1, paused: false });
  }, 120_000);
  it('the authorize step refuses once the fiat configuration no longer pays out in the plan currency (removed: 422 fiat_settlement_required; moved to USD: 422 currency_mismatch); a subscribe already signed and landed is still recorded', async () => {
    const signedBefore = await newCheckout();
    const refusedLater = await newCheckout();
    const early = chain.wallet(5);
    const { path, params, authorization } = await authorizeSubscribe(api, signedBefore, chain, early);
    const authorizeLater = async () => {
      const option = (refusedLater['subscription_options'] as Json[]).find((o) =>
        String(o['asset']).startsWith(`${CHAIN}/`),
      );
      return api(
        'POST',
        `/subscription-checkouts/${String(refusedLater['id'])}/subscribe`,
        { chain: CHAIN, asset: option?.['asset'], subscriber: chain.wallet(6).address },
        null,
      );
    };
    try {
      await configure(null);
      const removed = await authorizeLater();
      expect(removed.status).toBe(422);
      expect(removed.body['error']).toMatchObject({
        type: 'cannot_process',
        code: 'fiat_settlement_required',
      });

      // On-chain truth wins: the subscription signed before the change landed, so its report records it.
      const txHash = await sendSubscribe(early, authorization);
      const reported = await api('POST', path, { ...params, tx_hash: txHash }, null);
      expect(reported.body).toMatchObject({ status: 'recorded', tx_hash: txHash });

      await configure({ ...fiatArs, currency: 'USD', country: 'US' });
      const moved = await authorizeLater();
      expect(moved.status).toBe(422);
      expect(moved.body['error']).toMatchObject({ type: 'cannot_process', code: 'currency_mismatch' });
      const quoted = await as('POST', `/subscriptions/${String(signedBefore['onchain_id'])}/charge-quote`);
      expect(quoted.body['error']).toMatchObject({ code: 'currency_mismatch' });
    } finally {
      await configure(fiatArs);
    }
    expect((await authorizeLater()).status).toBe(200);
  }, 120_000);

  /**
   * Last: it replaces the settlement address. A subscribe authorized before `POST /settings` replaced it lands after
   * it (the subscriber sends it) and its first charge pays the replaced address, which the registry holds until the
   * MerchantChange lands. The off-ramp credits the address the settings hold, so that payout can never complete: the
   * settlement fails at once with `settlement_address_replaced`, whichever write path recorded the charge first,
   * instead of staying `pending` until SPEC's 72-hour deadline ends it as `deposit_not_credited`.
   */
  describe('a charge that paid a replaced settlement address', () => {
    const stale: Array<{ checkout: Json; authorized: Awaited<ReturnType<typeof authorizeSubscribe>> }> = [];
    const staleAt = (i: number) => {
      const found = stale[i];
      if (!found) throw new Error(`no stale authorization ${i}`);
      return found;
    };
    const wallet = (i: number) => chain.wallet([6, 2, 1][i] ?? 6);
    /** The settlement address the registry keeps paying (A) and the one the settings took first (B). */
    const addresses = { a: '', b: Wallet.createRandom().address };
    /** The settlement failure webhook of the subscription's first charge. */
    const settlementFailed = (subscriptionId: string) =>
      until(
        async () =>
          webhooks.where(
            'subscription.charge_settlement_failed',
            (d) => d['object']?.['subscription_id'] === subscriptionId && d['object']['charge_nonce'] === 0,
          ),
        (hooks) => hooks.length > 0,
        `subscription.charge_settlement_failed of ${subscriptionId}`,
      );

    beforeAll(async () => {
      for (const i of [0, 1, 2]) {
        const checkout = await newCheckout();
        stale.push({ checkout, authorized: await authorizeSubscribe(api, checkout, chain, wallet(i)) });
      }
      addresses.a = String((await as('GET', '/settings')).body['settlement_address']);
      const changed = await as('POST', '/settings', {
        merchant_signer: signer.address,
        settlement_address: addresses.b,
      });
      expect(changed.status).toBe(200);
      await until(
        async () =>
          ((await as('GET', '/settings')).body['chain_registrations'] as Json[]).find(
            (r) => r['chain'] === CHAIN,
          ),
        (r) => r?.['status'] === 'change_requires_merchant_signature',
        'the registration to need the merchant',
      );
      // Block time has whole seconds: the subscribes land in a later second than the change.
      await chain.increaseTime(1);
    }, 120_000);

    it('subscribe call first: the first charge is recorded with its fiat fields, and its settlement fails at once with settlement_address_replaced', async () => {
      const { checkout, authorized } = staleAt(0);
      const txHash = await sendSubscribe(wallet(0), authorized.authorization);
      const reported = await api('POST', authorized.path, { ...authorized.params, tx_hash: txHash }, null);
      expect(reported.body['status']).toBe('recorded');
      const id = String(checkout['onchain_id']).toLowerCase();
      await webhooks.next('subscription.charge_paid_replaced_settlement_address', id);

      const [hook] = await settlementFailed(id);
      expect(hook?.data['object']).toMatchObject({
        subscription_id: id,
        charge_nonce: 0,
        fiat_amount: '150000',
        fiat_currency: 'ARS',
        settlement_status: 'failed',
        settlement_failure_reason: 'settlement_address_replaced',
      });
      const [row, ...others] = await rows(id);
      expect(others).toEqual([]);
      expect(row).toMatchObject({ tx_hash: txHash, status: 'succeeded', settlement_status: 'failed' });
    }, 120_000);

    it('indexer first: its row has no fiat settlement; the subscribe call backfills one, which fails at once', async () => {
      const { checkout, authorized } = staleAt(1);
      const txHash = await sendSubscribe(wallet(1), authorized.authorization);
      const id = String(checkout['onchain_id']).toLowerCase();
      await chain.mine(2);
      await webhooks.next('subscription.charge_paid_replaced_settlement_address', id);
      const [byIndexer] = await until(
        () => rows(id),
        (r) => r.length === 1,
        "the indexer's row of the first charge",
      );
      expect(byIndexer).toMatchObject({ tx_hash: txHash, settlement_status: null });

      const reported = await api('POST', authorized.path, { ...authorized.params, tx_hash: txHash }, null);
      expect(reported.status).toBe(200);
      const [hook] = await settlementFailed(id);
      expect(hook?.data['object']).toMatchObject({
        settlement_status: 'failed',
        settlement_failure_reason: 'settlement_address_replaced',
      });
      expect(await rows(id)).toEqual([
        { ...byIndexer, fiat_amount: '150000', fiat_currency: 'ARS', settlement_status: 'failed' },
      ]);
    }, 120_000);
    it('A -> B -> C before the log is read: a charge that paid A between the changes is announced against B, the address in force when it was made', async () => {
      const { checkout, authorized } = staleAt(2);
      const txHash = await sendSubscribe(wallet(2), authorized.authorization);
      const id = String(checkout['onchain_id']).toLowerCase();
      // C must come after the charge's block (anvil's clock runs ahead of the service's since increaseTime): the
      // service clock passes the block's second first, then the settings take C. The indexer reads the log only
      // after that (two blocks on it), and nothing reports it meanwhile.
      const mined = await chain.provider().getTransactionReceipt(txHash);
      const blockTime = Number((await chain.provider().getBlock(mined?.blockNumber ?? 'latest'))?.timestamp);
      await until(
        async () => Date.now(),
        (now) => now >= (blockTime + 1) * 1000,
        'the service clock past the charge block',
      );
      const c = Wallet.createRandom().address;
      expect(
        (await as('POST', '/settings', { merchant_signer: signer.address, settlement_address: c })).status,
      ).toBe(200);
      await chain.mine(2);

      const told = await webhooks.next('subscription.charge_paid_replaced_settlement_address', id);
      const mismatch = told.data['settlement_mismatch'] ?? {};
      expect(mismatch).toMatchObject({ charge_nonce: 0, tx_hash: txHash });
      expect(String(mismatch['paid_to']).toLowerCase()).toBe(addresses.a.toLowerCase());
      expect(String(mismatch['settlement_address']).toLowerCase()).toBe(addresses.b.toLowerCase());
    }, 120_000);
  });
});
