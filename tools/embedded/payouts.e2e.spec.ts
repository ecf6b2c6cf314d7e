import { EVENT_STORE } from '@stablepay/aggregate';
import type { EventStore } from '@stablepay/event-store';
import { SANDBOX_SANCTIONED_PAYER } from '@stablepay/evm';
import { DepositIntake, PayoutsAggregates, PayoutsReader } from '@stablepay/payouts-service';
import type { TestDatabase } from '@stablepay/testing';
import type { EmbeddedStack } from './embedded';
import { type Api, createMerchant, type Json, stackApi, until } from './test-support/http';
import { SignedWebhookReceiver } from './test-support/signed-webhooks';
import { startStackWithoutChains } from './test-support/stack';

/**
 * Payouts (beta) end to end over HTTP on the embedded stack (docs/payouts.md): the beta gate, customers through the
 * sandbox KYC page, beneficiaries, payouts funded through the deposit test helper and carried by the sandbox off-ramp
 * to completed, failed and refunded, each transition a signed webhook whose data.object is the object as of it.
 */
const ADMIN = 'payouts-admin-token-0123456789-0123456789';
const BASE = 'eip155:8453';
const IBAN_OK = 'DE89370400440532013000';
/** Sandbox off-ramp magic (docs/payouts.md): a US account ending 0002 fails the bank transfer, 0003 is rejected. */
const US_ACCOUNT = (last4: string) => ({
  holder_name: 'Ada Lovelace',
  country: 'US',
  currency: 'USD',
  account_number: `00012345${last4}`,
  routing_number: '110000000',
});

describe('payouts (beta): customers, KYC, beneficiaries and payouts end to end', () => {
  let stack: EmbeddedStack;
  let db: TestDatabase;
  let stop: () => Promise<void>;
  let api: Api;
  const webhooks = new SignedWebhookReceiver();
  let other: { id: string; apiKey: string };

  const admin = async (path: string, body: unknown) => {
    const res = await fetch(`${stack.url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Json };
  };
  /** The customer's hosted KYC step, completed as the customer's browser does (a form post, then the page). */
  const completeKyc = async (kycUrl: string) => {
    const res = await fetch(kycUrl, { method: 'POST', redirect: 'manual', body: '' });
    expect(res.status).toBe(303);
    return fetch(kycUrl).then(async (page) => ({ status: page.status, html: await page.text() }));
  };
  const newCustomer = async (name = 'Ada Lovelace', email = 'ada@example.com') => {
    const res = await api('POST', '/customers', { name, email, metadata: { ref: 'c-1' } });
    expect(res.status).toBe(201);
    return res.body;
  };
  const activeCustomer = async (name?: string) => {
    const customer = await newCustomer(name);
    await completeKyc(String(customer['kyc_url']));
    const after = await api('GET', `/customers/${String(customer['id'])}`);
    expect(after.body['status']).toBe('active');
    return after.body;
  };
  const newBeneficiary = async (
    body: Json = { holder_name: 'Ada', country: 'DE', currency: 'EUR', iban: IBAN_OK },
  ) => {
    const res = await api('POST', '/beneficiaries', body);
    expect(res.status).toBe(201);
    return res.body;
  };
  const fundedPayout = async (beneficiary: Json, options: { amount?: string; from?: string } = {}) => {
    const customer = await activeCustomer();
    const amount = options.amount ?? '25000000';
    const created = await api('POST', '/payouts', {
      customer: customer['id'],
      beneficiary: beneficiary['id'],
      amount,
      chain: BASE,
      token: 'USDC',
    });
    expect(created.status).toBe(201);
    const deposit = await api('POST', `/test_helpers/customers/${String(customer['id'])}/deposits`, {
      chain: BASE,
      token: 'USDC',
      amount,
      ...(options.from ? { from: options.from } : {}),
    });
    expect(deposit.status).toBe(200);
    return { customer, payout: created.body, deposit: deposit.body };
  };

  beforeAll(async () => {
    await webhooks.start();
    ({ stack, db, stop } = await startStackWithoutChains({
      ADMIN_TOKEN: ADMIN,
      ALLOW_LOCAL_WEBHOOKS: 'true',
      WEBHOOK_POLL_INTERVAL_MS: '50',
    }));
    void db;
    api = stackApi(() => stack);
    const settings = await api('PATCH', '/settings', { webhook_url: webhooks.url });
    expect(settings.status).toBe(200);
    webhooks.secret = String(settings.body['webhook_secret']);
    other = await createMerchant(stack, ADMIN, 'Other Merchant');
    expect((await admin(`/admin/merchants/${other.id}/beta-features`, { payouts: true })).status).toBe(200);
  });

  afterAll(async () => {
    await stop?.();
    await webhooks.stop();
  });

  describe('beta gate', () => {
    it('a merchant without the payouts beta gets 403 beta_feature_not_enabled on every payouts route', async () => {
      const merchant = await createMerchant(stack, ADMIN, 'Not In Beta');
      for (const [method, path] of [
        ['GET', '/customers'],
        ['POST', '/customers'],
        ['GET', '/beneficiaries'],
        ['POST', '/payouts'],
        ['GET', '/payouts/po_00000000000000000000000000'],
      ] as const) {
        const res = await api(method, path, method === 'POST' ? {} : undefined, merchant.apiKey);
        expect([path, res.status, (res.body['error'] as Json)['code']]).toEqual([
          path,
          403,
          'beta_feature_not_enabled',
        ]);
      }
    });

    it('the operator enables it per merchant; unknown features are refused; no API key is still 401', async () => {
      const merchant = await createMerchant(stack, ADMIN, 'Joins Beta');
      const refused = await admin(`/admin/merchants/${merchant.id}/beta-features`, { payoutz: true });
      expect([refused.status, (refused.body['error'] as Json)['code']]).toEqual([400, 'unknown_parameter']);
      const unknown = await admin('/admin/merchants/mer_00000000000000000000000000/beta-features', {
        payouts: true,
      });
      expect(unknown.status).toBe(404);
      const enabled = await admin(`/admin/merchants/${merchant.id}/beta-features`, { payouts: true });
      expect(enabled).toEqual({
        status: 200,
        body: { object: 'merchant_beta_features', merchant: merchant.id, payouts: true },
      });
      expect((await api('GET', '/customers', undefined, merchant.apiKey)).status).toBe(200);
      expect((await api('GET', '/customers', undefined, null)).status).toBe(401);
    });

    it('a live-mode merchant is refused customers and payouts while only the sandbox providers are plugged in', async () => {
      const created = await admin('/admin/merchants', {
        name: 'Live Beta',
        mode: 'live',
        settlement_mode: 'crypto',
      });
      expect(created.status).toBe(201);
      const live = { id: String(created.body['id']), apiKey: String(created.body['api_key']) };
      expect((await admin(`/admin/merchants/${live.id}/beta-features`, { payouts: true })).status).toBe(200);
      for (const [path, body] of [
        ['/customers', { name: 'Ana Live', email: 'ana@example.com' }],
        [
          '/payouts',
          { customer: 'cus_00000000000000000000000000', beneficiary: 'bnf_00000000000000000000000000' },
        ],
      ] as const) {
        const res = await api('POST', path, body, live.apiKey);
        expect([path, res.status, (res.body['error'] as Json)['code']]).toEqual([
          path,
          403,
          'live_payouts_unavailable',
        ]);
      }
      // Nothing was recorded, and the read side still answers.
      expect((await api('GET', '/customers', undefined, live.apiKey)).body['data']).toEqual([]);
    });
  });

  describe('customers and the sandbox KYC', () => {
    it('a customer starts kyc_pending with a kyc_url and one EVM deposit address for every chain', async () => {
      const customer = await newCustomer();
      expect(customer).toMatchObject({
        object: 'customer',
        type: 'individual',
        status: 'kyc_pending',
        metadata: { ref: 'c-1' },
      });
      expect(String(customer['id'])).toMatch(/^cus_[0-9a-z]{26}$/);
      expect(String(customer['kyc_url'])).toMatch(new RegExp(`^${stack.url}/hosted/kyc/kycs_[0-9a-z]{26}$`));
      const [deposit, ...more] = customer['deposit_addresses'] as Json[];
      expect(more).toEqual([]);
      expect(String(deposit?.['address'])).toMatch(/^0x[0-9a-fA-F]{40}$/);
      expect(deposit?.['chains']).toEqual(expect.arrayContaining(['Base', 'Polygon']));
      expect(deposit?.['tokens']).toEqual(['USDC', 'USDT']);
      const page = await fetch(String(customer['kyc_url']));
      expect(page.status).toBe(200);
      expect(await page.text()).toContain('data-testid="complete-kyc"');
    });

    it('completing the hosted KYC activates the customer: customer.activated, signed, with the active customer', async () => {
      const customer = await newCustomer();
      const page = await completeKyc(String(customer['kyc_url']));
      expect(page.html).toContain('Your identity is verified');
      const hook = await webhooks.next('customer.activated', String(customer['id']));
      expect(hook.data['object']).toMatchObject({ id: customer['id'], status: 'active', kyc_url: null });
      // The link was single-use: posting it again changes nothing.
      await completeKyc(String(customer['kyc_url']));
      expect((await api('GET', `/customers/${String(customer['id'])}`)).body['status']).toBe('active');
    });

    it('action_required (sandbox magic) issues a fresh kyc_url; the fresh one activates the customer', async () => {
      const customer = await newCustomer('Grace action_required Hopper');
      await completeKyc(String(customer['kyc_url']));
      const hook = await webhooks.next('customer.action_required', String(customer['id']));
      const object = hook.data['object'] as Json;
      expect(object).toMatchObject({ status: 'action_required', status_reason: 'document_unreadable' });
      expect(object['kyc_url']).not.toEqual(customer['kyc_url']);
      // The old link records nothing more; its page says more information is needed.
      const old = await completeKyc(String(customer['kyc_url']));
      expect(old.html).toContain('We need more information');
      await completeKyc(String(object['kyc_url']));
      await webhooks.next('customer.activated', String(customer['id']));
    });

    it('POST /customers/:id/kyc_links issues a fresh kyc_url (the old one then records nothing); the fresh one activates', async () => {
      const customer = await newCustomer();
      const id = String(customer['id']);
      const issue = (key?: string) =>
        fetch(`${stack.url}/customers/${id}/kyc_links`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${stack.demoApiKey}`,
            ...(key ? { 'idempotency-key': key } : {}),
          },
        }).then(async (r) => ({ status: r.status, body: (await r.json()) as Json }));
      const fresh = await issue('kyc-link-1');
      expect(fresh.status).toBe(201);
      expect(fresh.body).toMatchObject({ id, object: 'customer', status: 'kyc_pending' });
      expect(fresh.body['kyc_url']).toMatch(new RegExp(`^${stack.url}/hosted/kyc/kycs_[0-9a-z]{26}$`));
      expect(fresh.body['kyc_url']).not.toEqual(customer['kyc_url']);
      expect(Date.parse(String(fresh.body['kyc_url_expires_at']))).toBeGreaterThanOrEqual(
        Date.parse(String(customer['kyc_url_expires_at'])),
      );
      // A retried request answers the same link; GET shows it.
      expect((await issue('kyc-link-1')).body['kyc_url']).toBe(fresh.body['kyc_url']);
      expect((await api('GET', `/customers/${id}`)).body['kyc_url']).toBe(fresh.body['kyc_url']);
      // The replaced link records nothing; the fresh one completes KYC.
      await completeKyc(String(customer['kyc_url']));
      expect((await api('GET', `/customers/${id}`)).body['status']).toBe('kyc_pending');
      await completeKyc(String(fresh.body['kyc_url']));
      await webhooks.next('customer.activated', id);
      // An active customer has no KYC step left: 409 kyc_not_required, nothing changes.
      const refused = await issue();
      expect([refused.status, (refused.body['error'] as Json)['code']]).toEqual([409, 'kyc_not_required']);
      expect((await api('GET', `/customers/${id}`)).body).toMatchObject({ status: 'active', kyc_url: null });
      // Another merchant's customer, or a malformed id, is 404.
      const foreign = await api('POST', `/customers/${id}/kyc_links`, undefined, other.apiKey);
      expect(foreign.status).toBe(404);
      expect((await api('POST', '/customers/cus_nope/kyc_links')).status).toBe(404);
    });

    it('kyc_failed (sandbox magic) ends as kyc_failed with customer.kyc_failed', async () => {
      const customer = await newCustomer('Mallory', 'mallory+kyc_failed@example.com');
      await completeKyc(String(customer['kyc_url']));
      const hook = await webhooks.next('customer.kyc_failed', String(customer['id']));
      expect(hook.data['object']).toMatchObject({
        status: 'kyc_failed',
        status_reason: 'identity_not_verified',
      });
    });

    it('suspended (sandbox magic): activated, then suspended by the provider monitoring', async () => {
      const customer = await newCustomer('Eve suspended');
      await completeKyc(String(customer['kyc_url']));
      await until(
        () => api('GET', `/customers/${String(customer['id'])}`),
        (r) => r.body['status'] === 'suspended',
        'customer suspended',
      );
    });

    it('bad input is 400 naming the field and creates nothing; unknown fields are refused', async () => {
      const before = (await api('GET', '/customers?limit=100')).body['data'] as Json[];
      const bad = await api('POST', '/customers', { name: 'Ada' });
      expect([bad.status, (bad.body['error'] as Json)['param']]).toEqual([400, 'email']);
      const unknown = await api('POST', '/customers', { name: 'Ada', email: 'a@b.co', plan: 'x' });
      expect(unknown.status).toBe(400);
      expect((await api('GET', '/customers?limit=100')).body['data']).toHaveLength(before.length);
    });

    it('an Idempotency-Key retried answers the same customer', async () => {
      const send = () =>
        fetch(`${stack.url}/customers`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${stack.demoApiKey}`,
            'content-type': 'application/json',
            'idempotency-key': 'payouts-customer-key-1',
          },
          body: JSON.stringify({ name: 'Idem', email: 'idem@example.com' }),
        }).then(async (r) => (await r.json()) as Json);
      const first = await send();
      expect((await send())['id']).toBe(first['id']);
    });

    it("another merchant's customer is 404, and lists are the merchant's own, newest first, filtered", async () => {
      const customer = await newCustomer('Own', 'own@example.com');
      const res = await api('GET', `/customers/${String(customer['id'])}`, undefined, other.apiKey);
      expect([res.status, (res.body['error'] as Json)['code']]).toEqual([404, 'resource_missing']);
      expect((await api('GET', '/customers', undefined, other.apiKey)).body['data']).toEqual([]);
      const mine = await api('GET', '/customers?email=own@example.com');
      expect((mine.body['data'] as Json[]).map((c) => c['id'])).toEqual([customer['id']]);
      const page = await api('GET', '/customers?limit=1');
      expect(page.body).toMatchObject({ object: 'list', has_more: true });
      expect(((page.body['data'] as Json[])[0] ?? {})['id']).toBe(customer['id']);
      expect((await api('GET', '/customers?status=nope')).status).toBe(400);
      expect((await api('GET', '/customers?colour=red')).status).toBe(400);
    });
  });

  describe('beneficiaries', () => {
    it('an IBAN beneficiary is shown with its last four characters only, on create, GET and list', async () => {
      const created = await newBeneficiary();
      expect(created).toMatchObject({
        object: 'beneficiary',
        currency: 'EUR',
        bank_account: { type: 'iban', last4: '3000', bic: null },
      });
      const got = await api('GET', `/beneficiaries/${String(created['id'])}`);
      const listed = await api('GET', '/beneficiaries');
      for (const body of [created, got.body, listed.body])
        expect(JSON.stringify(body)).not.toContain(IBAN_OK);
      expect(
        (await api('GET', `/beneficiaries/${String(created['id'])}`, undefined, other.apiKey)).status,
      ).toBe(404);
    });

    it.each([
      ['an IBAN', { holder_name: 'Ada', country: 'DE', currency: 'EUR', iban: IBAN_OK }, IBAN_OK],
      ['a US account', US_ACCOUNT('4321'), '000123454321'],
    ])(
      'the creation fact of %s keeps last4 and a keyed fingerprint, never the number (sealed in the vault)',
      async (_kind, body, number) => {
        const created = await newBeneficiary(body);
        const store = stack.service.app.get<symbol, EventStore>(EVENT_STORE);
        const events = await store.readStream(`beneficiary-${String(created['id'])}`);
        expect(events.map((e) => e.type)).toEqual(['BeneficiaryCreated.v2']);
        expect((events[0]?.data as Json)['account']).toMatchObject({
          last4: number.slice(-4),
          fingerprint: expect.stringMatching(/^[0-9a-f]{32}$/),
        });
        expect(JSON.stringify(events.map((e) => [e.data, e.metadata]))).not.toContain(number);
        // The same account again: the same fingerprint (the key is the deployment's sealing key).
        const again = await newBeneficiary(body);
        const [second] = await store.readStream(`beneficiary-${String(again['id'])}`);
        expect((second?.data as Json)['account']).toEqual((events[0]?.data as Json)['account']);
      },
    );

    it('a bad IBAN or routing number is 400 naming the field', async () => {
      const iban = await api('POST', '/beneficiaries', {
        holder_name: 'A',
        country: 'DE',
        currency: 'EUR',
        iban: 'DE00370400440532013000',
      });
      expect([iban.status, (iban.body['error'] as Json)['param']]).toEqual([400, 'iban']);
      const aba = await api('POST', '/beneficiaries', { ...US_ACCOUNT('6789'), routing_number: '123456789' });
      expect([aba.status, (aba.body['error'] as Json)['param']]).toEqual([400, 'routing_number']);
    });
  });

  describe('payouts', () => {
    it('a payout for a customer that is not active is 422 customer_not_active and creates nothing', async () => {
      const customer = await newCustomer('Pending');
      const beneficiary = await newBeneficiary();
      const res = await api('POST', '/payouts', {
        customer: customer['id'],
        beneficiary: beneficiary['id'],
        amount: '1000000',
        chain: BASE,
        token: 'USDC',
      });
      expect([res.status, res.body['error']]).toEqual([
        422,
        expect.objectContaining({ type: 'cannot_process', code: 'customer_not_active', param: 'customer' }),
      ]);
      expect((await api('GET', `/payouts?customer=${String(customer['id'])}`)).body['data']).toEqual([]);
    });

    it("another merchant's customer or beneficiary is 404 naming the field", async () => {
      const customer = await activeCustomer();
      const beneficiary = await newBeneficiary();
      const res = await api(
        'POST',
        '/payouts',
        { customer: customer['id'], beneficiary: beneficiary['id'], amount: '1', chain: BASE, token: 'USDC' },
        other.apiKey,
      );
      expect([res.status, (res.body['error'] as Json)['param']]).toEqual([404, 'customer']);
    });

    it('deposit -> forwarded -> completed, each a signed webhook; GET shows the fiat amount', async () => {
      const beneficiary = await newBeneficiary(US_ACCOUNT('6789'));
      const { customer, payout, deposit } = await fundedPayout(beneficiary);
      expect(payout).toMatchObject({
        object: 'payout',
        status: 'awaiting_deposit',
        amount: '25000000',
        currency: 'USD',
        token: 'USDC',
        chain: BASE,
        deposit_address: (customer['deposit_addresses'] as Json[])[0]?.['address'],
      });
      expect(deposit['payout']).toMatchObject({ id: payout['id'], status: 'deposit_detected' });
      const id = String(payout['id']);
      expect((await webhooks.next('payout.deposit_detected', id)).data['object']).toMatchObject({
        status: 'deposit_detected',
      });
      expect((await webhooks.next('payout.forwarded', id)).data['object']).toMatchObject({
        status: 'forwarded',
      });
      const completed = await webhooks.next('payout.completed', id);
      expect(completed.data['object']).toMatchObject({ status: 'completed', fiat_amount: '2500' });
      expect((await api('GET', `/payouts/${id}`)).body).toMatchObject({
        status: 'completed',
        fiat_amount: '2500',
      });
      expect(
        (
          (await api('GET', `/payouts?status=completed&customer=${String(customer['id'])}`)).body[
            'data'
          ] as Json[]
        ).map((p) => p['id']),
      ).toEqual([id]);
    });

    it.each([
      ['0002', 'rampoff_withdraw_failed'],
      ['0003', 'provider_rejected'],
    ])(
      'a beneficiary account ending %s fails the payout with %s, then it is refunded to the sender',
      async (last4, reason) => {
        const beneficiary = await newBeneficiary(US_ACCOUNT(last4));
        const { payout } = await fundedPayout(beneficiary);
        const id = String(payout['id']);
        const failed = await webhooks.next('payout.failed', id);
        expect(failed.data['object']).toMatchObject({ status: 'failed', failure_reason: reason });
        const refunded = await webhooks.next('payout.refunded', id);
        expect(refunded.data['object']).toMatchObject({
          status: 'refunded',
          failure_reason: reason,
          refund: { to: '0x70997970C51812dc3A010C7d01b50e0d17dc79C8', amount: '25000000' },
        });
      },
    );

    it('an amount ending 0666 fails the sell order (rampoff_order_failed)', async () => {
      const { payout } = await fundedPayout(await newBeneficiary(US_ACCOUNT('6789')), { amount: '10000666' });
      const failed = await webhooks.next('payout.failed', String(payout['id']));
      expect(failed.data['object']).toMatchObject({ failure_reason: 'rampoff_order_failed' });
    });

    it('a deposit from a sanctioned wallet fails the payout (sender_flagged) and is not sent back', async () => {
      const { payout } = await fundedPayout(await newBeneficiary(US_ACCOUNT('6789')), {
        from: SANDBOX_SANCTIONED_PAYER,
      });
      const id = String(payout['id']);
      const failed = await webhooks.next('payout.failed', id);
      expect(failed.data['object']).toMatchObject({ failure_reason: 'sender_flagged', refund: null });
      expect(webhooks.all('payout.forwarded', id)).toEqual([]);
    });

    it('a customer suspended after its payout was created is not paid out: no deposit is taken, and one taken before the suspension showed fails customer_not_active, funds held', async () => {
      const customer = await activeCustomer();
      const beneficiary = await newBeneficiary(US_ACCOUNT('6789'));
      const created = await api('POST', '/payouts', {
        customer: customer['id'],
        beneficiary: beneficiary['id'],
        amount: '9000000',
        chain: BASE,
        token: 'USDC',
      });
      expect(created.status).toBe(201);
      const id = String(created.body['id']);
      const customerId = String(customer['id']);
      const store = stack.service.app.get<symbol, EventStore>(EVENT_STORE);
      const aggregates = stack.service.app.get(PayoutsAggregates);
      const [first] = await store.readStream(`payout-${id}`);
      const owner = { merchantId: String(first?.metadata['merchantId']), mode: 'test' as const };
      await aggregates.customer(customerId, owner, {
        type: 'SuspendCustomer',
        reason: 'compliance_review',
        now: new Date(),
      });
      await until(
        () => api('GET', `/customers/${customerId}`),
        (r) => r.body['status'] === 'suspended',
        'customer suspended',
      );
      const deposit = await api('POST', `/test_helpers/customers/${customerId}/deposits`, {
        chain: BASE,
        token: 'USDC',
        amount: '9000000',
      });
      expect(deposit.body['payout']).toBeNull();
      // A deposit recorded while the suspension was not yet in the read model: the step before the off-ramp refuses it.
      await aggregates.payout(id, owner, {
        type: 'RecordDeposit',
        txHash: `0x${'7'.repeat(64)}`,
        from: '0x2222222222222222222222222222222222222222',
        amount: '9000000',
        simulated: true,
        now: new Date(),
      });
      const failed = await webhooks.next('payout.failed', id);
      expect(failed.data['object']).toMatchObject({ failure_reason: 'customer_not_active', refund: null });
      expect(webhooks.all('payout.forwarded', id)).toEqual([]);
    });

    it('two payouts waiting for the same deposit are funded oldest first, one deposit each', async () => {
      const customer = await activeCustomer();
      const beneficiary = await newBeneficiary(US_ACCOUNT('6789'));
      const body = {
        customer: customer['id'],
        beneficiary: beneficiary['id'],
        amount: '7000000',
        chain: BASE,
        token: 'USDC',
      };
      const first = await api('POST', '/payouts', body);
      const second = await api('POST', '/payouts', body);
      const deposit = () =>
        api('POST', `/test_helpers/customers/${String(customer['id'])}/deposits`, {
          chain: BASE,
          token: 'USDC',
          amount: '7000000',
        });
      expect(((await deposit()).body['payout'] as Json)['id']).toBe(first.body['id']);
      expect(((await deposit()).body['payout'] as Json)['id']).toBe(second.body['id']);
      expect((await deposit()).body['payout']).toBeNull();
    });

    it('a deposit delivered again funds the payout it went to, never a second one; two transfers of one transaction fund two payouts', async () => {
      const customer = await activeCustomer();
      const beneficiary = await newBeneficiary(US_ACCOUNT('6789'));
      const body = {
        customer: customer['id'],
        beneficiary: beneficiary['id'],
        amount: '6000000',
        chain: BASE,
        token: 'USDC',
      };
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) ids.push(String((await api('POST', '/payouts', body)).body['id']));
      const intake = stack.service.app.get(DepositIntake);
      const reader = stack.service.app.get(PayoutsReader);
      const row = await reader.find('customer', String(customer['id']));
      if (!row) throw new Error('customer row missing');
      const observed = {
        chain: BASE,
        token: 'USDC',
        amount: '6000000',
        from: '0x2222222222222222222222222222222222222222',
        txHash: `0x${'6'.repeat(64)}`,
        logIndex: 1,
        blockHash: `0x${'b'.repeat(64)}`,
      };
      const funded = async (id: string) =>
        until(
          () => api('GET', `/payouts/${id}`),
          (r) => r.body['status'] !== 'awaiting_deposit',
          `payout ${id} funded`,
        );
      expect((await intake.record(row, observed))?.changed).toBe(true);
      await funded(ids[0] ?? '');
      // The bus delivers the same observation again once the read model shows the first payout funded.
      expect((await intake.record(row, observed))?.changed).toBe(false);
      expect((await api('GET', `/payouts/${ids[1] ?? ''}`)).body['status']).toBe('awaiting_deposit');
      // A second transfer log of the same transaction is a deposit of its own: it funds the next payout.
      expect((await intake.record(row, { ...observed, logIndex: 2 }))?.changed).toBe(true);
      await funded(ids[1] ?? '');
      expect((await api('GET', `/payouts/${ids[2] ?? ''}`)).body['status']).toBe('awaiting_deposit');
    });

    it('a deposit no payout waits for funds nothing', async () => {
      const customer = await activeCustomer();
      const res = await api('POST', `/test_helpers/customers/${String(customer['id'])}/deposits`, {
        chain: BASE,
        token: 'USDC',
        amount: '5',
      });
      expect(res.body).toEqual({ object: 'test_helpers.deposit', customer: customer['id'], payout: null });
    });
  });
});
