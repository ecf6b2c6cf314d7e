import { Wallet, id, parseEther } from 'ethers';
import { connectStablepayRegistry, connectTestStablecoin, toOnChainId } from '@stablepay/contracts';
import { SANDBOX_SANCTIONED_PAYER } from '@stablepay/evm';
import {
  signCancelSubscription,
  signCapture,
  signPayoutRefund,
  signRefund,
  signRescue,
} from '@stablepay/merchant-sdk';
import {
  createTestDatabase,
  OpenApiConformance,
  type TestDatabase,
  WebhookConformance,
} from '@stablepay/testing';
import { type EmbeddedStack, startEmbedded } from './embedded';
import { anvilChain } from './test-support/anvil';
import { type Api, type ApiAnswer, type Json, until } from './test-support/http';
import { paymentSigning, transferToken } from './test-support/payments';
import { activeCustomer, newUsdcPayout } from './test-support/payouts';
import { SignedWebhookReceiver } from './test-support/signed-webhooks';
import {
  authorizeSubscribe,
  readyForSubscriptions,
  sendSubscribe,
  signedChargeBody,
} from './test-support/subscriptions';

/**
 * The real answers of a running service against docs/openapi.yaml: every call below is checked for a documented
 * status and a body matching that response's schema (and naming no undocumented field), on one embedded stack with a
 * local chain and the demo merchant as `npm start` seeds it (signer, pauser, payouts beta on). The flows that need
 * money on chain (a subscription charged, a TWO_STEP escrow captured and refunded, payouts funded on chain) run for a
 * merchant of their own whose signer key the test holds, paid from anvil dev wallets; every webhook those flows
 * deliver to it is checked against docs/asyncapi.yaml (channel merchantWebhooks) the same way.
 */
const ADMIN_TOKEN = 'admin-token-for-the-openapi-conformance-test';
const CHAIN = 'eip155:8453';

describe('API answers conform to docs/openapi.yaml (embedded stack, anvil)', () => {
  const openapi = OpenApiConformance.fromFile();
  let db: TestDatabase;
  let stack: EmbeddedStack;
  let problems: string[] = [];

  interface Request {
    readonly body?: unknown;
    /** Sent as is (a malformed or oversized body), with `contentType`. */
    readonly raw?: string;
    readonly contentType?: string;
    /** The bearer key: the demo merchant's unless given; null sends none. */
    readonly key?: string | null;
    readonly headers?: Record<string, string>;
  }

  /**
   * Calls the API, records where the answer departs from the document, and expects the status the call is for
   * (null: any status, for the polls of the shared test helpers).
   */
  const call = async (
    status: number | null,
    method: string,
    path: string,
    req: Request = {},
  ): Promise<ApiAnswer> => {
    const key = req.key === undefined ? stack.demoApiKey : req.key;
    const payload = req.raw ?? (req.body === undefined ? undefined : JSON.stringify(req.body));
    const res = await fetch(`${stack.url}${path}`, {
      method,
      headers: {
        ...(key === null ? {} : { authorization: `Bearer ${key}` }),
        ...(payload === undefined ? {} : { 'content-type': req.contentType ?? 'application/json' }),
        ...req.headers,
      },
      ...(payload === undefined ? {} : { body: payload }),
    });
    const contentType = res.headers.get('content-type');
    // docs/openapi.yaml (top): every response carries these two.
    for (const [header, value] of [
      ['cache-control', 'no-store'],
      ['x-content-type-options', 'nosniff'],
    ] as const)
      if (res.headers.get(header) !== value)
        problems.push(`${method} ${path} -> ${res.status}: ${header} is ${String(res.headers.get(header))}`);
    const text = await res.text();
    const json = /^application\/json/.test(contentType ?? '') && text !== '';
    const body = (json ? JSON.parse(text) : text === '' ? undefined : text) as Json;
    problems.push(...openapi.check({ method, path, status: res.status, body, contentType }));
    if (status !== null && res.status !== status)
      problems.push(`${method} ${path}: expected ${status}, got ${res.status} ${text.slice(0, 300)}`);
    return { status: res.status, body: json ? body : {} };
  };
  const admin = { key: ADMIN_TOKEN };
  /** A second merchant (no signer, payouts beta off), created once. */
  let other: { id: string; key: string } | undefined;
  const otherMerchant = async () => {
    if (!other) {
      const created = await call(201, 'POST', '/admin/merchants', {
        body: { name: 'Other Co', mode: 'test' },
        ...admin,
      });
      other = { id: String(created.body['id']), key: String(created.body['api_key']) };
    }
    return other;
  };

  /** The shared test helpers' API, every answer checked like `call`'s (they check the status themselves). */
  const checked: Api = (method, path, body, key) =>
    call(null, method, path, { ...(body === undefined ? {} : { body }), key });
  /** `checked` with `key` as the default key (the helpers that take none act for the demo merchant otherwise). */
  const checkedAs =
    (key: string): Api =>
    (method, path, body, k) =>
      checked(method, path, body, k === undefined ? key : k);
  const chain = anvilChain(() => stack, CHAIN);
  const webhooks = new SignedWebhookReceiver();

  /**
   * The merchant of the on-chain flows, created once: its webhooks go to the receiver, its signer is ours (the demo
   * merchant's seeded key stays in the stack), registered on chain, pauser declared, payouts beta on.
   */
  const signer = new Wallet(id('openapi-conformance e2e merchant signer'));
  let chainMerchant: { id: string; key: string } | undefined;
  const onChainMerchant = async () => {
    if (!chainMerchant) {
      const created = await call(201, 'POST', '/admin/merchants', {
        body: { name: 'Chain Co', mode: 'test' },
        ...admin,
      });
      const m = { id: String(created.body['id']), key: String(created.body['api_key']) };
      await call(200, 'POST', `/admin/merchants/${m.id}/beta-features`, {
        body: { payouts: true },
        ...admin,
      });
      const hooks = await call(200, 'PATCH', '/settings', {
        body: { webhook_url: webhooks.url },
        key: m.key,
      });
      webhooks.secret = String(hooks.body['webhook_secret']);
      await readyForSubscriptions(checked, m.key, m.id, [chain], {
        signer,
        pauser: new Wallet(id('openapi-conformance e2e merchant pauser')),
        settlement: chain.wallet(4).address,
      });
      chainMerchant = m;
    }
    return chainMerchant;
  };
  const epoch = (merchantId: string) =>
    connectStablepayRegistry(chain.local.addresses.registry, chain.provider()).merchantEpoch(
      toOnChainId(merchantId),
    );

  beforeAll(async () => {
    await webhooks.start();
    db = await createTestDatabase();
    stack = await startEmbedded({
      env: {
        DATABASE_URL: db.url,
        PORT: '0',
        ADMIN_TOKEN,
        LOG_LEVEL: 'error',
        LOCAL_CHAIN_IDS: '8453',
        INDEXER_POLL_MS: '100',
        ALLOW_LOCAL_WEBHOOKS: 'true',
        WEBHOOK_POLL_INTERVAL_MS: '100',
      },
      dataDir: 'memory',
      seedDemoMerchant: true,
    });
  }, 180_000);

  afterAll(async () => {
    await stack?.stop();
    await db?.drop();
    await webhooks.stop();
  });

  beforeEach(() => {
    problems = [];
  });

  it('settings, pause authority, settlement configuration, webhooks and the operator routes', async () => {
    const merchant = stack.demoMerchantId;
    await call(200, 'GET', '/settings');
    await call(200, 'PATCH', '/settings', {
      body: { display_name: 'Conformance Co', primary_color: '#112233' },
    });
    await call(200, 'PATCH', '/settings', { body: { webhook_url: 'http://127.0.0.1:9/hooks' } });
    await call(200, 'POST', '/settings/webhook/secret');
    await call(200, 'POST', '/settings/webhook/test');
    await call(200, 'GET', '/settings/pauser');
    await call(200, 'GET', '/payments/settlement');
    await call(404, 'GET', `/merchants/${merchant}/webhook-events/evt_unknown`);

    const o = await otherMerchant();
    await call(409, 'POST', '/settings/merchant-change', {
      body: { chain: 'eip155:8453', deadline: 4_000_000_000, signature: `0x${'11'.repeat(65)}` },
      key: o.key,
    });
    await call(400, 'POST', '/settings/revoke-authorizations', { body: { revocations: [] }, key: o.key });
    await call(200, 'POST', '/settings', {
      body: {
        merchant_signer: Wallet.createRandom().address,
        settlement_address: Wallet.createRandom().address,
      },
      key: o.key,
    });
    await call(200, 'PUT', '/payments/settlement', {
      body: { settlement_address: Wallet.createRandom().address },
      key: o.key,
    });
    await call(200, 'PUT', '/settings', {
      body: { settlement_address: Wallet.createRandom().address },
      key: o.key,
    });
    await call(200, 'POST', `/admin/merchants/${o.id}/beta-features`, { body: { payouts: false }, ...admin });
    await call(200, 'GET', '/admin/parked-streams', admin);
    await call(200, 'GET', '/health', { key: null });
    await call(200, 'GET', '/ready', { key: null });
    expect(problems).toEqual([]);
  });

  it('subscription checkouts, subscriptions and charges', async () => {
    const merchant = stack.demoMerchantId;
    const created = await call(201, 'POST', '/subscription-checkouts', {
      body: { price: '150000', price_currency: 'ARS', metadata: { plan_name: 'Pro' } },
    });
    const id = String(created.body['id']);
    await call(200, 'GET', `/subscription-checkouts/${id}`);
    await call(200, 'GET', '/subscription-checkouts?limit=1');
    await call(200, 'GET', `/hosted/subscribe/${id}`, { key: null });
    await call(200, 'PATCH', `/subscription-checkouts/${id}/cancel`);
    const option = (created.body['subscription_options'] as Json[])[0] ?? {};
    await call(409, 'POST', `/subscription-checkouts/${id}/subscribe`, {
      body: { subscriber: Wallet.createRandom().address, chain: option['chain'], asset: option['asset'] },
      key: null,
    });
    const pending = await call(201, 'POST', '/subscription-checkouts', {
      body: { price: '150000', price_currency: 'ARS' },
    });
    await call(200, 'POST', `/subscription-checkouts/${String(pending.body['id'])}/subscribe`, {
      body: { subscriber: Wallet.createRandom().address, chain: option['chain'], asset: option['asset'] },
      key: null,
    });
    await call(200, 'GET', `/merchants/${merchant}/subscriptions`);
    await call(200, 'GET', `/merchants/${merchant}/charges?status=succeeded`);
    const unknown = `0x${'ab'.repeat(32)}`;
    await call(404, 'GET', `/subscriptions/${unknown}`);
    await call(404, 'POST', `/subscriptions/${unknown}/charge-quote`, { body: {} });
    await call(404, 'GET', `/hosted/cancel/${unknown}`, { key: null });
    expect(problems).toEqual([]);
  });

  it('checkouts, payments and the payment-request surface', async () => {
    const created = await call(201, 'POST', '/checkouts', { body: { amount: '5000000', currency: 'USD' } });
    const id = String(created.body['id']);
    const paymentId = String(created.body['payment_id']);
    await call(200, 'GET', `/checkouts/${id}`);
    await call(200, 'GET', '/checkouts?limit=1');
    await call(200, 'GET', `/payments/${paymentId}`);
    await call(200, 'GET', '/payments?limit=1');
    await call(200, 'GET', `/hosted/pay/${id}`, { key: null });
    await call(200, 'GET', `/hosted/pay/${id}/status`, { key: null });
    await call(409, 'POST', `/payments/${paymentId}/recover`, { body: {} });
    await call(400, 'POST', `/payments/${paymentId}/capture`, { body: {} });
    await call(200, 'GET', '/reports/payments/export');
    await call(200, 'POST', `/checkouts/${id}/cancel`);
    const escrow = await call(201, 'POST', '/checkouts', {
      body: { amount: '2500000', currency: 'USD', method: 'TWO_STEP' },
    });
    await call(200, 'GET', `/payments/${String(escrow.body['payment_id'])}`);

    const viaKey = { key: null, headers: { 'x-api-key': stack.demoApiKey } };
    const request = await call(201, 'POST', '/payment-requests/payments/new', {
      body: { amount: '1000000', currency: 'USD' },
      ...viaKey,
    });
    const requested = String(request.body['id'] ?? request.body['payment_id']);
    await call(200, 'GET', `/payment-requests/payments/${requested}`, viaKey);
    await call(200, 'GET', `/payment-requests/payments/${requested}/status`, viaKey);
    expect(problems).toEqual([]);
  });

  it('customers, beneficiaries and payouts (beta)', async () => {
    const customer = await call(201, 'POST', '/customers', {
      body: { name: 'Ada Payer', email: 'ada@example.com' },
    });
    const customerId = String(customer.body['id']);
    await call(200, 'GET', `/customers/${customerId}`);
    await call(200, 'GET', '/customers');
    const beneficiary = await call(201, 'POST', '/beneficiaries', {
      body: { holder_name: 'Ada Payer', country: 'DE', currency: 'EUR', iban: 'DE89370400440532013000' },
    });
    const beneficiaryId = String(beneficiary.body['id']);
    await call(200, 'GET', `/beneficiaries/${beneficiaryId}`);
    await call(200, 'GET', '/beneficiaries');
    await call(201, 'POST', `/customers/${customerId}/kyc_links`);
    // SPEC: a payout for a customer that is not active is rejected.
    await call(customer.body['status'] === 'active' ? 201 : 422, 'POST', '/payouts', {
      body: {
        customer: customerId,
        beneficiary: beneficiaryId,
        amount: '25000000',
        chain: 'eip155:8453',
        token: 'USDC',
      },
    });
    await call(200, 'GET', '/payouts');
    await call(404, 'GET', '/payouts/po_unknown');
    await call(404, 'GET', '/beneficiaries/ben_unknown');
    expect(problems).toEqual([]);
  });

  it('the error envelope on 4xx answers', async () => {
    await call(401, 'GET', '/settings', { key: null });
    await call(401, 'GET', '/settings', { key: 'sk_test_not_a_key' });
    await call(404, 'GET', '/checkouts/chk_unknown');
    await call(400, 'GET', '/checkouts?starting_after=chk_a&ending_before=chk_b');
    await call(400, 'GET', '/settings?verbose=true');
    await call(400, 'POST', '/settings', { body: { merchant_signer: 'not-an-address' } });
    await call(422, 'POST', '/subscription-checkouts', { body: { price: '150000', price_currency: 'JPY' } });
    await call(400, 'POST', '/checkouts', { body: { amount: '1.5', currency: 'USD' } });
    await call(400, 'POST', '/checkouts', { raw: '{"amount":' });
    await call(415, 'POST', '/checkouts', { raw: 'amount=1', contentType: 'text/plain' });
    await call(413, 'POST', '/checkouts', { raw: JSON.stringify({ pad: 'x'.repeat(1_100_000) }) });
    await call(404, 'GET', '/customers/cus_unknown');
    await call(400, 'POST', `/merchants/${stack.demoMerchantId}/webhook-events/evt_unknown/redeliver`, {
      body: { now: true },
    });
    const o = await otherMerchant();
    await call(404, 'GET', `/merchants/${o.id}/subscriptions`);
    await call(404, 'GET', `/merchants/${o.id}/charges`);
    const payoutsOff = await call(403, 'GET', '/payouts', { key: o.key });
    expect((payoutsOff.body['error'] as Json | undefined)?.['code']).toBe('beta_feature_not_enabled');
    // SPEC: no EVM signer when declaring the pauser is 400 evm_payment_config_missing.
    const fresh = await call(201, 'POST', '/admin/merchants', {
      body: { name: 'Fresh Co', mode: 'test' },
      ...admin,
    });
    await call(400, 'POST', '/settings/pauser', {
      body: { merchant_pauser: Wallet.createRandom().address, signature: `0x${'11'.repeat(65)}` },
      key: String(fresh.body['api_key']),
    });
    expect(problems).toEqual([]);
  });

  it('a subscription subscribed, quoted, charged and cancelled on chain', async () => {
    const m = await onChainMerchant();
    const checkout = await call(201, 'POST', '/subscription-checkouts', {
      body: { price: '150000', price_currency: 'ARS', supported_chains: [CHAIN] },
      key: m.key,
    });
    const subscriber = chain.wallet(3);
    const { path, params, authorization } = await authorizeSubscribe(
      checked,
      checkout.body,
      chain,
      subscriber,
    );
    const txHash = await sendSubscribe(subscriber, authorization);
    await call(200, 'POST', path, { body: { ...params, tx_hash: txHash }, key: null });
    const subscriptionId = String(checkout.body['onchain_id']);
    await call(200, 'GET', `/subscription-checkouts/${String(checkout.body['id'])}`, { key: m.key });
    await call(200, 'GET', `/subscriptions/${subscriptionId}`, { key: m.key });

    const quote = await call(201, 'POST', `/subscriptions/${subscriptionId}/charge-quote`, { key: m.key });
    const managerAddress = String(authorization['manager_address']);
    const charged = await call(200, 'POST', `/subscriptions/${subscriptionId}/charge`, {
      body: await signedChargeBody(checked, m.key, chain, {
        merchantId: m.id,
        subscriptionId,
        managerAddress,
        amount: String(quote.body['amount']),
        quoteCode: String(quote.body['quote_code']),
        signer,
      }),
      key: m.key,
    });
    expect(charged.body['status']).toBe('succeeded');
    // An ad-hoc fiat amount: the other quote form.
    await call(201, 'POST', `/subscriptions/${subscriptionId}/charge-quote`, {
      body: { fiat_amount: '50000' },
      key: m.key,
    });
    await call(200, 'GET', `/merchants/${m.id}/charges?subscription_id=${subscriptionId}`, { key: m.key });
    await call(200, 'GET', `/merchants/${m.id}/subscriptions`, { key: m.key });
    await webhooks.next('subscription.charge_succeeded', String(charged.body['id']), { key: 'charge' });

    // The subscriber withdraws the allowance: the next charge is refused at simulation (200, failed, paused).
    const token = connectTestStablecoin(String(authorization['token_address']), subscriber);
    await (await token.approve(managerAddress, 0n)).wait();
    const again = await call(201, 'POST', `/subscriptions/${subscriptionId}/charge-quote`, { key: m.key });
    const failed = await call(200, 'POST', `/subscriptions/${subscriptionId}/charge`, {
      body: await signedChargeBody(checked, m.key, chain, {
        merchantId: m.id,
        subscriptionId,
        managerAddress,
        amount: String(again.body['amount']),
        quoteCode: String(again.body['quote_code']),
        signer,
      }),
      key: m.key,
    });
    expect(failed.body).toMatchObject({ status: 'failed', failure_reason: 'InsufficientAllowance' });
    await webhooks.next('subscription.charge_failed', String(failed.body['id']), { key: 'charge' });

    const nonce = Number(
      (await call(200, 'GET', `/subscriptions/${subscriptionId}`, { key: m.key })).body['charge_nonce'],
    );
    const deadline = (await chain.now()) + 3_600n;
    const { signature } = await signCancelSubscription(
      signer,
      { chain: CHAIN, verifyingContract: managerAddress },
      { subscriptionId, nonce, epoch: await epoch(m.id), deadline },
    );
    await call(200, 'POST', `/subscriptions/${subscriptionId}/cancel`, {
      body: { nonce, deadline: Number(deadline), signature },
      key: m.key,
    });
    await webhooks.next('subscription.cancelled', subscriptionId);
    await call(200, 'GET', `/subscriptions/${subscriptionId}`, { key: m.key });
    expect(problems).toEqual([]);
  }, 240_000);

  it('a TWO_STEP escrow paid on chain, captured in part and the rest refunded', async () => {
    const m = await onChainMerchant();
    const created = await call(201, 'POST', '/checkouts', {
      body: {
        amount: '100000000',
        currency: 'USD',
        method: 'TWO_STEP',
        accepted_chains: [CHAIN],
        accepted_tokens: ['USDC'],
      },
      key: m.key,
    });
    const paymentId = String(created.body['payment_id']);
    const payer = chain.wallet(5);
    await transferToken(chain, payer, 'USDC', String(created.body['deposit_address']), 100_000_000n);
    const escrowed = await until(
      async () => (await call(200, 'GET', `/payments/${paymentId}`, { key: m.key })).body,
      (p) => p['status'] === 'escrow_confirmed',
      'the escrow confirmed',
    );
    const s = await paymentSigning(chain, m.id, escrowed);
    const captured = await signCapture(signer, s.domain, {
      paymentId: s.paymentId,
      token: s.token,
      amount: 60_000_000n,
      epoch: s.epoch,
      deadline: s.deadline,
    });
    await call(200, 'POST', `/payments/${paymentId}/capture`, {
      body: { amount: '60000000', deadline: s.deadline.toString(), signature: captured.signature },
      key: m.key,
    });
    const refunded = await signRefund(signer, s.domain, {
      paymentId: s.paymentId,
      token: s.token,
      payer: payer.address,
      amount: 40_000_000n,
      epoch: s.epoch,
      deadline: s.deadline,
    });
    const refund = await call(200, 'POST', `/payments/${paymentId}/refund`, {
      body: { amount: '40000000', deadline: Number(s.deadline), signature: refunded.signature },
      key: m.key,
    });
    expect(refund.body['status']).toBe('settled');
    await webhooks.next('payment.refunded', paymentId);
    await call(200, 'GET', `/checkouts/${String(created.body['id'])}`, { key: m.key });
    expect(problems).toEqual([]);
  }, 240_000);

  it('payouts funded on chain: completed, and a flagged sender held and refused its refund', async () => {
    const m = await onChainMerchant();
    const { customerId, address } = await activeCustomer(
      checkedAs(m.key),
      'Ada Payer',
      'ada-chain@example.com',
    );
    await call(200, 'GET', `/customers/${customerId}`, { key: m.key });
    const payoutId = await newUsdcPayout(checkedAs(m.key), customerId, '25000000', CHAIN);
    await transferToken(chain, chain.wallet(1), 'USDC', address, 25_000_000n);
    await webhooks.next('payout.completed', payoutId);
    await call(200, 'GET', `/payouts/${payoutId}`, { key: m.key });
    await call(200, 'GET', `/payouts?customer=${customerId}`, { key: m.key });

    const heldId = await newUsdcPayout(checkedAs(m.key), customerId, '10000000', CHAIN);
    const flagged = chain.wallet(9);
    expect(flagged.address).toBe(SANDBOX_SANCTIONED_PAYER);
    await transferToken(chain, flagged, 'USDC', address, 10_000_000n);
    const failed = (await webhooks.next('payout.failed', heldId)).data['object'] as Json;
    const deposit = failed['deposit'] as Json;
    const deadline = (await chain.now()) + 3_600n;
    const { signature } = await signPayoutRefund(
      signer,
      { chain: CHAIN, verifyingContract: String(failed['deposit_address']) },
      {
        payoutId: heldId,
        token: String(failed['asset']),
        to: String(deposit['from']),
        amount: String(deposit['amount']),
        epoch: await epoch(m.id),
        deadline,
      },
    );
    const refused = await call(422, 'POST', `/payouts/${heldId}/refund_held`, {
      body: { deadline: deadline.toString(), signature },
      key: m.key,
    });
    expect((refused.body['error'] as Json | undefined)?.['code']).toBe('sender_flagged');
    await call(200, 'GET', `/payouts/${heldId}`, { key: m.key });
    await call(200, 'GET', `/customers?limit=1`, { key: m.key });

    // The chain-less test helper funds a payout through the same intake.
    const helped = await newUsdcPayout(checkedAs(m.key), customerId, '5000000', CHAIN);
    const deposited = await call(200, 'POST', `/test_helpers/customers/${customerId}/deposits`, {
      body: { chain: CHAIN, token: 'USDC', amount: '5000000' },
      key: m.key,
    });
    expect((deposited.body['payout'] as Json | null)?.['id']).toBe(helped);
    await webhooks.next('payout.completed', helped);
    // A new customer's hosted KYC page (its kyc_url), before the step.
    const pending = await call(201, 'POST', '/customers', {
      body: { name: 'Grace Payer', email: 'grace-chain@example.com' },
      key: m.key,
    });
    await call(200, 'GET', new URL(String(pending.body['kyc_url'])).pathname, { key: null });
    expect(problems).toEqual([]);
  }, 240_000);

  // Moves the chain a day on (the payer's challenge period): after the flows that sign against chain time.
  it('a DIRECT over-deposit: a stray token rescued, the excess recovered to the payer', async () => {
    const m = await onChainMerchant();
    const created = await call(201, 'POST', '/checkouts', {
      body: { amount: '100000000', currency: 'USD', accepted_chains: [CHAIN], accepted_tokens: ['USDC'] },
      key: m.key,
    });
    const paymentId = String(created.body['payment_id']);
    const deposit = String(created.body['deposit_address']);
    const payer = chain.wallet(6);
    await transferToken(chain, payer, 'DAI', deposit, parseEther('4'));
    await transferToken(chain, payer, 'USDC', deposit, 125_000_000n);
    const recoverable = await until(
      async () => (await call(200, 'GET', `/payments/${paymentId}`, { key: m.key })).body,
      (p) => p['status'] === 'recoverable' && p['non_funding_transactions_count'] === 1,
      'the over-deposit recoverable, the DAI counted',
    );
    const s = await paymentSigning(chain, m.id, recoverable);
    const dai = chain.local.addresses.stablecoins.DAI;
    const rescueTo = Wallet.createRandom().address;
    const { signature } = await signRescue(signer, s.domain, {
      paymentId: s.paymentId,
      token: dai,
      to: rescueTo,
      amount: parseEther('4'),
      epoch: s.epoch,
      deadline: s.deadline,
    });
    await call(200, 'POST', `/payments/${paymentId}/rescue`, {
      body: {
        token: `${CHAIN}/erc20:${dai}`,
        to: rescueTo,
        amount: parseEther('4').toString(),
        deadline: s.deadline.toString(),
        signature,
      },
      key: m.key,
    });
    await webhooks.next('payment.rescued', paymentId);
    await chain.increaseTime(86_401);
    await call(200, 'POST', `/payments/${paymentId}/recover`, { key: m.key });
    await webhooks.next('payment.recovered', paymentId);
    expect(problems).toEqual([]);
  }, 240_000);

  it('every webhook delivered to the on-chain merchant conforms to docs/asyncapi.yaml', async () => {
    const m = await onChainMerchant();
    await call(200, 'POST', '/settings/webhook/test', { key: m.key });
    // What the flows above sent (each is awaited by type, so none is missing when the bodies are checked).
    const expected = [
      'subscription_checkout.created',
      'subscription_checkout.completed',
      'subscription.created',
      'subscription.charge_succeeded',
      'subscription.charge_failed',
      'subscription.cancelled',
      'payment.deposit_confirmed',
      'payment.escrow_confirmed',
      'payment.settled',
      'payment.refunded',
      'payment.recoverable',
      'payment.rescued',
      'payment.recovered',
      'customer.activated',
      'payout.deposit_detected',
      'payout.forwarded',
      'payout.completed',
      'payout.failed',
    ];
    const delivered = await until(
      async () => webhooks.delivered(),
      (d) => expected.every((t) => d.some((e) => e.type === t)) && d.some((e) => 'livemode' in e),
      `webhooks of types ${expected.join(', ')} and the test delivery`,
    );
    // SPEC Events, beyond the schemas: charge webhooks carry the subscription's next nonce beside the nonce the
    // charge used (rule 4), name the subscription as data.object.id (rule 2), and by the time one arrives the charges
    // list has its row (fiat field rule 6), the row data.charge is.
    const charges = (await call(200, 'GET', `/merchants/${m.id}/charges?limit=100`, { key: m.key })).body[
      'data'
    ] as Json[];
    for (const event of delivered.filter(
      (e) => e.type.startsWith('subscription.charge_') && !('livemode' in e),
    )) {
      const object = event.data['object'] as Json;
      const charge = event.data['charge'] as Json;
      const used = event.type === 'subscription.charge_succeeded' ? 1 : 0;
      expect({
        type: event.type,
        next: Number(object['charge_nonce']) - Number(charge['charge_nonce']),
      }).toEqual({
        type: event.type,
        next: used,
      });
      expect(object['id']).toBe(charge['subscription_id']);
      expect(charges.find((c) => c['id'] === charge['id'])).toEqual(charge);
    }
    const asyncapi = WebhookConformance.fromFiles();
    for (const { headers, ...event } of delivered) {
      problems.push(...asyncapi.check(event));
      // docs/webhooks.md, The request.
      const sent = {
        'content-type': headers['content-type'],
        'user-agent': headers['user-agent'],
        'x-webhook-id': headers['x-webhook-id'],
        'webhook-id': headers['webhook-id'],
      };
      const documented = {
        'content-type': 'application/json',
        'user-agent': 'Stablepay-Webhooks/1.0',
        'x-webhook-id': event.id,
        'webhook-id': event.id,
      };
      if (JSON.stringify(sent) !== JSON.stringify(documented))
        problems.push(`webhook ${event.type} ${event.id}: headers ${JSON.stringify(sent)}`);
      if (!('livemode' in event))
        await call(200, 'GET', `/merchants/${m.id}/webhook-events/${event.id}`, { key: m.key });
    }
    expect(problems).toEqual([]);
  });

  it('webhook events the calls above recorded, and the bodies they send, conform', async () => {
    const merchant = stack.demoMerchantId;
    const events = await call(200, 'GET', `/merchants/${merchant}/webhook-events?limit=3`);
    const data = events.body['data'] as Json[];
    expect(data.length).toBeGreaterThan(0);
    for (const event of data)
      await call(200, 'GET', `/merchants/${merchant}/webhook-events/${String(event['id'])}`);
    // The demo merchant's endpoint is unreachable: its bodies are the recorded events' (`data` is exactly the
    // delivered envelope's), which covers the types the flows above gave it (cancelled checkouts and intents...).
    const expected = [
      'subscription_checkout.created',
      'subscription_checkout.cancelled',
      'payment.cancelled',
    ];
    const recorded = await until(
      async () =>
        (await call(200, 'GET', `/merchants/${merchant}/webhook-events?limit=100`)).body['data'] as Json[],
      (r) => expected.every((t) => r.some((e) => e['type'] === t)),
      `the demo merchant's events of types ${expected.join(', ')}`,
    );
    const asyncapi = WebhookConformance.fromFiles();
    for (const e of recorded)
      problems.push(
        ...asyncapi.check({
          id: e['id'],
          object: 'event',
          type: e['type'],
          created_at: e['created_at'],
          data: e['data'],
        }),
      );
    expect(problems).toEqual([]);
  });
});
