import { EVENT_STORE } from '@stablepay/aggregate';
import { toBusMessage } from '@stablepay/event-bus';
import type { EventStore } from '@stablepay/event-store';
import { ChargeLedgerProjection, SubscriptionChargesConsumer } from '@stablepay/charge-ledger-service';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { type EmbeddedStack, startEmbedded } from './embedded';
import { chargeIdOf, FACTS_START, iso, subscriptionFacts, tx } from './subscription-facts';

/**
 * The charge ledger through HTTP (SPEC Endpoints > Subscription charges, fiat field rules 1-7, Pagination rule 6).
 * The subscription's charge facts are appended to its stream as the subscriptions service appends them from either
 * write path (the charge call's receipt with writtenBy 'api', the indexer's log with writtenBy 'indexer'; the
 * Subscription aggregate records a nonce once, whichever path came first); the charge-ledger service turns them into
 * ledger rows, and GET /merchants/:merchantId/charges lists them.
 */
const ADMIN_TOKEN = 'admin-token-for-tests-0123456789';
const START = FACTS_START;

interface Charge {
  id: string;
  subscription_id: string;
  subscriber: string;
  status: string;
  tx_hash: string | null;
  charge_nonce: number;
  fee: string;
  block_number: string;
  failure_reason: string | null;
  fiat_amount: string | null;
  fiat_currency: string | null;
  settlement_status: string | null;
}
interface List {
  object: string;
  data: Charge[];
  has_more: boolean;
}

describe('charge ledger (GET /merchants/:merchantId/charges)', () => {
  let db: TestDatabase;
  let stack: EmbeddedStack;
  let store: EventStore;
  let merchant: { id: string; apiKey: string };

  const newMerchant = async (name: string) => {
    const res = await fetch(`${stack.url}/admin/merchants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name, mode: 'test' }),
    });
    const body = (await res.json()) as { id: string; api_key: string };
    return { id: body.id, apiKey: body.api_key };
  };
  const get = async (who: { id: string; apiKey: string }, query = '', merchantId = who.id) => {
    const res = await fetch(`${stack.url}/merchants/${merchantId}/charges${query}`, {
      headers: { authorization: `Bearer ${who.apiKey}` },
    });
    return {
      status: res.status,
      body: (await res.json()) as List & { error?: { param?: string; type: string } },
    };
  };
  /** Waits until the ledger has consumed everything appended so far (no timing: the consumers' own positions). */
  const settled = async () => {
    await stack.service.app.get(SubscriptionChargesConsumer).caughtUp();
    await stack.service.app.get(ChargeLedgerProjection).caughtUp();
  };
  const { append, subscription, charged } = subscriptionFacts(() => store);

  beforeAll(async () => {
    db = await createTestDatabase();
    stack = await startEmbedded({
      env: {
        DATABASE_URL: db.url,
        PORT: '0',
        ADMIN_TOKEN,
        LOG_LEVEL: 'error',
        STABLEPAY_LOCAL_CHAINS: 'false',
      },
      dataDir: 'memory',
    });
    store = stack.service.app.get<EventStore>(EVENT_STORE);
    merchant = await newMerchant('Ledger Co');
  });

  afterAll(async () => {
    await stack?.stop();
    await db?.drop();
  });

  it("lists the API path's row with the fiat fields and records a redelivered fact once", async () => {
    const s = await subscription(merchant);
    await charged(merchant, s, 0, 'api');
    const second = await charged(merchant, s, 1, 'api');
    await settled();
    // The same fact delivered again (at-least-once bus): the ledger merges it into the row it has.
    if (!second) throw new Error('no event');
    await stack.service.app.get(SubscriptionChargesConsumer).handle(toBusMessage(second));
    expect(await store.readStream(`charge-${chargeIdOf(s.subscriptionId, 1)}`)).toHaveLength(1);
    const { body } = await get(merchant, `?subscription_id=${s.subscriptionId}`);
    expect(body.data.map((c) => c.charge_nonce)).toEqual([1, 0]);
    expect(body.data[0]).toMatchObject({
      id: chargeIdOf(s.subscriptionId, 1),
      subscription_id: s.subscriptionId,
      subscriber: s.subscriber,
      status: 'succeeded',
      tx_hash: tx(s.n * 1000 + 1),
      fee: '1200',
      // Crypto-settled business, fiat-priced plan, API path: the plan price, no payout behind it (rule 2).
      fiat_amount: '150000',
      fiat_currency: 'ARS',
      settlement_status: null,
    });
  });

  it("lists the indexer's row without fiat fields (rule 4) under the same subscription_charge_id", async () => {
    const s = await subscription(merchant);
    await charged(merchant, s, 0, 'api');
    await charged(merchant, s, 1, 'indexer');
    await settled();
    const { body } = await get(merchant, `?subscription_id=${s.subscriptionId}`);
    expect(body.data).toHaveLength(2);
    expect(body.data[0]).toMatchObject({
      id: chargeIdOf(s.subscriptionId, 1),
      tx_hash: tx(s.n * 1000 + 1),
      fiat_amount: null,
      fiat_currency: null,
      settlement_status: null,
    });
  });

  it('backfills the first charge the indexer wrote with the fiat fields once the subscribe call reports it (rule 3)', async () => {
    const s = await subscription(merchant);
    await charged(merchant, s, 0, 'indexer');
    await settled();
    const before = await get(merchant, `?subscription_id=${s.subscriptionId}`);
    expect(before.body.data[0]).toMatchObject({ charge_nonce: 0, fiat_amount: null });
    await append(merchant, s.subscriptionId, 'SubscriptionFirstChargeReported.v1', {
      chargeId: chargeIdOf(s.subscriptionId, 0),
      txHash: tx(s.n * 1000),
      reportedAt: new Date().toISOString(),
    });
    await settled();
    const after = await get(merchant, `?subscription_id=${s.subscriptionId}`);
    expect(after.body.data).toEqual([
      expect.objectContaining({
        id: chargeIdOf(s.subscriptionId, 0),
        fiat_amount: '150000',
        fiat_currency: 'ARS',
        settlement_status: null,
      }),
    ]);
  });

  it('lists a charge rejected at simulation with tx_hash null, fee 0 and the contract error', async () => {
    const s = await subscription(merchant);
    await charged(merchant, s, 0, 'api');
    await append(merchant, s.subscriptionId, 'SubscriptionChargeFailed.v1', {
      chargeId: 'subc_failedattempt000000000001',
      nonce: 1,
      amount: '5000000',
      txHash: null,
      failureReason: 'InsufficientBalance',
      stage: 'simulation',
      failedAt: new Date().toISOString(),
    });
    await settled();
    const { body } = await get(merchant, `?subscription_id=${s.subscriptionId}&status=failed`);
    expect(body.data).toEqual([
      expect.objectContaining({
        id: 'subc_failedattempt000000000001',
        charge_nonce: 1,
        status: 'failed',
        tx_hash: null,
        fee: '0',
        block_number: '0',
        failure_reason: 'InsufficientBalance',
        fiat_amount: null,
      }),
    ]);
  });

  it('pages on the ledger sequence: a row written late appears at the head and pages already read stay valid', async () => {
    const owner = await newMerchant('Paging Co');
    const s = await subscription(owner);
    await charged(owner, s, 0, 'api');
    await charged(owner, s, 1, 'api');
    await charged(owner, s, 2, 'api');
    await settled();
    const first = await get(owner, '?limit=2');
    expect(first.body.data.map((c) => c.charge_nonce)).toEqual([2, 1]);
    expect(first.body.has_more).toBe(true);
    // The indexer reports a charge after the first page was read; its block time is older than the others'.
    await charged(owner, s, 3, 'indexer', iso(START + 1));
    await settled();
    const next = await get(owner, `?limit=2&starting_after=${first.body.data[1]?.id}`);
    expect(next.body.data.map((c) => c.charge_nonce)).toEqual([0]);
    expect(next.body.has_more).toBe(false);
    const head = await get(owner, `?limit=2&ending_before=${first.body.data[0]?.id}`);
    expect(head.body.data.map((c) => c.charge_nonce)).toEqual([3]);
    expect((await get(owner, '?limit=1')).body.data[0]?.charge_nonce).toBe(3);
  });

  it('filters by subscriber, chain and charged_at range, and refuses unknown or malformed filters', async () => {
    const s = await subscription(merchant);
    await charged(merchant, s, 0, 'api');
    await charged(merchant, s, 1, 'indexer');
    await settled();
    const bySubscriber = await get(merchant, `?subscriber=${s.subscriber.toUpperCase().replace('0X', '0x')}`);
    expect(bySubscriber.body.data.map((c) => c.subscription_id)).toEqual([
      s.subscriptionId,
      s.subscriptionId,
    ]);
    const range = await get(
      merchant,
      `?subscription_id=${s.subscriptionId}&charged_from=${iso(START + 30)}&charged_to=${iso(START + 90)}`,
    );
    expect(range.body.data.map((c) => c.charge_nonce)).toEqual([1]);
    expect((await get(merchant, `?subscription_id=${s.subscriptionId}&chain=eip155:137`)).body.data).toEqual(
      [],
    );
    expect((await get(merchant, '?status=pending')).body.error).toMatchObject({
      type: 'validation_error',
      param: 'status',
    });
    expect((await get(merchant, '?kind=cycle')).body.error).toMatchObject({ param: 'kind' });
    const both = await get(merchant, '?starting_after=subc_a&ending_before=subc_b');
    expect(both.status).toBe(400);
    expect(both.body.error).toMatchObject({ type: 'validation_error', param: 'ending_before' });
  });

  it("never shows another merchant's charges: its merchant id is a 404 and its charge ids are unknown cursors", async () => {
    const other = await newMerchant('Other Co');
    const mine = await get(merchant, '?limit=1');
    expect((await get(other, '', merchant.id)).status).toBe(404);
    const cursor = await get(other, `?starting_after=${mine.body.data[0]?.id}`);
    expect(cursor.status).toBe(400);
    expect((await get(other)).body.data).toEqual([]);
  });
});
