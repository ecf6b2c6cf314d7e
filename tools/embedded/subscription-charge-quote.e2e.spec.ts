import { randomBytes, randomUUID } from 'node:crypto';
import { keccak256, toUtf8Bytes } from 'ethers';
import { EVENT_STORE } from '@stablepay/aggregate';
import type { EventStore } from '@stablepay/event-store';
import {
  ChargeQuotes,
  RATE_SOURCE,
  SETTLEMENT_PROVIDER,
  type SettlementProvider,
} from '@stablepay/subscriptions-service';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { type EmbeddedStack, startEmbedded } from './embedded';

/**
 * POST /subscriptions/:id/charge-quote through HTTP (SPEC Subscriptions > Quote behavior). The subscription is the
 * stream the subscriptions service records from a confirmed subscribe (its facts appended here directly); rates are
 * the sandbox's (ARS/USDC 1185.50, USD/USDC 1).
 */
const ADMIN_TOKEN = 'admin-token-for-tests-0123456789';
const CHAIN = 'eip155:8453';

interface Quote {
  object: string;
  quote_code: string;
  kind: string;
  price_lock_code: string | null;
  subscription_id: string;
  amount: string;
  fiat_amount: string | null;
  fiat_currency: string | null;
  rate: string | null;
  quote_hash: string;
  expires_at: string;
  created_at: string;
}

describe('charge quote (POST /subscriptions/:id/charge-quote)', () => {
  let db: TestDatabase;
  let stack: EmbeddedStack;
  let store: EventStore;

  const newMerchant = async (name: string, settlement_mode = 'crypto') => {
    const res = await fetch(`${stack.url}/admin/merchants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name, mode: 'test', settlement_mode }),
    });
    const body = (await res.json()) as { id: string; api_key: string };
    return { id: body.id, apiKey: body.api_key };
  };
  /** A subscription as the subscribe flow records it: SubscriptionCreated.v1 then the first charge (nonce 0). */
  const subscription = async (
    owner: { id: string },
    plan: { price: string; priceCurrency: string | null },
  ) => {
    const subscriptionId = `0x${randomBytes(32).toString('hex')}`;
    const txHash = `0x${randomBytes(32).toString('hex')}`;
    const metadata = { merchantId: owner.id, mode: 'test' as const, occurredAt: new Date().toISOString() };
    await store.appendToStream(`subscription-${subscriptionId}`, [
      {
        id: randomUUID(),
        type: 'SubscriptionCreated.v1',
        metadata,
        data: {
          subscriptionId,
          checkoutId: null,
          subscriber: `0x${'1'.repeat(40)}`,
          externalCustomerId: null,
          chain: CHAIN,
          asset: `${CHAIN}/erc20:0x833589fcd6edb6e08f4c7c32d4f71b54bda02913`,
          tokenSymbol: 'USDC',
          tokenDecimals: 6,
          cap: '10000000',
          budget: '25000000',
          ...plan,
          periodDuration: 3600,
          startedAt: '1780000000',
          txHash,
          createdAt: new Date().toISOString(),
        },
      },
    ]);
    return subscriptionId;
  };
  const quote = async (who: { apiKey: string }, id: string, body?: object) => {
    const res = await fetch(`${stack.url}/subscriptions/${id}/charge-quote`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${who.apiKey}`,
        ...(body ? { 'content-type': 'application/json' } : {}),
      },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    return { status: res.status, body: (await res.json()) as Quote & { error?: Record<string, string> } };
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    stack = await startEmbedded({
      env: {
        DATABASE_URL: db.url,
        PORT: '0',
        ADMIN_TOKEN,
        LOG_LEVEL: 'error',
        STABLEPAY_LOCAL_CHAINS: 'false',
        SANDBOX_RATES: 'USD/USDC=1',
      },
      dataDir: 'memory',
    });
    store = stack.service.app.get<EventStore>(EVENT_STORE);
  });

  afterAll(async () => {
    await stack?.stop();
    await db?.drop();
  });

  it('gives a crypto-settled business a reference quote of the plan price, valid 120 s, whose hash the merchant signs', async () => {
    const merchant = await newMerchant('Crypto Co');
    const id = await subscription(merchant, { price: '150000', priceCurrency: 'ARS' });
    const { status, body } = await quote(merchant, id);
    expect(status).toBe(201);
    expect(body).toMatchObject({
      object: 'subscription_charge_quote',
      kind: 'reference_quote',
      price_lock_code: null,
      subscription_id: id,
      // 1,500.00 ARS at 1,185.50 ARS per USDC, rounded up to the token's smallest unit.
      amount: '1265289',
      fiat_amount: '150000',
      fiat_currency: 'ARS',
      rate: '1185.50',
    });
    expect(body.quote_code).toMatch(/^refq_[0-9a-f]{24}$/);
    expect(body.quote_hash).toBe(keccak256(toUtf8Bytes(body.quote_code)));
    expect(Date.parse(body.expires_at) - Date.parse(body.created_at)).toBe(120_000);
  });

  it('converts an ad-hoc fiat amount of the body instead of the plan price', async () => {
    const merchant = await newMerchant('Metered Co');
    const id = await subscription(merchant, { price: '150000', priceCurrency: 'ARS' });
    const { body } = await quote(merchant, id, { fiat_amount: '11855' });
    expect(body).toMatchObject({ amount: '100000', fiat_amount: '11855', fiat_currency: 'ARS' });
    const other = await quote(merchant, id, { fiat_amount: '100', currency: 'USD' });
    expect(other.status).toBe(422);
    expect(other.body.error).toMatchObject({ code: 'currency_mismatch', param: 'currency' });
  });

  it('quotes a token-priced plan in tokens, without a rate', async () => {
    const merchant = await newMerchant('Legacy Co');
    const id = await subscription(merchant, { price: '2500000', priceCurrency: null });
    expect((await quote(merchant, id)).body).toMatchObject({
      kind: 'reference_quote',
      amount: '2500000',
      fiat_amount: null,
      rate: null,
    });
    expect((await quote(merchant, id, { fiat_amount: '250', currency: 'usd' })).body).toMatchObject({
      amount: '2500000',
      fiat_currency: 'USD',
    });
  });

  /** The fiat settlement configuration a price lock pays out to (PUT /payments/settlement); null removes it. */
  const configureFiat = async (who: { apiKey: string }, fiat: object | null) => {
    const res = await fetch(`${stack.url}/payments/settlement`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${who.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ fiat }),
    });
    expect(res.status).toBe(200);
  };
  const FIAT_ARS = {
    currency: 'ARS',
    beneficiary_name: 'Fiat Co',
    account_number: '0000003100012345678901',
    country: 'AR',
  };

  it("gives a fiat-settled business the settlement provider's price lock", async () => {
    const merchant = await newMerchant('Fiat Co', 'fiat');
    await configureFiat(merchant, FIAT_ARS);
    const id = await subscription(merchant, { price: '150000', priceCurrency: 'ARS' });
    const { status, body } = await quote(merchant, id);
    expect(status).toBe(201);
    expect(body).toMatchObject({ kind: 'price_lock', amount: '1265289', rate: '1185.50' });
    expect(body.price_lock_code).toMatch(/^plk_/);
    expect(body.quote_code).toBe(body.price_lock_code);
    const outage = await quote(merchant, id, { fiat_amount: '503' });
    expect(outage.status).toBe(503);
    expect(outage.body.error).toMatchObject({ code: 'settlement_provider_unavailable' });
  });

  it('refuses a price lock with 422 fiat_settlement_required once the fiat settlement configuration is removed (nothing to pay out to)', async () => {
    const merchant = await newMerchant('Fiat Removed Co', 'fiat');
    await configureFiat(merchant, FIAT_ARS);
    const id = await subscription(merchant, { price: '150000', priceCurrency: 'ARS' });
    expect((await quote(merchant, id)).status).toBe(201);
    await configureFiat(merchant, null);
    for (const body of [undefined, { fiat_amount: '100' }]) {
      const refused = await quote(merchant, id, body);
      expect(refused.status).toBe(422);
      expect(refused.body.error).toMatchObject({ type: 'cannot_process', code: 'fiat_settlement_required' });
    }
    await configureFiat(merchant, { currency: 'ARS', beneficiary_name: 'Fiat Co' });
    expect((await quote(merchant, id)).body.error).toMatchObject({ code: 'fiat_settlement_required' });
    await configureFiat(merchant, FIAT_ARS);
    expect((await quote(merchant, id)).status).toBe(201);
  });

  it('refuses a price lock with 422 currency_mismatch once the fiat settlement currency moved away from the plan (ARS plan, USD payouts)', async () => {
    const merchant = await newMerchant('Fiat Moved Co', 'fiat');
    await configureFiat(merchant, FIAT_ARS);
    const id = await subscription(merchant, { price: '150000', priceCurrency: 'ARS' });
    const legacy = await subscription(merchant, { price: '2500000', priceCurrency: null });
    expect((await quote(merchant, id)).status).toBe(201);
    await configureFiat(merchant, { ...FIAT_ARS, currency: 'USD', country: 'US' });
    for (const body of [undefined, { fiat_amount: '100' }, { fiat_amount: '100', currency: 'ARS' }]) {
      const refused = await quote(merchant, id, body);
      expect(refused.status).toBe(422);
      expect(refused.body.error).toMatchObject({ type: 'cannot_process', code: 'currency_mismatch' });
      expect(refused.body.error?.['param']).toBeUndefined();
    }
    // A token-priced plan's ad-hoc amount is locked in no currency (next test).
    const adHoc = await quote(merchant, legacy, { fiat_amount: '100', currency: 'ARS' });
    expect(adHoc.body.error).toMatchObject({ code: 'currency_mismatch', param: 'currency' });
    await configureFiat(merchant, FIAT_ARS);
    expect((await quote(merchant, id)).body).toMatchObject({ kind: 'price_lock', fiat_currency: 'ARS' });
  });

  it("refuses a fiat-settled business's price lock for a token-priced plan's ad-hoc fiat_amount (422 currency_mismatch, param currency): its charge would settle no fiat", async () => {
    const merchant = await newMerchant('Fiat Legacy Co', 'fiat');
    await configureFiat(merchant, FIAT_ARS);
    const legacy = await subscription(merchant, { price: '2500000', priceCurrency: null });
    const provider = stack.service.app.get<SettlementProvider>(SETTLEMENT_PROVIDER, { strict: false });
    const lockPrice = jest.spyOn(provider, 'lockPrice');
    try {
      // In the settlement currency itself: the ledger keeps no fiat fields for a token-priced plan's charge, so the
      // payout the lock promises would never be tracked, paid or announced.
      const refused = await quote(merchant, legacy, { fiat_amount: '11855', currency: 'ARS' });
      expect(refused.status).toBe(422);
      expect(refused.body.error).toMatchObject({
        type: 'cannot_process',
        code: 'currency_mismatch',
        param: 'currency',
      });
      expect(lockPrice).not.toHaveBeenCalled();
      // Its token price is still quoted as is (a reference quote: nothing to pay out).
      expect((await quote(merchant, legacy)).body).toMatchObject({
        kind: 'reference_quote',
        amount: '2500000',
        fiat_amount: null,
      });
      expect(lockPrice).not.toHaveBeenCalled();
    } finally {
      lockPrice.mockRestore();
    }
  });

  // The cap is 10 USDC (10000000); ARS at 1,185.50 per USDC.
  const overCap = (error: unknown, param: string | undefined) => {
    expect(error).toMatchObject({ type: 'cannot_process', code: 'amount_exceeds_cap' });
    expect((error as Record<string, unknown>)['param']).toBe(param);
  };

  it("refuses a quote above the subscription's cap with the charge's 422 amount_exceeds_cap: it could never be charged", async () => {
    const merchant = await newMerchant('Capped Co');
    const id = await subscription(merchant, { price: '150000', priceCurrency: 'ARS' });
    // 11,855.00 ARS is exactly the cap; a centavo more converts (rounding up) past it.
    expect((await quote(merchant, id, { fiat_amount: '1185500' })).body).toMatchObject({
      amount: '10000000',
    });
    const adHoc = await quote(merchant, id, { fiat_amount: '1185501' });
    expect(adHoc.status).toBe(422);
    overCap(adHoc.body.error, 'fiat_amount');
    // The plan price itself past the cap at today's rate: nothing in the body to name.
    const dear = await subscription(merchant, { price: '2000000', priceCurrency: 'ARS' });
    const price = await quote(merchant, dear);
    expect(price.status).toBe(422);
    overCap(price.body.error, undefined);
    // A token-priced plan's ad-hoc amount alike.
    const legacy = await subscription(merchant, { price: '2500000', priceCurrency: null });
    const tokens = await quote(merchant, legacy, { fiat_amount: '1001', currency: 'USD' });
    expect(tokens.status).toBe(422);
    overCap(tokens.body.error, 'fiat_amount');
  });

  it('refuses a price lock above the cap without asking the settlement provider for one', async () => {
    const merchant = await newMerchant('Capped Fiat Co', 'fiat');
    await configureFiat(merchant, FIAT_ARS);
    const id = await subscription(merchant, { price: '150000', priceCurrency: 'ARS' });
    const provider = stack.service.app.get<SettlementProvider>(SETTLEMENT_PROVIDER, { strict: false });
    const lockPrice = jest.spyOn(provider, 'lockPrice');
    try {
      const refused = await quote(merchant, id, { fiat_amount: '1185501' });
      expect(refused.status).toBe(422);
      overCap(refused.body.error, 'fiat_amount');
      expect(lockPrice).not.toHaveBeenCalled();
      expect((await quote(merchant, id, { fiat_amount: '1185500' })).body).toMatchObject({
        kind: 'price_lock',
        amount: '10000000',
      });
      expect(lockPrice).toHaveBeenCalledTimes(1);
    } finally {
      lockPrice.mockRestore();
    }
  });

  /**
   * A quote of a fiat-settled ARS plan with the rate source down (the live check before the lock cannot run) and the
   * provider's lock converting to `tokenAmount`: the answer and whether that lock was given back.
   */
  const quoteWithRatesDown = async (
    name: string,
    lock: { code: string; tokenAmount: bigint; rate: string },
  ) => {
    const merchant = await newMerchant(name, 'fiat');
    await configureFiat(merchant, FIAT_ARS);
    const id = await subscription(merchant, { price: '150000', priceCurrency: 'ARS' });
    const provider = stack.service.app.get<SettlementProvider>(SETTLEMENT_PROVIDER, { strict: false });
    // Typed by what the spy needs: an app may not import the domain lib (module boundaries).
    const rates = stack.service.app.get<{ quote: (...args: never[]) => Promise<unknown> }>(RATE_SOURCE, {
      strict: false,
    });
    const quoteRate = jest.spyOn(rates, 'quote').mockRejectedValueOnce(new Error('rates down'));
    const lockPrice = jest.spyOn(provider, 'lockPrice').mockResolvedValueOnce({
      priceLockCode: lock.code,
      tokenAmount: lock.tokenAmount,
      rate: lock.rate,
      expiresAt: new Date(Date.now() + 600_000),
    });
    const release = jest.spyOn(provider, 'releasePriceLock');
    try {
      const answer = await quote(merchant, id, { fiat_amount: '1185500' });
      expect(lockPrice).toHaveBeenCalledTimes(1);
      const released = release.mock.calls.some(
        ([r]) => r.merchantId === merchant.id && r.priceLockCode === lock.code,
      );
      return { answer, released };
    } finally {
      quoteRate.mockRestore();
      lockPrice.mockRestore();
      release.mockRestore();
    }
  };

  it('releases a price lock whose quote is refused after the lock: the rate source down and the lock above the cap', async () => {
    // The provider's lock converts past the 10 USDC cap.
    const { answer, released } = await quoteWithRatesDown('Rate Outage Fiat Co', {
      code: 'plk_over_cap',
      tokenAmount: 10_000_001n,
      rate: '1185.50',
    });
    expect(answer.status).toBe(422);
    overCap(answer.body.error, 'fiat_amount');
    expect(released).toBe(true);
  });

  it('releases a price lock converting past what a charge can carry (the rate source down): 400 naming fiat_amount', async () => {
    // Above 2^256 - 1 smallest units: no charge can carry it.
    const { answer, released } = await quoteWithRatesDown('Huge Lock Fiat Co', {
      code: 'plk_too_large',
      tokenAmount: 2n ** 256n,
      rate: '0.000000000001',
    });
    expect(answer.status).toBe(400);
    expect(answer.body.error).toMatchObject({ type: 'validation_error', param: 'fiat_amount' });
    expect(released).toBe(true);
  });

  it('releases a price lock whose quote could not be stored, and a release that fails leaves the refusal as the answer', async () => {
    const merchant = await newMerchant('Store Outage Fiat Co', 'fiat');
    await configureFiat(merchant, FIAT_ARS);
    const id = await subscription(merchant, { price: '150000', priceCurrency: 'ARS' });
    const provider = stack.service.app.get<SettlementProvider>(SETTLEMENT_PROVIDER, { strict: false });
    const issue = jest
      .spyOn(stack.service.app.get(ChargeQuotes, { strict: false }), 'issue')
      .mockRejectedValueOnce(new Error('quotes table unavailable'));
    const lockPrice = jest.spyOn(provider, 'lockPrice');
    const release = jest
      .spyOn(provider, 'releasePriceLock')
      .mockRejectedValueOnce(new Error('provider down'));
    try {
      const failed = await quote(merchant, id);
      expect(failed.status).toBe(500);
      const lock = (await lockPrice.mock.results[0]?.value) as { priceLockCode: string };
      expect(release).toHaveBeenCalledWith({ merchantId: merchant.id, priceLockCode: lock.priceLockCode });
    } finally {
      issue.mockRestore();
      lockPrice.mockRestore();
      release.mockRestore();
    }
  });

  it("answers 404 for another merchant's subscription and an unknown one, and refuses unknown parameters", async () => {
    const owner = await newMerchant('Owner Co');
    const other = await newMerchant('Other Co');
    const id = await subscription(owner, { price: '150000', priceCurrency: 'ARS' });
    expect((await quote(other, id)).status).toBe(404);
    expect((await quote(owner, `0x${'0'.repeat(64)}`)).status).toBe(404);
    expect((await quote(owner, 'sub_1')).status).toBe(404);
    const unknown = await quote(owner, id, { amount: '1' });
    expect(unknown.status).toBe(400);
    expect(unknown.body.error).toMatchObject({ type: 'validation_error', param: 'amount' });
  });
});
