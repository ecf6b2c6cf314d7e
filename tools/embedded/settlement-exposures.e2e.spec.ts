import { PaymentCommands } from '@stablepay/payments-service';
import { metricValue, OpenApiConformance } from '@stablepay/testing';
import { ManualClock } from '@stablepay/util';
import { type Api, createMerchant, type Json, stackApi, until } from './test-support/http';
import { startStackWithoutChains } from './test-support/stack';
import type { EmbeddedStack } from './embedded';

/**
 * The operator's view of settlement exposures (docs/payments.md, "Fiat settlement"): GET /admin/settlement-exposures
 * over HTTP lists every merchant's fiat-settled payments whose payout the provider made for a deposit a reorg then
 * took, with the amount to recover; the payment object names it; the exposure counter counts it. The chain facts are
 * the payments service's commands, run directly (no chain), as the deposit worker and settlement feed run them.
 */
const ADMIN_TOKEN = 'admin-token-for-tests-0123456789';
const FACTORY = '0x1234567890AbcdEF1234567890aBcdef12345678';
const BASE = 'eip155:8453';
const USDC_BASE = `${BASE}/erc20:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913`;
const PAYER = '0x1111111111111111111111111111111111111111';
const SETTLEMENT = '0x3333333333333333333333333333333333333333';
const EXPOSURES = 'stablepay_payment_settlement_exposures_total';
const clock = new ManualClock('2026-06-01T10:00:00.000Z');

describe('GET /admin/settlement-exposures lists the open settlement exposures of every merchant', () => {
  let stack: EmbeddedStack;
  let stop: () => Promise<void>;
  let commands: PaymentCommands;
  const api: Api = stackApi(() => stack);
  const openapi = OpenApiConformance.fromFile();

  const admin = async (query = '', token: string | null = ADMIN_TOKEN) => {
    const path = `/admin/settlement-exposures${query}`;
    const res = await fetch(`${stack.url}${path}`, {
      headers: token === null ? {} : { authorization: `Bearer ${token}` },
    });
    const answer = { status: res.status, body: (await res.json()) as Json };
    openapi.assert({ method: 'GET', path, ...answer, contentType: res.headers.get('content-type') });
    return answer;
  };
  const exposuresCounted = async () =>
    metricValue(await (await fetch(`${stack.url}/metrics`)).text(), EXPOSURES, {
      reason: 'deposit_lost_to_reorg',
      currency: 'USD',
    });
  const ids = (body: Json) => (body['data'] as Json[]).map((row) => row['payment_id']);

  async function fiatMerchant(name: string): Promise<{ id: string; apiKey: string }> {
    const merchant = await createMerchant(stack, ADMIN_TOKEN, name, 'fiat');
    const configured = await api(
      'PUT',
      '/payments/settlement',
      {
        fiat: {
          currency: 'USD',
          beneficiary_name: name,
          account_number: '0000003100010000000001',
          country: 'AR',
        },
      },
      merchant.apiKey,
    );
    if (configured.status !== 200) throw new Error(JSON.stringify(configured.body));
    return merchant;
  }

  /** A DIRECT payment of `amount` paid, deployed (settled, payout open) and paid out by the provider. */
  async function paidOut(merchant: { id: string; apiKey: string }, amount: string, n: number) {
    const created = await api('POST', '/checkouts', { amount, currency: 'USD' }, merchant.apiKey);
    if (created.status !== 201) throw new Error(JSON.stringify(created.body));
    const paymentId = String(created.body['payment_id']);
    const owner = { id: paymentId, merchant_id: merchant.id, mode: 'test' as const };
    const transfer = {
      txHash: `0x${n.toString(16).padStart(64, '0')}`,
      logIndex: 0,
      from: PAYER,
      asset: USDC_BASE,
      chain: BASE,
      amount,
      blockNumber: String(1000 + n),
    };
    await commands.run(owner, { type: 'ObserveTransfer', transfer, blockTime: clock.now() });
    await commands.run(owner, { type: 'ConfirmTransfer', chain: BASE, txHash: transfer.txHash, logIndex: 0 });
    await commands.run(owner, { type: 'RecordScreening', result: { kind: 'clear', addresses: [PAYER] } });
    await commands.run(owner, {
      type: 'RecordDeployed',
      method: 'DIRECT',
      txHash: `0x${(n + 0x1000).toString(16).padStart(64, '0')}`,
      chain: BASE,
      payer: PAYER,
      payerFinalAt: new Date(clock.now().getTime() + 86_400_000),
      amount,
      settlementAddress: SETTLEMENT,
    });
    await commands.run(owner, {
      type: 'RecordSettlementReport',
      reportId: `report-${paymentId}`,
      kind: 'payout_completed',
      reportedAt: clock.now(),
    });
    const lose = async () => {
      await commands.run(owner, {
        type: 'RetractTransfer',
        chain: BASE,
        txHash: transfer.txHash,
        logIndex: 0,
      });
      return until(
        async () => (await api('GET', `/payments/${paymentId}`, undefined, merchant.apiKey)).body,
        (p) => p['settlement_exposure'] != null,
        `the exposure of ${paymentId}`,
      );
    };
    return { paymentId, lose };
  }

  let first: string;
  let second: string;
  let merchants: Array<{ id: string; apiKey: string }>;
  let countedBefore: number;
  let exposedObject: Json;

  beforeAll(async () => {
    ({ stack, stop } = await startStackWithoutChains(
      { ADMIN_TOKEN, PAYMENT_FACTORY_ADDRESS: FACTORY, SANDBOX_SETTLEMENT_DELAY_MS: 'off' },
      clock,
    ));
    commands = stack.service.app.get(PaymentCommands);
    merchants = [await fiatMerchant('Pampa Fiat SA'), await fiatMerchant('Andes Fiat SRL')];
    const [a, b] = merchants as [{ id: string; apiKey: string }, { id: string; apiKey: string }];
    countedBefore = await exposuresCounted();
    const one = await paidOut(a, '12500000', 1);
    const two = await paidOut(b, '4000000', 2);
    // Paid out and still on chain: no exposure.
    await paidOut(b, '7000000', 3);
    exposedObject = await one.lose();
    await two.lose();
    first = one.paymentId;
    second = two.paymentId;
  }, 300_000);

  afterAll(() => stop());

  it('the payment object names the exposure with the amount paid out and its currency', () => {
    expect(exposedObject).toMatchObject({
      id: first,
      status: 'failed',
      failure_reason: 'deposit_lost_to_reorg',
      settlement_status: 'completed',
      settlement_exposure: {
        reason: 'deposit_lost_to_reorg',
        amount: '12500000',
        currency: 'USD',
        recorded_at: clock.now().toISOString(),
      },
    });
  });

  it("lists both merchants' exposures, newest payment first, with merchant, payment, amount, currency, reason and time", async () => {
    const page = await admin();
    expect(page.status).toBe(200);
    expect(page.body).toEqual({
      object: 'list',
      has_more: false,
      data: [
        {
          object: 'settlement_exposure',
          payment_id: second,
          merchant_id: merchants[1]?.id,
          mode: 'test',
          amount: '4000000',
          currency: 'USD',
          reason: 'deposit_lost_to_reorg',
          recorded_at: clock.now().toISOString(),
        },
        {
          object: 'settlement_exposure',
          payment_id: first,
          merchant_id: merchants[0]?.id,
          mode: 'test',
          amount: '12500000',
          currency: 'USD',
          reason: 'deposit_lost_to_reorg',
          recorded_at: clock.now().toISOString(),
        },
      ],
    });
    expect((await admin('?mode=live')).body).toEqual({ object: 'list', data: [], has_more: false });
    expect(ids((await admin('?mode=test')).body)).toEqual([second, first]);
  });

  it("pages by SPEC's list rules: limit, starting_after, ending_before, has_more in the direction paged", async () => {
    const head = await admin('?limit=1');
    expect({ ids: ids(head.body), has_more: head.body['has_more'] }).toEqual({
      ids: [second],
      has_more: true,
    });
    const next = await admin(`?limit=1&starting_after=${second}`);
    expect({ ids: ids(next.body), has_more: next.body['has_more'] }).toEqual({
      ids: [first],
      has_more: false,
    });
    const back = await admin(`?limit=1&ending_before=${first}`);
    expect({ ids: ids(back.body), has_more: back.body['has_more'] }).toEqual({
      ids: [second],
      has_more: false,
    });
  });

  it('refuses both cursors, an unknown parameter or mode, and anyone without the operator token', async () => {
    const both = await admin(`?starting_after=${first}&ending_before=${second}`);
    expect({ status: both.status, error: both.body['error'] }).toEqual({
      status: 400,
      error: expect.objectContaining({ type: 'validation_error', param: 'ending_before' }),
    });
    expect((await admin('?merchant=x')).status).toBe(400);
    const mode = await admin('?mode=prod');
    expect({ status: mode.status, error: mode.body['error'] }).toEqual({
      status: 400,
      error: expect.objectContaining({ type: 'validation_error', param: 'mode' }),
    });
    expect((await admin('', null)).status).toBe(401);
    expect((await admin('', merchants[0]?.apiKey ?? '')).status).toBe(401);
  });

  it('counts each exposure once in stablepay_payment_settlement_exposures_total (reason and currency, no merchant)', async () => {
    // Counted when the projection's transaction commits, just after the row is readable: polled.
    const counted = await until(exposuresCounted, (n) => n >= countedBefore + 2, 'both exposures counted');
    expect(counted - countedBefore).toBe(2);
    const text = await (await fetch(`${stack.url}/metrics`)).text();
    expect(text.split('\n').filter((l) => l.startsWith(`${EXPOSURES}{`) && l.includes('merchant'))).toEqual(
      [],
    );
  });
});
