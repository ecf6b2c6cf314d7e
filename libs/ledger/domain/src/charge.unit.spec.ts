import { DomainError } from '@stablepay/util';
import {
  type ChargeCommand,
  chargeObject,
  decideCharge,
  evolveCharge,
  type FiatContext,
  initialChargeState,
  payoutFiatAmount,
  settlementCheckAt,
  settlementSummary,
} from './charge';
import type { ChargeEvent, ChargeFacts, SettlementReportKind } from './charge.events';

const now = new Date('2026-06-01T10:00:00.000Z');
const later = new Date('2026-06-01T16:00:00.000Z');
const SUB = `0x${'5a'.repeat(32)}`;

const succeeded = (nonce: number, over: Partial<ChargeFacts> = {}): ChargeFacts => ({
  chargeId: `subc_${nonce}`,
  subscriptionId: SUB,
  subscriber: '0x1111111111111111111111111111111111111111',
  chain: 'eip155:8453',
  nonce,
  amount: '2000000',
  fee: '1200',
  txHash: `0x${String(nonce).padStart(64, '7')}`,
  blockNumber: '1234',
  chargedAt: '2026-06-01T09:59:58.000Z',
  status: 'succeeded',
  failureReason: null,
  ...over,
});
const failed = (over: Partial<ChargeFacts> = {}): ChargeFacts =>
  succeeded(1, {
    chargeId: 'subc_attempt',
    txHash: null,
    fee: '900',
    blockNumber: '99',
    chargedAt: now.toISOString(),
    status: 'failed',
    failureReason: 'InsufficientBalance',
    ...over,
  });

const fiatSettled: FiatContext = { price: '150000', priceCurrency: 'ARS', settlement: 'fiat' };
const cryptoSettled: FiatContext = { price: '150000', priceCurrency: 'ARS', settlement: 'crypto' };
const tokenPriced: FiatContext = { price: '2000000', priceCurrency: null, settlement: 'crypto' };

const byApi = (charge: ChargeFacts, fiatContext: FiatContext | null = fiatSettled): ChargeCommand => ({
  type: 'RecordCharge',
  charge,
  writtenBy: 'api',
  fiatContext,
  now,
});
const byIndexer = (charge: ChargeFacts): ChargeCommand => ({
  type: 'RecordCharge',
  charge,
  writtenBy: 'indexer',
  fiatContext: null,
  now: later,
});

const fold = (events: readonly ChargeEvent[]) => events.reduce(evolveCharge, initialChargeState());
const run = (...commands: ChargeCommand[]) =>
  commands.reduce<ChargeEvent[]>((events, c) => [...events, ...decideCharge(c, fold(events))], []);
const objectAfter = (...commands: ChargeCommand[]) => chargeObject(fold(run(...commands)));
const fiatOf = (...commands: ChargeCommand[]) => {
  const o = objectAfter(...commands);
  return [o.fiat_amount, o.fiat_currency, o.settlement_status];
};
function thrown(f: () => unknown): unknown {
  try {
    f();
  } catch (e) {
    return e;
  }
  throw new Error('expected an error');
}

describe('Charge ledger row: SPEC Resources > Subscription charge', () => {
  it('carries every field of the SPEC table, and ours: settlement_exposure', () => {
    expect(Object.keys(objectAfter(byApi(succeeded(1)))).sort()).toEqual(
      [
        'object',
        'id',
        'subscription_id',
        'subscriber',
        'amount',
        'fee',
        'tx_hash',
        'chain',
        'charge_nonce',
        'charged_at',
        'block_number',
        'created_at',
        'status',
        'failure_reason',
        'fiat_amount',
        'fiat_currency',
        'settlement_status',
        'settlement_exposure',
      ].sort(),
    );
  });

  it('a failed charge: fee 0, block_number 0, tx_hash null when rejected at simulation, the typed failure name', () => {
    expect(objectAfter(byApi(failed()))).toMatchObject({
      object: 'subscription_charge',
      status: 'failed',
      fee: '0',
      block_number: '0',
      tx_hash: null,
      failure_reason: 'InsufficientBalance',
      charged_at: now.toISOString(),
      created_at: now.toISOString(),
    });
  });
});

describe('Fiat field rules', () => {
  it('rule 1: null on a plan that is not fiat-priced, on failed charges, on recurring charges the indexer wrote', () => {
    expect(fiatOf(byApi(succeeded(1), tokenPriced))).toEqual([null, null, null]);
    expect(fiatOf(byApi(failed()))).toEqual([null, null, null]);
    expect(fiatOf(byIndexer(succeeded(3)))).toEqual([null, null, null]);
  });

  it('rule 2: crypto-settled business: fiat_amount is the plan price, settlement_status null', () => {
    expect(fiatOf(byApi(succeeded(1), cryptoSettled))).toEqual(['150000', 'ARS', null]);
  });

  it('rule 3: fiat-settling business: the subscribe call writes the three fields on the first charge', () => {
    expect(fiatOf(byApi(succeeded(0)))).toEqual(['150000', 'ARS', 'pending']);
  });

  it('rule 3: ...and backfills them onto the indexer row when the indexer wrote first', () => {
    const events = run(byIndexer(succeeded(0)), byApi(succeeded(0)));
    expect(events.map((e) => e.type)).toEqual(['ChargeRecorded.v1', 'ChargeFiatBackfilled.v1']);
    expect(chargeObject(fold(events))).toMatchObject({
      fiat_amount: '150000',
      fiat_currency: 'ARS',
      settlement_status: 'pending',
      // The row keeps the first writer's created_at (its place in the ledger).
      created_at: later.toISOString(),
    });
  });

  it('rule 4: a recurring charge the indexer wrote first stays without fiat fields (reconcile on presence)', () => {
    expect(run(byIndexer(succeeded(2)), byApi(succeeded(2))).map((e) => e.type)).toEqual([
      'ChargeRecorded.v1',
    ]);
  });

  it('rule 5: one row per tx_hash whichever path writes first; the second writer of the same facts records nothing', () => {
    expect(run(byApi(succeeded(2)), byIndexer(succeeded(2))).map((e) => e.type)).toEqual([
      'ChargeRecorded.v1',
    ]);
    expect(fiatOf(byApi(succeeded(2)), byIndexer(succeeded(2)))).toEqual(['150000', 'ARS', 'pending']);
  });

  it('rule 5: one id with another transaction or status is refused (a reorg must retract the first)', () => {
    const state = fold(run(byApi(succeeded(2))));
    expect(
      thrown(() => decideCharge(byIndexer(succeeded(2, { txHash: `0x${'e'.repeat(64)}` })), state)),
    ).toMatchObject({
      code: 'charge_conflict',
      status: 409,
    });
  });
});

describe('Settlement transitions (SPEC States > Subscription charge settlement)', () => {
  const pending = () => run(byApi(succeeded(1)));
  const after = (events: ChargeEvent[], command: ChargeCommand) => [
    ...events,
    ...decideCharge(command, fold(events)),
  ];

  it('pending -> delayed -> completed, with the summary of each event', () => {
    const delayed = after(pending(), { type: 'DelaySettlement', reason: 'deposit_not_credited', now: later });
    expect(settlementSummary(fold(delayed))).toEqual({
      subscription_id: SUB,
      charge_nonce: 1,
      amount: '2000000',
      fiat_amount: '150000',
      fiat_currency: 'ARS',
      settlement_status: 'delayed',
      settlement_failure_reason: 'deposit_not_credited',
    });
    const settled = after(delayed, { type: 'CompleteSettlement', now: later });
    expect(settled.at(-1)?.type).toBe('ChargeSettled.v1');
    expect(settlementSummary(fold(settled))).toEqual({
      subscription_id: SUB,
      charge_nonce: 1,
      amount: '2000000',
      fiat_amount: '150000',
      fiat_currency: 'ARS',
      settlement_status: 'completed',
    });
    expect(chargeObject(fold(settled)).settlement_status).toBe('completed');
  });

  it("an ad-hoc charge (1,234.57 ARS add-on on a 1,500.00 ARS plan) settles at the quoted fiat amount; the charge's fiat_amount keeps the plan price", () => {
    const addOn = { ...fiatSettled, quotedFiatAmount: '123457' };
    const settled = run(byApi(succeeded(1), addOn), { type: 'CompleteSettlement', now: later });
    const state = fold(settled);
    expect(settlementSummary(state)).toMatchObject({ fiat_amount: '123457', fiat_currency: 'ARS' });
    expect(state.fiat && payoutFiatAmount(state.fiat)).toBe('123457');
    expect(chargeObject(state)).toMatchObject({ fiat_amount: '150000', settlement_status: 'completed' });
    // A crypto-settled business has no payout behind the charge: nothing is recorded beside SPEC's plan price.
    const crypto = run(byApi(succeeded(2), { ...cryptoSettled, quotedFiatAmount: '123457' }));
    expect(crypto[0]).toMatchObject({ data: { fiat: { fiatAmount: '150000' } } });
    expect(crypto[0]?.type === 'ChargeRecorded.v1' && crypto[0].data.fiat).not.toHaveProperty(
      'payoutFiatAmount',
    );
  });

  it('a row recorded before the quoted amount was kept (ChargeRecorded.v1 without payoutFiatAmount) settles at the plan price, as before', () => {
    const stored: ChargeEvent = {
      type: 'ChargeRecorded.v1',
      data: {
        ...succeeded(1),
        fiat: { fiatAmount: '150000', fiatCurrency: 'ARS', settlementStatus: 'pending' },
        writtenBy: 'api',
        recordedAt: now.toISOString(),
      },
    };
    const settled = [stored, ...decideCharge({ type: 'CompleteSettlement', now: later }, fold([stored]))];
    expect(settlementSummary(fold(settled))).toMatchObject({
      fiat_amount: '150000',
      settlement_status: 'completed',
    });
  });

  it('a delayed event fires once per distinct reason; without a known reason the summary has none', () => {
    const once = after(pending(), { type: 'DelaySettlement', reason: null, now: later });
    expect(settlementSummary(fold(once))).not.toHaveProperty('settlement_failure_reason');
    expect(decideCharge({ type: 'DelaySettlement', reason: null, now: later }, fold(once))).toEqual([]);
    expect(
      decideCharge({ type: 'DelaySettlement', reason: 'rampoff_order_failed', now: later }, fold(once)).map(
        (e) => e.type,
      ),
    ).toEqual(['ChargeSettlementDelayed.v1']);
  });

  it('pending or delayed -> failed with its reason; failed and completed are final', () => {
    const failedSettlement = after(pending(), {
      type: 'FailSettlement',
      reason: 'rampoff_withdraw_failed',
      now: later,
    });
    expect(settlementSummary(fold(failedSettlement))).toMatchObject({
      settlement_status: 'failed',
      settlement_failure_reason: 'rampoff_withdraw_failed',
    });
    expect(
      decideCharge(
        { type: 'FailSettlement', reason: 'rampoff_withdraw_failed', now: later },
        fold(failedSettlement),
      ),
    ).toEqual([]);
    expect(
      thrown(() => decideCharge({ type: 'CompleteSettlement', now: later }, fold(failedSettlement))),
    ).toMatchObject({
      code: 'settlement_final',
    });
    expect(
      decideCharge({ type: 'DelaySettlement', reason: null, now: later }, fold(failedSettlement)),
    ).toEqual([]);
  });

  it('a charge without fiat settlement (crypto-settled, failed) has no settlement transitions', () => {
    const crypto = fold(run(byApi(succeeded(1), cryptoSettled)));
    const e = thrown(() => decideCharge({ type: 'CompleteSettlement', now: later }, crypto));
    expect(e).toBeInstanceOf(DomainError);
    expect(e).toMatchObject({ code: 'charge_not_fiat_settled' });
  });
});

describe('A charge that paid a replaced settlement address (SubscriptionChargePaidReplacedSettlement.v1)', () => {
  const paidReplaced: ChargeCommand = { type: 'RecordPaidReplacedSettlementAddress', now };

  it('fails its open fiat settlement at once with settlement_address_replaced (no deadline to wait out)', () => {
    const events = run(byApi(succeeded(1)), paidReplaced);
    expect(events.map((e) => e.type)).toEqual(['ChargeRecorded.v1', 'ChargeSettlementFailed.v1']);
    const state = fold(events);
    expect(settlementSummary(state)).toMatchObject({
      settlement_status: 'failed',
      settlement_failure_reason: 'settlement_address_replaced',
    });
    expect(chargeObject(state).settlement_status).toBe('failed');
    // The deadline timer has nothing left to check, and the fact sighted again records nothing.
    expect(settlementCheckAt(state)).toBeNull();
    expect(decideCharge(paidReplaced, state)).toEqual([]);
  });

  it('a delayed settlement fails too; a completed one stays completed (the provider paid out after all)', () => {
    const delayed = run(byApi(succeeded(1)), { type: 'DelaySettlement', reason: null, now });
    expect(decideCharge(paidReplaced, fold(delayed)).map((e) => e.type)).toEqual([
      'ChargeSettlementFailed.v1',
    ]);
    const completed = run(byApi(succeeded(1)), { type: 'CompleteSettlement', now });
    expect(decideCharge(paidReplaced, fold(completed))).toEqual([]);
  });

  it('records nothing on a charge without a fiat settlement (crypto-settled, indexer row not backfilled, no row)', () => {
    for (const events of [run(byApi(succeeded(1), cryptoSettled)), run(byIndexer(succeeded(0))), []])
      expect(decideCharge(paidReplaced, fold(events))).toEqual([]);
  });
});

describe('Settlement from the provider feed and the SPEC deadlines (Fiat settlement delay and failure)', () => {
  const settledAt = Date.parse('2026-06-01T09:59:58.000Z');
  const hours = (h: number) => new Date(settledAt + h * 3_600_000);
  const pending = () => run(byApi(succeeded(1)));
  let seq = 0;
  const report = (kind: SettlementReportKind, at: Date): ChargeCommand => ({
    type: 'RecordSettlementReport',
    reportId: `rep_${++seq}`,
    kind,
    reportedAt: at,
    now: at,
  });
  const step = (events: ChargeEvent[], command: ChargeCommand) => [
    ...events,
    ...decideCharge(command, fold(events)),
  ];
  const types = (events: ChargeEvent[]) => events.map((e) => e.type);
  const check = (h: number): ChargeCommand => ({ type: 'CheckSettlementDeadlines', now: hours(h) });

  it('a deposit not credited: delayed at six hours (once), failed deposit_not_credited at 72 hours', () => {
    let events = pending();
    expect(settlementCheckAt(fold(events))).toEqual(hours(6));
    expect(decideCharge(check(5.9), fold(events))).toEqual([]);
    events = step(events, check(6));
    expect(events.at(-1)).toMatchObject({
      type: 'ChargeSettlementDelayed.v1',
      data: { reason: 'deposit_not_credited' },
    });
    expect(decideCharge(check(7), fold(events))).toEqual([]);
    expect(settlementCheckAt(fold(events))).toEqual(hours(72));
    events = step(events, check(72));
    expect(settlementSummary(fold(events))).toMatchObject({
      settlement_status: 'failed',
      settlement_failure_reason: 'deposit_not_credited',
    });
    expect(settlementCheckAt(fold(events))).toBeNull();
  });

  it('credited then paid out: no delay at six hours, completed on the payout report; a redelivered report is recorded once', () => {
    let events = step(pending(), report('deposit_credited', hours(1)));
    expect(settlementCheckAt(fold(events))).toEqual(hours(72));
    expect(decideCharge(check(6), fold(events))).toEqual([]);
    const completed = report('payout_completed', hours(9));
    events = step(events, completed);
    expect(types(events).slice(-2)).toEqual(['ChargeSettlementReported.v1', 'ChargeSettled.v1']);
    expect(decideCharge(completed, fold(events))).toEqual([]);
    expect(settlementCheckAt(fold(events))).toBeNull();
  });

  it('a failed bank transfer is delayed at once; the transfer has 72 hours from its first attempt', () => {
    let events = step(pending(), report('withdraw_started', hours(10)));
    events = step(events, report('withdraw_failed', hours(11)));
    expect(events.at(-1)).toMatchObject({ data: { reason: 'rampoff_withdraw_failed' } });
    events = step(events, report('withdraw_failed', hours(12)));
    expect(events.at(-1)?.type).toBe('ChargeSettlementReported.v1');
    expect(settlementCheckAt(fold(events))).toEqual(hours(82));
    expect(decideCharge(check(75), fold(events))).toEqual([]);
    events = step(events, check(82));
    expect(settlementSummary(fold(events))).toMatchObject({
      settlement_status: 'failed',
      settlement_failure_reason: 'rampoff_withdraw_failed',
    });
  });

  it('sell orders: a failure is announced from six hours on; the seventh failure ends the settlement', () => {
    let events = step(pending(), report('deposit_credited', hours(0.5)));
    events = step(events, report('sell_order_failed', hours(2)));
    expect(events.at(-1)?.type).toBe('ChargeSettlementReported.v1');
    expect(settlementCheckAt(fold(events))).toEqual(hours(6));
    events = step(events, check(6));
    expect(events.at(-1)).toMatchObject({ data: { reason: 'rampoff_order_failed' } });
    for (let i = 2; i <= 6; i++) events = step(events, report('sell_order_failed', hours(6 + i)));
    expect(fold(events).settlementStatus).toBe('delayed');
    events = step(events, report('sell_order_failed', hours(20)));
    expect(settlementSummary(fold(events))).toMatchObject({
      settlement_status: 'failed',
      settlement_failure_reason: 'rampoff_order_failed',
    });
  });

  it('a compliance rejection fails with provider_rejected; reports after the end change nothing', () => {
    let events = step(pending(), report('payout_rejected', hours(3)));
    expect(settlementSummary(fold(events))).toMatchObject({ settlement_failure_reason: 'provider_rejected' });
    events = step(events, report('payout_completed', hours(4)));
    expect(events.at(-1)?.type).toBe('ChargeSettlementReported.v1');
    expect(fold(events).settlementStatus).toBe('failed');
  });

  it('a charge without a fiat settlement refuses provider reports', () => {
    const crypto = fold(run(byApi(succeeded(1), cryptoSettled)));
    expect(thrown(() => decideCharge(report('payout_completed', hours(1)), crypto))).toMatchObject({
      code: 'charge_not_fiat_settled',
    });
    expect(settlementCheckAt(crypto)).toBeNull();
  });
});
