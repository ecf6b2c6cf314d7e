import { EVENT_STORE } from '@stablepay/aggregate';
import { ChargeLedgerCommands } from '@stablepay/charge-ledger-service';
import type { EventStore } from '@stablepay/event-store';
import { metricValue, OpenApiConformance } from '@stablepay/testing';
import { chargeIdOf, type FactSubscription, subscriptionFacts, tx } from './subscription-facts';
import { createMerchant, type Json, until } from './test-support/http';
import { startStackWithoutChains } from './test-support/stack';
import type { EmbeddedStack } from './embedded';

/**
 * A fiat payout of a subscription charge a reorg took (docs/subscriptions.md, Reorgs, "Settlement exposure"), over
 * HTTP: the charge object's `settlement_exposure`, GET /admin/charge-settlement-exposures across merchants, and the
 * exposure counter. The subscription's facts are appended as the subscriptions service appends them (the charge, its
 * retraction) and the provider's report is the command the settlement feed runs (no chain).
 */
const ADMIN_TOKEN = 'admin-token-for-tests-0123456789';
const EXPOSURES = 'stablepay_charge_settlement_exposures_total';

describe('charge settlement exposures: the charge object and GET /admin/charge-settlement-exposures', () => {
  let stack: EmbeddedStack;
  let stop: () => Promise<void>;
  let store: EventStore;
  const openapi = OpenApiConformance.fromFile();
  const { append, subscription, charged } = subscriptionFacts(() => store);

  const get = async (path: string, token: string | null) => {
    const res = await fetch(`${stack.url}${path}`, {
      headers: token === null ? {} : { authorization: `Bearer ${token}` },
    });
    const answer = { status: res.status, body: (await res.json()) as Json };
    openapi.assert({ method: 'GET', path, ...answer, contentType: res.headers.get('content-type') });
    return answer;
  };
  const admin = (query = '', token: string | null = ADMIN_TOKEN) =>
    get(`/admin/charge-settlement-exposures${query}`, token);
  const chargeOf = async (merchant: { id: string; apiKey: string }, s: FactSubscription) =>
    (
      (await get(`/merchants/${merchant.id}/charges?subscription_id=${s.subscriptionId}`, merchant.apiKey))
        .body['data'] as Json[]
    )[0];
  const chargeUntil = (
    merchant: { id: string; apiKey: string },
    s: FactSubscription,
    done: (c: Json) => boolean,
    what: string,
  ) => until(async () => (await chargeOf(merchant, s)) ?? {}, done, what);
  const exposuresCounted = async () =>
    metricValue(await (await fetch(`${stack.url}/metrics`)).text(), EXPOSURES, {
      reason: 'charge_lost_to_reorg',
    });

  /** A fiat-settled charge (nonce 1, the API path's row: settlement pending) of a new subscription. */
  async function fiatCharge(merchant: { id: string; apiKey: string }) {
    const s = await subscription(merchant);
    await charged(merchant, s, 1, 'api');
    await chargeUntil(merchant, s, (c) => c['settlement_status'] === 'pending', 'the pending settlement');
    const chargeId = chargeIdOf(s.subscriptionId, 1);
    const paidOut = () =>
      stack.service.app.get(ChargeLedgerCommands).run(
        chargeId,
        { merchantId: merchant.id, mode: 'test' },
        {
          type: 'RecordSettlementReport',
          reportId: `report-${chargeId}`,
          kind: 'payout_completed',
          reportedAt: new Date(),
          now: new Date(),
        },
        `report-${chargeId}`,
      );
    const lost = () =>
      append(merchant, s.subscriptionId, 'SubscriptionChargeRetracted.v1', {
        chargeId,
        nonce: 1,
        txHash: tx(s.n * 1000 + 1),
        retractedAt: new Date().toISOString(),
      });
    return { s, chargeId, paidOut, lost };
  }

  let merchants: Array<{ id: string; apiKey: string }>;
  let before: Json;
  let exposed: Json;
  let first: string;
  let second: string;
  let countedBefore: number;

  beforeAll(async () => {
    ({ stack, stop } = await startStackWithoutChains({ ADMIN_TOKEN, SANDBOX_SETTLEMENT_DELAY_MS: 'off' }));
    store = stack.service.app.get<EventStore>(EVENT_STORE);
    merchants = [
      await createMerchant(stack, ADMIN_TOKEN, 'Pampa Planes SA', 'fiat'),
      await createMerchant(stack, ADMIN_TOKEN, 'Andes Planes SRL', 'fiat'),
    ];
    const [a, b] = merchants as [{ id: string; apiKey: string }, { id: string; apiKey: string }];
    countedBefore = await exposuresCounted();
    // Paid out before the reorg.
    const one = await fiatCharge(a);
    await one.paidOut();
    before = await chargeUntil(a, one.s, (c) => c['settlement_status'] === 'completed', 'the payout');
    await one.lost();
    exposed = await chargeUntil(a, one.s, (c) => c['settlement_exposure'] != null, 'the first exposure');
    // Lost first, then reported paid out.
    const two = await fiatCharge(b);
    await two.lost();
    await chargeUntil(b, two.s, (c) => c['status'] === 'failed', 'the second loss');
    await two.paidOut();
    await chargeUntil(b, two.s, (c) => c['settlement_exposure'] != null, 'the second exposure');
    // Paid out and still on chain: no exposure.
    await (await fiatCharge(b)).paidOut();
    first = one.chargeId;
    second = two.chargeId;
  }, 300_000);

  afterAll(() => stop());

  it('the charge object names the exposure with the amount paid out and its currency; null before it', () => {
    expect(before).toMatchObject({
      status: 'succeeded',
      settlement_status: 'completed',
      settlement_exposure: null,
    });
    expect(exposed).toMatchObject({
      id: first,
      status: 'failed',
      failure_reason: 'charge_lost_to_reorg',
      settlement_status: 'completed',
      settlement_exposure: { reason: 'charge_lost_to_reorg', amount: '150000', currency: 'ARS' },
    });
    expect(Object.keys(exposed['settlement_exposure'] as Json).sort()).toEqual([
      'amount',
      'currency',
      'reason',
      'recorded_at',
    ]);
  });

  it("lists both merchants' exposures, newest first, paged both ways, and counts each once", async () => {
    const [a, b] = merchants as [{ id: string; apiKey: string }, { id: string; apiKey: string }];
    const all = await admin();
    expect(all.status).toBe(200);
    const rows = (all.body['data'] as Json[]).filter(
      (r) => r['charge_id'] === first || r['charge_id'] === second,
    );
    expect(rows).toEqual([
      expect.objectContaining({
        object: 'charge_settlement_exposure',
        charge_id: second,
        merchant_id: b.id,
        mode: 'test',
        amount: '150000',
        currency: 'ARS',
        reason: 'charge_lost_to_reorg',
      }),
      expect.objectContaining({ charge_id: first, merchant_id: a.id, subscription_id: expect.any(String) }),
    ]);
    const page = await admin(`?limit=1&starting_after=${second}`);
    expect((page.body['data'] as Json[])[0]?.['charge_id']).toBe(first);
    const back = await admin(`?limit=1&ending_before=${first}`);
    expect((back.body['data'] as Json[])[0]?.['charge_id']).toBe(second);
    expect((await admin('?mode=live')).body['data']).toEqual([]);
    expect(await exposuresCounted()).toBe(countedBefore + 2);
  });

  it('refuses both cursors, unknown parameters, no token and a merchant key', async () => {
    const [a] = merchants as [{ id: string; apiKey: string }];
    expect((await admin(`?starting_after=${first}&ending_before=${second}`)).body['error']).toMatchObject({
      type: 'validation_error',
      param: 'ending_before',
    });
    expect((await admin('?merchant=x')).status).toBe(400);
    expect((await admin('', null)).status).toBe(401);
    expect((await admin('', a.apiKey)).status).toBe(401);
  });
});
