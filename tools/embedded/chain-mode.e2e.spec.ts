import { Wallet, ZeroAddress } from 'ethers';
import { register } from 'prom-client';
import { OperatorRelayers } from '@stablepay/chain-operator';
import { connectStablepayRegistry, connectTestStablecoin, toOnChainId } from '@stablepay/contracts';
import { ANVIL_DEV_PRIVATE_KEYS, localChainProvider } from '@stablepay/local-chains';
import { MerchantChainRegistrar, MerchantChainRegistration } from '@stablepay/merchants-service';
import {
  PAYMENTS_CONFIG,
  PaymentCommands,
  type PaymentsConfig,
  checkoutIds,
  depositAddressOf,
  supportedStablecoins,
} from '@stablepay/payments-service';
import { SubscriptionCheckoutCommands, SubscriptionCommands } from '@stablepay/subscriptions-service';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { ManualClock } from '@stablepay/util';
import { Client } from 'pg';
import { type EmbeddedStack, startEmbedded } from './embedded';

/**
 * A test deployment (npm start: local anvil chains with the mainnet chain ids, CHAIN_MODE=test) runs test chains
 * only. A live merchant may exist there (created by the operator, configured before go-live), but every money
 * flow answers 409 chain_mode_mismatch and changes nothing: no checkout with mainnet token addresses and a deposit
 * address of the test factory, no subscription intent, no manager deployed, no registration, no authorization.
 */
const ADMIN_TOKEN = 'admin-token-for-tests-0123456789';
const CHAIN = 'eip155:8453';
type Json = Record<string, unknown>;

describe('a live merchant on a test deployment (embedded stack, anvil)', () => {
  let db: TestDatabase;
  let stack: EmbeddedStack;
  let live: { id: string; apiKey: string };
  const signer = Wallet.createRandom();
  const pauser = Wallet.createRandom();
  const settlement = Wallet.createRandom().address;

  const api = async (method: string, path: string, key: string | null, body?: unknown) => {
    const res = await fetch(`${stack.url}${path}`, {
      method,
      headers: {
        // The payment-request surface takes the key in x-api-key, the rest as a bearer token.
        ...(key ? { authorization: `Bearer ${key}`, 'x-api-key': key } : {}),
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.status, body: (await res.json()) as Json };
  };
  const query = async (sql: string, params: unknown[]): Promise<Json[]> => {
    const client = new Client({ connectionString: db.url });
    await client.connect();
    try {
      return (await client.query(sql, params)).rows as Json[];
    } finally {
      await client.end();
    }
  };
  const mismatch = { error: { type: 'invalid_request', code: 'chain_mode_mismatch' } };
  const until = async <T>(probe: () => Promise<T | null | false>): Promise<T> => {
    for (let i = 0; i < 600; i++) {
      const value = await probe();
      if (value) return value;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error('timed out');
  };

  /** A live subscription intent as an earlier version created it (create now refuses): by the owning commands. */
  const recordLiveIntent = async (): Promise<string> => {
    const { id } = await stack.service.app.get(SubscriptionCheckoutCommands).create(
      { merchantId: live.id, mode: 'live' },
      { price: '150000', price_currency: 'ARS', supported_chains: [CHAIN] },
      {
        businessName: 'Live Co',
        hostedUrl: `${stack.url}/hosted`,
        context: {
          availableChains: [{ caip2: CHAIN, tokenSymbols: ['USDC'] }],
          quotedTokenSymbols: ['USDC'],
          settlement: { mode: 'crypto' },
        },
      },
    );
    // The public reads come from the read model: wait until the projection holds it.
    await until(async () => (await api('GET', `/subscription-checkouts/${id}`, live.apiKey)).status === 200);
    return id;
  };
  /**
   * A live payment as an earlier version created it (the create handler now refuses): by the owning commands, with
   * this deployment's factory and tokens. `key` tells one from another.
   */
  const recordLivePayment = async (key: string) => {
    const chain = stack.chains?.chains.find((c) => c.caip2 === CHAIN);
    if (!chain) throw new Error('no local chain');
    const app = stack.service.app;
    const commands = app.get(PaymentCommands);
    const owner = { merchantId: live.id, mode: 'live' as const };
    const input = { amount: '2000000', currency: 'USD', method: 'DIRECT' };
    const ids = checkoutIds(owner, input, key, commands.now());
    const depositAddress = depositAddressOf(chain.addresses.paymentFactory, live.id, ids.onChainId);
    await commands.create(owner, ids, {
      input,
      depositAddress,
      checkoutUrl: `${stack.url}/hosted/pay/${ids.checkoutId}`,
      context: {
        stablecoins: supportedStablecoins(app.get<PaymentsConfig>(PAYMENTS_CONFIG), 'test'),
        settlementMode: 'crypto',
      },
      now: commands.now(),
    });
    await until(async () => (await api('GET', `/payments/${ids.paymentId}`, live.apiKey)).status === 200);
    return { chain, ids, depositAddress };
  };

  /** A live subscription as an earlier version's subscribe recorded it (subscribes are refused now): active. */
  const recordLiveSubscription = async (subscriptionId: string): Promise<Json> => {
    const startedAt = Math.floor(Date.now() / 1000);
    await stack.service.app.get(SubscriptionCommands).run(
      subscriptionId,
      { merchantId: live.id, mode: 'live' },
      {
        type: 'RecordSubscriptionCreated',
        subscription: {
          subscriptionId,
          checkoutId: null,
          subscriber: Wallet.createRandom().address.toLowerCase(),
          externalCustomerId: null,
          chain: CHAIN,
          asset: `${CHAIN}/erc20:0x833589fcd6edb6e08f4c7c32d4f71b54bda02913`,
          tokenSymbol: 'USDC',
          tokenDecimals: 6,
          cap: '10000000',
          budget: '25000000',
          price: '150000',
          priceCurrency: 'ARS',
          periodDuration: 30 * 24 * 3600,
          startedAt: String(startedAt),
          txHash: `0x${'e2'.repeat(31)}${subscriptionId.slice(2, 4)}`,
          createdAt: new Date(startedAt * 1000).toISOString(),
        },
        firstCharge: null,
        writtenBy: 'api',
      },
    );
    const read = await until(async () => {
      const r = await api('GET', `/subscriptions/${subscriptionId}`, live.apiKey);
      return r.status === 200 ? r.body : null;
    });
    expect(read['status']).toBe('active');
    return read;
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    stack = await startEmbedded({
      env: {
        DATABASE_URL: db.url,
        PORT: '0',
        ADMIN_TOKEN,
        LOG_LEVEL: 'error',
        STABLEPAY_LOCAL_CHAINS: 'true',
        LOCAL_CHAIN_IDS: '8453',
      },
      dataDir: 'memory',
      clock: new ManualClock(new Date()),
      seedDemoMerchant: true,
    });
    const created = await api('POST', '/admin/merchants', ADMIN_TOKEN, { name: 'Live Co', mode: 'live' });
    expect(created.status).toBe(201);
    live = { id: String(created.body['id']), apiKey: String(created.body['api_key']) };
    // Configuring before go-live is allowed: a signer, a settlement address and a pauser.
    expect(
      (
        await api('POST', '/settings', live.apiKey, {
          merchant_signer: signer.address,
          settlement_address: settlement,
        })
      ).status,
    ).toBe(200);
    const declaration = await api('GET', '/settings/pauser', live.apiKey);
    const declared = await api('POST', '/settings/pauser', live.apiKey, {
      merchant_pauser: pauser.address,
      signature: await pauser.signMessage(String(declaration.body['declaration_message'])),
    });
    expect(declared.status).toBe(200);
  }, 120_000);

  afterAll(async () => {
    await stack?.stop();
    await db?.drop();
  });

  it('refuses a live checkout with 409 chain_mode_mismatch and records no payment', async () => {
    const res = await api('POST', '/checkouts', live.apiKey, { amount: '1000000', currency: 'USD' });
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject(mismatch);
    const payments = await api('GET', '/payments', live.apiKey);
    expect(payments.body['data']).toEqual([]);
  });

  it('refuses a live payment request with 409 chain_mode_mismatch', async () => {
    const res = await api('POST', '/payment-requests/payments/new', live.apiKey, {
      amount: '1000000',
      currency: 'USD',
    });
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject(mismatch);
    expect((await api('GET', '/payments', live.apiKey)).body['data']).toEqual([]);
  });

  it('refuses a live subscription checkout with 409 chain_mode_mismatch and records no intent', async () => {
    const res = await api('POST', '/subscription-checkouts', live.apiKey, {
      price: '150000',
      price_currency: 'ARS',
    });
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject(mismatch);
    expect((await api('GET', '/subscription-checkouts', live.apiKey)).body['data']).toEqual([]);
  });

  it('refuses the public subscribe of a live intent recorded before create refused it: nothing deployed, registered or signed', async () => {
    const usdc = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';
    const id = await recordLiveIntent();
    const res = await api('POST', `/subscription-checkouts/${id}/subscribe`, null, {
      chain: CHAIN,
      asset: `${CHAIN}/erc20:${usdc}`,
      subscriber: Wallet.createRandom().address,
    });
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject(mismatch);
    expect(
      await query('SELECT address FROM subscription_managers WHERE merchant_id = $1', [live.id]),
    ).toEqual([]);
    const chain = stack.chains?.chains.find((c) => c.caip2 === CHAIN);
    if (!chain) throw new Error('no local chain');
    const registry = connectStablepayRegistry(
      chain.addresses.registry,
      localChainProvider(chain.rpcUrl, chain.chainId),
    );
    expect((await registry.merchant(toOnChainId(live.id))).signer as string).toBe(ZeroAddress);
    // The intent offers nothing on chains this deployment does not run.
    const read = await api('GET', `/subscription-checkouts/${id}`, live.apiKey);
    expect(read.status).toBe(200);
    expect(read.body['subscription_options']).toEqual([]);
  });

  it('a live payment recorded before checkouts were refused: configure answers 409, and its funded deposit is held, not deployed', async () => {
    const app = stack.service.app;
    const { chain, ids, depositAddress } = await recordLivePayment('created-before-the-refusal');
    const payment = async () => (await api('GET', `/payments/${ids.paymentId}`, live.apiKey)).body;

    const configured = await api(
      'POST',
      `/payment-requests/payments/configure/${ids.paymentId}`,
      live.apiKey,
      {
        chain: CHAIN,
        token: 'USDC',
      },
    );
    expect(configured.status).toBe(409);
    expect(configured.body).toMatchObject(mismatch);
    expect(await payment()).toMatchObject({ status: 'pending', detected_chain: null });

    // Registered on this chain as an earlier version's subscribe did for such a merchant: the registry check alone
    // would then let the deploy through.
    const relayer = app.get(OperatorRelayers).require().for(CHAIN);
    const registered = await new MerchantChainRegistrar(
      { for: () => relayer },
      chain.addresses.registry,
    ).register({ chain: CHAIN, onChainId: toOnChainId(live.id), signer: signer.address, settlement });
    expect(registered.kind).toBe('registered');

    const provider = localChainProvider(chain.rpcUrl, chain.chainId);
    const payer = new Wallet(ANVIL_DEV_PRIVATE_KEYS[4] ?? '', provider);
    const usdc = connectTestStablecoin(chain.addresses.stablecoins.USDC, payer);
    await (await usdc.mint(payer.address, 2_000_000n)).wait();
    await (await usdc.transfer(depositAddress, 2_000_000n)).wait();

    // Either outcome ends the wait: held (the fix) or deployed (what an earlier version did).
    const outcome = await until(async () => {
      const p = await payment();
      return p['deploy_hold_reason'] || p['deploy_tx_hash'] ? p : null;
    });
    expect(outcome).toMatchObject({ deploy_hold_reason: 'chain_mode_mismatch', deploy_tx_hash: null });
    expect(await provider.getCode(depositAddress)).toBe('0x');
    expect(await usdc.balanceOf(depositAddress)).toBe(2_000_000n);
    const skips = (await register.getSingleMetric('stablepay_payment_deposit_chain_mode_skips_total')?.get())
      ?.values;
    expect(skips).toContainEqual(
      expect.objectContaining({ labels: { chain: CHAIN, step: 'deploy' }, value: 1 }),
    );
    // The payments service's actions refuse it too (not just "not deployed").
    const recover = await api('POST', `/payments/${ids.paymentId}/recover`, live.apiKey, {});
    expect(recover.status).toBe(409);
    expect(recover.body).toMatchObject(mismatch);
    // The hosted page does not tell its customer the held funds are being confirmed.
    const hosted = await api('GET', `/hosted/pay/${ids.checkoutId}/status`, null);
    expect(hosted.body).toMatchObject({
      status: 'unavailable',
      payment_status: 'pending',
      deposit_address: null,
    });
  }, 120_000);

  it('the hosted pay page of a live payment recorded before checkouts were refused offers no deposit address', async () => {
    const { ids, depositAddress } = await recordLivePayment('hosted-page-before-the-refusal');
    const status = await api('GET', `/hosted/pay/${ids.checkoutId}/status`, null);
    expect(status.status).toBe(200);
    expect(status.body).toMatchObject({
      status: 'unavailable',
      payment_status: 'pending',
      deposit_address: null,
      accepted_assets: [],
      selected_asset: null,
    });
    const page = await fetch(`${stack.url}/hosted/pay/${ids.checkoutId}`);
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain('data-status="unavailable"');
    expect(html).toContain('This payment cannot be paid here');
    expect(html.toLowerCase()).not.toContain(depositAddress.slice(2).toLowerCase());
    expect(html).not.toContain('data-testid="qr"');
    expect(html).not.toContain('pay-data');
  }, 60_000);

  it("the merchant's checkout of a live payment recorded before checkouts were refused withholds its deposit address and says why", async () => {
    const { ids, depositAddress } = await recordLivePayment('checkout-api-before-the-refusal');
    const withheld = { id: ids.checkoutId, deposit_address: null, unavailable_reason: 'chain_mode_mismatch' };
    const one = await api('GET', `/checkouts/${ids.checkoutId}`, live.apiKey);
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject(withheld);
    const listed = await api('GET', '/checkouts?limit=100', live.apiKey);
    expect((listed.body['data'] as Json[]).find((c) => c['id'] === ids.checkoutId)).toMatchObject(withheld);
    expect(JSON.stringify(listed.body).toLowerCase()).not.toContain(depositAddress.slice(2).toLowerCase());
    // The payment is the merchant's record of where anything sent is held: it keeps the address.
    const payment = await api('GET', `/payments/${ids.paymentId}`, live.apiKey);
    expect(String(payment.body['deposit_address']).toLowerCase()).toBe(depositAddress.toLowerCase());
  }, 60_000);

  it('the payment-request surface shows a live payment recorded before checkouts were refused as its checkout does: no deposit address, and why', async () => {
    const { ids, depositAddress } = await recordLivePayment('payment-request-before-the-refusal');
    const got = await api('GET', `/payment-requests/payments/${ids.paymentId}`, live.apiKey);
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({
      object: 'payment_request',
      id: ids.paymentId,
      deposit_address: null,
      unavailable_reason: 'chain_mode_mismatch',
    });
    // The nested payment is the record of where anything sent is held, as GET /payments/:id: it keeps the address.
    const { payment, ...request } = got.body;
    expect(JSON.stringify(request).toLowerCase()).not.toContain(depositAddress.slice(2).toLowerCase());
    expect(String((payment as Json)['deposit_address']).toLowerCase()).toBe(depositAddress.toLowerCase());
    // The status a client polls says why too, instead of a pending that nothing on this deployment can pay.
    const status = await api('GET', `/payment-requests/payments/${ids.paymentId}/status`, live.apiKey);
    expect(status.status).toBe(200);
    expect(status.body).toMatchObject({
      object: 'payment_request_status',
      status: 'pending',
      unavailable_reason: 'chain_mode_mismatch',
    });
  }, 60_000);

  it('the hosted subscribe page of a live intent recorded before create refused it offers no subscribe', async () => {
    const id = await recordLiveIntent();
    const page = await fetch(`${stack.url}/hosted/subscribe/${id}`);
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain('data-status="unavailable"');
    expect(html).toContain('This subscription cannot be set up here');
    expect(html).not.toContain('subscribe-data');
    expect(html).not.toContain('data-testid="continue"');
  }, 60_000);

  it('the hosted cancel page of a live subscription offers no wallet cancel, even with a manager recorded for its chain id', async () => {
    const subscriptionId = `0x${'c7'.repeat(32)}`;
    await recordLiveSubscription(subscriptionId);
    // A manager recorded for the live merchant under this chain id (the local chains reuse the mainnet ids).
    const manager = Wallet.createRandom().address.toLowerCase();
    await query(
      `INSERT INTO subscription_managers (merchant_id, chain, address, mode, merchant_pauser, deployed_at)
       VALUES ($1, $2, $3, 'live', $4, now()) ON CONFLICT DO NOTHING`,
      [live.id, CHAIN, manager, pauser.address.toLowerCase()],
    );
    const page = await fetch(`${stack.url}/hosted/cancel/${subscriptionId}`);
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain('data-status="unavailable"');
    expect(html).toContain('This subscription cannot be cancelled here');
    expect(html).not.toContain('cancel-data');
    expect(html).not.toContain('data-testid="cancel"');
    expect(html.toLowerCase()).not.toContain(manager.slice(2));
    expect(page.headers.get('content-security-policy')).not.toContain('sha256-');
  }, 60_000);

  it('merchant cancel of a live subscription answers 409 chain_mode_mismatch before judging its deadline', async () => {
    const subscriptionId = `0x${'c1'.repeat(32)}`;
    const read = await recordLiveSubscription(subscriptionId);
    // A deadline long past: the chain-time check would answer 422 signature_expired.
    const cancel = await api('POST', `/subscriptions/${subscriptionId}/cancel`, live.apiKey, {
      nonce: read['charge_nonce'],
      deadline: 1,
      signature: `0x${'ab'.repeat(65)}`,
    });
    expect(cancel.status).toBe(409);
    expect(cancel.body).toMatchObject(mismatch);
    // Another merchant's key still gets 404 first.
    const foreign = await api('POST', `/subscriptions/${subscriptionId}/cancel`, stack.demoApiKey, {
      nonce: read['charge_nonce'],
      deadline: 1,
      signature: `0x${'ab'.repeat(65)}`,
    });
    expect(foreign.status).toBe(404);
  }, 60_000);

  it('a charge of a live subscription answers 409 chain_mode_mismatch, not 503 for the manager it has none of here', async () => {
    const subscriptionId = `0x${'d1'.repeat(32)}`;
    const read = await recordLiveSubscription(subscriptionId);
    const body = {
      amount: '1000000',
      nonce: read['charge_nonce'],
      deadline: Math.floor(Date.now() / 1000) + 3600,
      signature: `0x${'ab'.repeat(65)}`,
    };
    const charge = await api('POST', `/subscriptions/${subscriptionId}/charge`, live.apiKey, body);
    expect(charge.status).toBe(409);
    expect(charge.body).toMatchObject(mismatch);
    // Another merchant's key still gets 404 first.
    const foreign = await api('POST', `/subscriptions/${subscriptionId}/charge`, stack.demoApiKey, body);
    expect(foreign.status).toBe(404);
  }, 60_000);

  it("settings say the live merchant's signer is not registered on this deployment's chains", async () => {
    const settings = await api('GET', '/settings', live.apiKey);
    expect(settings.body['chain_registrations']).toEqual([]);
    const signers = settings.body['signers'] as Json[];
    expect(signers.length).toBeGreaterThan(0);
    for (const s of signers)
      expect(s).toMatchObject({ address: signer.address, status: 'chain_mode_mismatch' });
  });

  it('the registration worker skips the live merchant and says so (outcome chain_mode_mismatch)', async () => {
    await stack.service.app.get(MerchantChainRegistration).caughtUp();
    const outcomes = (await register.getSingleMetric('stablepay_merchant_chain_registrations_total')?.get())
      ?.values;
    expect(outcomes).toContainEqual(
      expect.objectContaining({ labels: { chain: CHAIN, outcome: 'chain_mode_mismatch' } }),
    );
  });

  it('a test merchant on the same deployment still takes checkouts, subscription checkouts and subscribes', async () => {
    // Both create surfaces hand out the deposit address of a payment this deployment takes.
    for (const path of ['/checkouts', '/payment-requests/payments/new']) {
      const created = await api('POST', path, stack.demoApiKey, { amount: '1000000', currency: 'USD' });
      expect(created.status).toBe(201);
      expect(created.body).toMatchObject({
        deposit_address: expect.stringMatching(/^0x/),
        unavailable_reason: null,
      });
      if (path !== '/checkouts') {
        const status = `/payment-requests/payments/${String(created.body['id'])}/status`;
        expect((await api('GET', status, stack.demoApiKey)).body).toMatchObject({ unavailable_reason: null });
      }
    }
    const intent = await api('POST', '/subscription-checkouts', stack.demoApiKey, {
      price: '150000',
      price_currency: 'ARS',
      supported_chains: [CHAIN],
    });
    expect(intent.status).toBe(201);
    const usdc = (intent.body['subscription_options'] as Json[]).find((o) => o['token_symbol'] === 'USDC');
    const auth = await api('POST', `/subscription-checkouts/${String(intent.body['id'])}/subscribe`, null, {
      chain: CHAIN,
      asset: usdc?.['asset'],
      subscriber: Wallet.createRandom().address,
    });
    expect(auth.status).toBe(200);
    expect(auth.body).toMatchObject({ object: 'subscribe_authorization' });
    const settings = await api('GET', '/settings', stack.demoApiKey);
    for (const s of settings.body['signers'] as Json[]) expect(s['status']).toBe('registered');
  }, 60_000);
});
