import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { MaxUint256, type Signer, Wallet } from 'ethers';
import {
  connectStablepayRegistry,
  connectSubscriptionManager,
  connectTestStablecoin,
  toOnChainId,
} from '@stablepay/contracts';
import { ANVIL_DEV_PRIVATE_KEYS, localChainProvider } from '@stablepay/local-chains';
import { signCancelSubscription, verifyWebhook } from '@stablepay/merchant-sdk';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { ManualClock } from '@stablepay/util';
import { type EmbeddedStack, startEmbedded } from './embedded';

/**
 * Subscriptions on chain end to end, through HTTP against the embedded stack on a local anvil: the subscribe call
 * (authorize, the subscriber's own approve + subscribe transactions from an anvil account, report), the first charge,
 * the completed intent, the subscription reads, merchant cancel, the subscriber's own changes observed by the indexer,
 * and a late completion after expiry.
 */
type Json = Record<string, unknown>;
const CHAIN = 'eip155:8453';

const until = async <T>(read: () => Promise<T>, done: (v: T) => boolean, what: string): Promise<T> => {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(value)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
};

describe('subscriptions on chain (embedded stack, anvil)', () => {
  let db: TestDatabase;
  let stack: EmbeddedStack;
  const clock = new ManualClock(new Date());
  const merchantSigner = Wallet.createRandom();
  const merchantPauser = Wallet.createRandom();
  const settlement = Wallet.createRandom().address;
  let receiver: Server;
  let webhookSecret = '';
  const received: Array<{ body: string; headers: IncomingHttpHeaders }> = [];
  type Hook = { type: string; data: Record<string, Json> };
  const hooks = () => received.map((r) => ({ ...r, event: JSON.parse(r.body) as Hook }));
  /** The webhook of `type` whose data.object.id is `id`. */
  const hook = (type: string, id: string, extra: (e: Hook) => boolean = () => true) =>
    until(
      async () =>
        hooks().find((h) => h.event.type === type && h.event.data['object']?.['id'] === id && extra(h.event)),
      (h) => h !== undefined,
      `webhook ${type} of ${id}`,
    ).then((h) => {
      if (!h) throw new Error('unreachable');
      expect(verifyWebhook(h.body, h.headers, webhookSecret)).toMatchObject({ valid: true });
      return h.event;
    });

  const api = async (method: string, path: string, body?: unknown, auth = true) => {
    const res = await fetch(`${stack.url}${path}`, {
      method,
      headers: {
        ...(auth ? { authorization: `Bearer ${stack.demoApiKey}` } : {}),
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.status, body: (await res.json()) as Json };
  };

  const provider = () => {
    const chain = stack.chains?.chains.find((c) => c.caip2 === CHAIN);
    if (!chain) throw new Error('no local chain');
    return localChainProvider(chain.rpcUrl, chain.chainId);
  };
  const wallet = (index: number) => new Wallet(ANVIL_DEV_PRIVATE_KEYS[index] ?? '', provider());

  const createCheckout = async (extra: Json = {}) => {
    const res = await api('POST', '/subscription-checkouts', {
      price: '150000',
      price_currency: 'ARS',
      supported_chains: [CHAIN],
      external_customer_id: 'cus_42',
      ...extra,
    });
    expect(res.status).toBe(201);
    return res.body;
  };

  const tokenOf = (checkout: Json, symbol: string) => {
    const option = (checkout['subscription_options'] as Json[]).find((o) => o['token_symbol'] === symbol);
    if (!option) throw new Error(`no ${symbol} option`);
    return option;
  };

  /** The wallet's side: mint, then send what the authorization says (approve, subscribe). */
  const sendSubscribe = async (subscriber: Wallet, authorization: Json): Promise<string> => {
    const token = connectTestStablecoin(String(authorization['token_address']), subscriber);
    await (await token.mint(subscriber.address, BigInt(String(authorization['budget_amount'])) * 3n)).wait();
    const [approve, subscribe] = authorization['transactions'] as Json[];
    await (
      await subscriber.sendTransaction({ to: String(approve?.['to']), data: String(approve?.['data']) })
    ).wait();
    const sent = await subscriber.sendTransaction({
      to: String(subscribe?.['to']),
      data: String(subscribe?.['data']),
    });
    await sent.wait();
    return sent.hash;
  };

  beforeAll(async () => {
    receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        received.push({ body: Buffer.concat(chunks).toString('utf8'), headers: req.headers });
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
        SUBSCRIPTION_EXPIRY_POLL_MS: '50',
        ALLOW_LOCAL_WEBHOOKS: 'true',
        WEBHOOK_POLL_INTERVAL_MS: '100',
      },
      dataDir: 'memory',
      clock,
    });
    expect(
      (
        await api('POST', '/settings', {
          merchant_signer: merchantSigner.address,
          settlement_address: settlement,
        })
      ).status,
    ).toBe(200);
    const declaration = await api('GET', '/settings/pauser');
    const declared = await api('POST', '/settings/pauser', {
      merchant_pauser: merchantPauser.address,
      signature: await merchantPauser.signMessage(String(declaration.body['declaration_message'])),
    });
    expect(declared.status).toBe(200);
    const settings = await api('PATCH', '/settings', {
      webhook_url: `http://127.0.0.1:${address.port}/hooks`,
    });
    webhookSecret = String(settings.body['webhook_secret']);
  }, 120_000);

  afterAll(async () => {
    await stack?.stop();
    await db?.drop();
    await new Promise<void>((resolve) => receiver?.close(() => resolve()));
  });

  let subscriptionId = '';
  let managerAddress = '';
  let firstCheckoutId = '';
  let firstTxHash = '';
  let daiSubscriptionId = '';
  let lateCheckoutId = '';
  let daiMigration = { from: '', to: '' };

  it('subscribes with USDC (6 decimals) on a fiat-priced plan: authorize, wallet transactions, report -> active, completed', async () => {
    const checkout = await createCheckout();
    const usdc = tokenOf(checkout, 'USDC');
    const subscriber = wallet(3);
    const auth = await api(
      'POST',
      `/subscription-checkouts/${String(checkout['id'])}/subscribe`,
      { chain: CHAIN, asset: usdc['asset'], subscriber: subscriber.address },
      false,
    );
    expect(auth.status).toBe(200);
    expect(auth.body).toMatchObject({
      object: 'subscribe_authorization',
      subscription_id: checkout['onchain_id'],
      subscriber: subscriber.address,
      token_decimals: 6,
      price_amount: usdc['price_amount'],
      cap_amount: usdc['cap_amount'],
      budget_amount: usdc['budget_amount'],
      first_charge_amount: usdc['price_amount'],
      approval: { spender: auth.body['manager_address'], amount: MaxUint256.toString() },
    });
    managerAddress = String(auth.body['manager_address']);
    // The manager is deployed with the declared pauser bound in, and the pauser is now locked.
    const manager = connectSubscriptionManager(managerAddress, provider());
    expect(await manager.merchantPauser()).toBe(merchantPauser.address);
    const relock = await api('POST', '/settings/pauser', {
      merchant_pauser: merchantSigner.address,
      signature: await merchantSigner.signMessage(
        String((await api('GET', '/settings/pauser')).body['declaration_message']),
      ),
      acknowledge_shared_pauser_risk: true,
    });
    expect(relock.body['error']).toMatchObject({ code: 'pauser_locked_by_deployment' });

    const txHash = await sendSubscribe(subscriber, auth.body);
    const reported = await api(
      'POST',
      `/subscription-checkouts/${String(checkout['id'])}/subscribe`,
      { chain: CHAIN, asset: usdc['asset'], subscriber: subscriber.address, tx_hash: txHash },
      false,
    );
    expect(reported.status).toBe(200);
    const price = BigInt(String(usdc['price_amount']));
    const budget = BigInt(String(usdc['budget_amount']));
    expect(reported.body).toMatchObject({
      object: 'subscribe_result',
      status: 'recorded',
      tx_hash: txHash,
      subscription: {
        object: 'subscription',
        id: checkout['onchain_id'],
        subscription_id: checkout['onchain_id'],
        subscriber: subscriber.address,
        external_customer_id: 'cus_42',
        asset: usdc['asset'],
        token_symbol: 'USDC',
        token_decimals: 6,
        chain: CHAIN,
        cap_amount: usdc['cap_amount'],
        budget: usdc['budget_amount'],
        price: '150000',
        price_currency: 'ARS',
        charge_nonce: 1,
        status: 'active',
        paused: false,
        flagged: false,
        spent_this_period: price.toString(),
        remaining_budget: (budget - price).toString(),
      },
    });
    subscriptionId = String(checkout['onchain_id']);
    firstCheckoutId = String(checkout['id']);
    firstTxHash = txHash;
    const intent = await api('GET', `/subscription-checkouts/${String(checkout['id'])}`);
    expect(intent.body).toMatchObject({ status: 'completed', subscriber: subscriber.address });

    const got = await api('GET', `/subscriptions/${subscriptionId}`);
    expect(got.body).toEqual(reported.body['subscription']);
    const list = await api(
      'GET',
      `/merchants/${stack.demoMerchantId}/subscriptions?subscriber=${subscriber.address}`,
    );
    expect(list.body).toMatchObject({ object: 'list', has_more: false });
    expect((list.body['data'] as Json[]).map((s) => s['id'])).toEqual([subscriptionId]);
    // Reporting again records nothing twice.
    const again = await api(
      'POST',
      `/subscription-checkouts/${String(checkout['id'])}/subscribe`,
      { chain: CHAIN, asset: usdc['asset'], subscriber: subscriber.address, tx_hash: txHash },
      false,
    );
    expect(again.body['subscription']).toMatchObject({
      charge_nonce: 1,
      spent_this_period: price.toString(),
    });
  }, 120_000);

  it("refuses the merchant's own manager contract, signer and settlement address as subscriber (422, nothing signed)", async () => {
    expect(managerAddress).not.toBe('');
    const checkout = await createCheckout();
    const usdc = tokenOf(checkout, 'USDC');
    for (const [own, role] of [
      [managerAddress.toLowerCase(), 'subscription manager contract'],
      [merchantSigner.address, 'merchant signer'],
      [settlement, 'settlement address'],
    ] as const) {
      const res = await api(
        'POST',
        `/subscription-checkouts/${String(checkout['id'])}/subscribe`,
        { chain: CHAIN, asset: String(usdc['asset']), subscriber: own },
        false,
      );
      expect(res.status).toBe(422);
      expect(res.body['error']).toMatchObject({
        type: 'cannot_process',
        code: 'subscriber_is_merchant_address',
        param: 'subscriber',
        message: expect.stringContaining(role) as unknown,
      });
    }
    expect(
      (await api('GET', `/subscription-checkouts/${String(checkout['id'])}`)).body['subscriber'] ?? null,
    ).toBeNull();
  });

  it('refuses a subscribe for a chain or token the intent does not offer, and another merchant cannot read the subscription', async () => {
    const checkout = await createCheckout();
    const bad = await api(
      'POST',
      `/subscription-checkouts/${String(checkout['id'])}/subscribe`,
      { chain: 'eip155:137', asset: 'x', subscriber: wallet(4).address },
      false,
    );
    expect(bad.status).toBe(400);
    expect(bad.body['error']).toMatchObject({ param: 'chain', code: 'unsupported_chain' });
    const badAsset = await api(
      'POST',
      `/subscription-checkouts/${String(checkout['id'])}/subscribe`,
      { chain: CHAIN, asset: `${CHAIN}/erc20:0x${'12'.repeat(20)}`, subscriber: wallet(4).address },
      false,
    );
    expect(badAsset.body['error']).toMatchObject({ param: 'asset', code: 'unsupported_asset' });
    expect((await api('GET', `/subscriptions/0x${'ab'.repeat(32)}`)).status).toBe(404);
    expect((await api('GET', `/merchants/mer_someone_else/subscriptions`)).status).toBe(404);
  });

  it('merchant cancel: a bad signature is refused; the signed cancel -> cancelling -> (indexer) cancelled by merchant', async () => {
    const registry = connectStablepayRegistry(
      String(stack.chains?.chains[0]?.addresses.registry),
      provider(),
    );
    const epoch = (await registry.merchantAuth(toOnChainId(stack.demoMerchantId))).epoch;
    const deadline = Math.floor(Date.now() / 1000) + 3600;
    const sign = (signer: Signer) =>
      signCancelSubscription(
        signer,
        { chain: CHAIN, verifyingContract: managerAddress },
        { subscriptionId, nonce: 1, epoch, deadline },
      );
    const forged = await api('POST', `/subscriptions/${subscriptionId}/cancel`, {
      nonce: 1,
      deadline,
      signature: (await sign(Wallet.createRandom())).signature,
    });
    expect(forged.status).toBe(422);
    expect(forged.body['error']).toMatchObject({ code: 'invalid_signature', param: 'signature' });
    const stale = await api('POST', `/subscriptions/${subscriptionId}/cancel`, {
      nonce: 0,
      deadline,
      signature: (await sign(merchantSigner)).signature,
    });
    expect(stale.body['error']).toMatchObject({ code: 'nonce_mismatch' });

    const cancelled = await api('POST', `/subscriptions/${subscriptionId}/cancel`, {
      nonce: 1,
      deadline,
      signature: (await sign(merchantSigner)).signature,
    });
    expect(cancelled.status).toBe(200);
    expect(['cancelling', 'cancelled']).toContain(cancelled.body['status']);
    expect(cancelled.body['next_charge_at']).toBeNull();
    await until(
      () => api('GET', `/subscriptions/${subscriptionId}`),
      (r) => r.body['status'] === 'cancelled',
      'the indexer to record the cancel',
    );
    const again = await api('POST', `/subscriptions/${subscriptionId}/cancel`, {
      nonce: 1,
      deadline,
      signature: (await sign(merchantSigner)).signature,
    });
    expect(again.body['error']).toMatchObject({ code: 'subscription_cancelled' });
  }, 60_000);

  it('DAI (18 decimals): subscribe recorded by the indexer alone; updateCap, updateBudget, migration and subscriber cancel observed', async () => {
    const checkout = await createCheckout({ price: '237100', budget: '2371000' });
    const dai = tokenOf(checkout, 'DAI');
    const subscriber = wallet(5);
    const auth = await api(
      'POST',
      `/subscription-checkouts/${String(checkout['id'])}/subscribe`,
      { chain: CHAIN, asset: dai['asset'], subscriber: subscriber.address },
      false,
    );
    expect(auth.body).toMatchObject({ token_decimals: 18, price_amount: '2000000000000000000' });
    await sendSubscribe(subscriber, auth.body);
    // No report: the indexer's observations record the subscription and complete the intent.
    await until(
      () => api('GET', `/subscription-checkouts/${String(checkout['id'])}`),
      (r) => r.body['status'] === 'completed',
      'the indexer to complete the intent',
    );
    const id = String(checkout['onchain_id']);
    daiSubscriptionId = id;
    const sub = await api('GET', `/subscriptions/${id}`);
    expect(sub.body).toMatchObject({ status: 'active', charge_nonce: 1, token_decimals: 18 });

    const manager = connectSubscriptionManager(String(auth.body['manager_address']), subscriber);
    const newCap = BigInt(String(auth.body['cap_amount'])) - 1n;
    await (await manager.updateCap(id, newCap)).wait();
    const newBudget = BigInt(String(auth.body['budget_amount'])) + 5n;
    await (await manager.updateBudget(id, newBudget)).wait();
    await until(
      () => api('GET', `/subscriptions/${id}`),
      (r) => r.body['cap_amount'] === newCap.toString() && r.body['budget'] === newBudget.toString(),
      'cap and budget updates',
    );
    const next = wallet(6);
    daiMigration = { from: subscriber.address, to: next.address };
    await (await manager.proposeMigration(id, next.address)).wait();
    const token = connectTestStablecoin(String(auth.body['token_address']), next);
    await (await token.mint(next.address, 1000n)).wait();
    await (await token.approve(String(auth.body['manager_address']), 777n)).wait();
    await (
      await connectSubscriptionManager(String(auth.body['manager_address']), next).acceptMigration(
        id,
        newCap,
        newBudget,
      )
    ).wait();
    await until(
      () => api('GET', `/subscriptions/${id}`),
      (r) => r.body['subscriber'] === next.address,
      'the migration',
    );
    await (
      await connectSubscriptionManager(String(auth.body['manager_address']), next).subscriberCancel(id)
    ).wait();
    await until(
      () => api('GET', `/subscriptions/${id}`),
      (r) => r.body['status'] === 'cancelled',
      'the subscriber cancel',
    );
  }, 120_000);

  it('late completion: a subscribe that lands after the intent expired completes it', async () => {
    const checkout = await createCheckout({ expires_in: 60 });
    lateCheckoutId = String(checkout['id']);
    const usdc = tokenOf(checkout, 'USDC');
    const subscriber = wallet(7);
    const auth = await api(
      'POST',
      `/subscription-checkouts/${String(checkout['id'])}/subscribe`,
      { chain: CHAIN, asset: usdc['asset'], subscriber: subscriber.address },
      false,
    );
    expect(auth.status).toBe(200);
    clock.advance(61_000);
    await until(
      () => api('GET', `/subscription-checkouts/${String(checkout['id'])}`),
      (r) => r.body['status'] === 'expired',
      'expiry',
    );
    const refused = await api(
      'POST',
      `/subscription-checkouts/${String(checkout['id'])}/subscribe`,
      { chain: CHAIN, asset: usdc['asset'], subscriber: subscriber.address },
      false,
    );
    expect(refused.body['error']).toMatchObject({ code: 'subscription_checkout_not_pending' });
    await sendSubscribe(subscriber, auth.body);
    const done = await until(
      () => api('GET', `/subscription-checkouts/${String(checkout['id'])}`),
      (r) => r.body['status'] === 'completed',
      'the late completion',
    );
    expect(done.body['expired_at']).not.toBeNull();
  }, 60_000);

  it('every subscription event reached the merchant as a signed webhook, in the shapes of SPEC Events rules 1-6', async () => {
    const created = await hook('subscription.created', subscriptionId);
    expect(created.data['object']).toMatchObject({ object: 'subscription', subscription_id: subscriptionId });
    const charged = await hook('subscription.charge_succeeded', subscriptionId);
    expect(charged.data['charge']).toMatchObject({
      object: 'subscription_charge',
      subscription_id: subscriptionId,
      charge_nonce: 0,
      status: 'succeeded',
      tx_hash: firstTxHash,
    });
    // Rule 4: the object's charge_nonce is the next nonce; rule 5: the deprecated spread names the same charge.
    expect(charged.data['object']).toMatchObject({
      charge_nonce: 1,
      subscription_charge_id: charged.data['charge']?.['id'],
      tx_hash: firstTxHash,
    });
    const completed = await hook('subscription_checkout.completed', firstCheckoutId);
    expect(completed.data['object']).toMatchObject({ status: 'completed' });
    expect(completed.data['object']).not.toHaveProperty('subscription_options');
    expect(completed.data['subscription']).toMatchObject({
      object: 'subscription',
      id: subscriptionId,
      charge_nonce: 1,
      status: 'active',
    });
    expect(completed.data['first_charge']).toMatchObject({
      object: 'subscription_charge',
      id: charged.data['charge']?.['id'],
      charge_nonce: 0,
      tx_hash: firstTxHash,
    });
    // data.first_charge is the charge ledger's row (SPEC Events: a subscription charge), as the charges list shows it:
    // every field of the row, created_at included, and the fiat fields.
    const listed = (
      (
        await api(
          'GET',
          `/merchants/${stack.demoMerchantId}/charges?subscription_id=${subscriptionId}&limit=100`,
        )
      ).body['data'] as Json[]
    ).find((c) => c['id'] === charged.data['charge']?.['id']);
    expect(Object.keys(completed.data['first_charge'] ?? {}).sort()).toEqual(
      Object.keys(listed ?? {}).sort(),
    );
    expect(completed.data['first_charge']).toMatchObject({
      created_at: listed?.['created_at'],
      fiat_currency: 'ARS',
    });
    // Late completion: completed after expired, with the subscription and its first charge; sent once.
    const expired = await hook('subscription_checkout.expired', lateCheckoutId);
    const late = await hook('subscription_checkout.completed', lateCheckoutId);
    expect(Date.parse(String(late.data['object']?.['completed_at']))).toBeGreaterThan(
      Date.parse(String(expired.data['object']?.['expired_at'])) - 1,
    );
    expect(late.data['first_charge']).toMatchObject({ charge_nonce: 0 });
    expect(
      hooks().filter(
        (h) =>
          h.event.type === 'subscription_checkout.completed' &&
          h.event.data['object']?.['id'] === lateCheckoutId,
      ),
    ).toHaveLength(1);
    const cancelled = await hook('subscription.cancelled', subscriptionId);
    expect(cancelled.data['object']).toMatchObject({ status: 'cancelled', cancelled_by: 'merchant' });

    await hook('subscription.cap_updated', daiSubscriptionId);
    await hook('subscription.budget_updated', daiSubscriptionId);
    const migrated = await hook('subscription.migrated', daiSubscriptionId);
    expect(migrated.data['object']).toMatchObject({
      old_subscriber: daiMigration.from,
      new_subscriber: daiMigration.to,
      new_subscriber_balance: '1000',
      new_subscriber_allowance: '777',
    });
    const byCustomer = await hook('subscription.cancelled', daiSubscriptionId);
    expect(byCustomer.data['object']).toMatchObject({
      cancelled_by: 'subscriber',
      subscriber: daiMigration.to,
    });
  }, 60_000);
});
