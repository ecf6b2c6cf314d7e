import {
  evolveProviderProgress,
  type FiatSettlement,
  initialProviderProgress,
  type SettlementReportKind,
  settlementDeadlineAt,
  settlementDeadlineOutcomes,
  settlementReportOutcomes,
} from './fiat-settlement';
import { SandboxSettlementFeedOf, type SettlementReportOf } from './settlement-feed';

const START = Date.parse('2026-11-01T00:00:00.000Z');
const hours = (h: number) => new Date(START + h * 3_600_000);
const open = (over: Partial<FiatSettlement> = {}): FiatSettlement => ({
  status: 'pending',
  startedAt: hours(0).toISOString(),
  delayReasons: [],
  provider: initialProviderProgress(),
  ...over,
});
let n = 0;
const reported = (s: FiatSettlement, kind: SettlementReportKind, at = hours(1)): FiatSettlement => ({
  ...s,
  provider: evolveProviderProgress(s.provider, { reportId: `r${n++}`, kind, reportedAt: at.toISOString() }),
});

describe('fiat settlement: the provider reports', () => {
  it('a completed payout completes; a compliance rejection fails with provider_rejected', () => {
    expect(
      settlementReportOutcomes(reported(open(), 'payout_completed'), 'payout_completed', hours(1)),
    ).toEqual([{ kind: 'completed' }]);
    expect(
      settlementReportOutcomes(reported(open(), 'payout_rejected'), 'payout_rejected', hours(1)),
    ).toEqual([{ kind: 'failed', reason: 'provider_rejected' }]);
  });

  it('a failed bank transfer is late at once, once: a second failure announces nothing', () => {
    const first = reported(open(), 'withdraw_failed');
    expect(settlementReportOutcomes(first, 'withdraw_failed', hours(1))).toEqual([
      { kind: 'delayed', reason: 'rampoff_withdraw_failed' },
    ]);
    const again = reported(
      { ...first, status: 'delayed', delayReasons: ['rampoff_withdraw_failed'] },
      'withdraw_failed',
    );
    expect(settlementReportOutcomes(again, 'withdraw_failed', hours(2))).toEqual([]);
  });

  it('a failed sell order is late only after six hours, and the seventh failure ends the settlement', () => {
    let s = reported(open(), 'sell_order_failed');
    expect(settlementReportOutcomes(s, 'sell_order_failed', hours(5))).toEqual([]);
    expect(settlementReportOutcomes(s, 'sell_order_failed', hours(6))).toEqual([
      { kind: 'delayed', reason: 'rampoff_order_failed' },
    ]);
    for (let i = 0; i < 6; i++) s = reported(s, 'sell_order_failed');
    expect(settlementReportOutcomes(s, 'sell_order_failed', hours(7))).toEqual([
      { kind: 'failed', reason: 'rampoff_order_failed' },
    ]);
  });

  it('means nothing once the settlement ended', () => {
    const done = reported(open({ status: 'completed' }), 'payout_rejected');
    expect(settlementReportOutcomes(done, 'payout_rejected', hours(1))).toEqual([]);
  });
});

describe('fiat settlement: the deadlines by the injected clock', () => {
  it('a deposit never credited is delayed at six hours (once) and fails at 72', () => {
    expect(settlementDeadlineOutcomes(open(), hours(5.99))).toEqual([]);
    expect(settlementDeadlineAt(open())).toEqual(hours(6));
    expect(settlementDeadlineOutcomes(open(), hours(6))).toEqual([
      { kind: 'delayed', reason: 'deposit_not_credited' },
    ]);
    const delayed = open({ status: 'delayed', delayReasons: ['deposit_not_credited'] });
    expect(settlementDeadlineOutcomes(delayed, hours(71))).toEqual([]);
    expect(settlementDeadlineAt(delayed)).toEqual(hours(72));
    expect(settlementDeadlineOutcomes(delayed, hours(72))).toEqual([
      { kind: 'failed', reason: 'deposit_not_credited' },
    ]);
  });

  it('a bank transfer gets 72 hours from its first attempt, failing as rampoff_withdraw_failed', () => {
    const s = reported(open(), 'withdraw_started', hours(10));
    expect(settlementDeadlineAt(s)).toEqual(hours(82));
    expect(settlementDeadlineOutcomes(s, hours(72))).toEqual([]);
    expect(settlementDeadlineOutcomes(s, hours(82))).toEqual([
      { kind: 'failed', reason: 'rampoff_withdraw_failed' },
    ]);
  });

  it('has nothing to check once the settlement is over', () => {
    expect(settlementDeadlineAt(open({ status: 'failed' }))).toBeNull();
    expect(settlementDeadlineOutcomes(open({ status: 'completed' }), hours(100))).toEqual([]);
  });
});

describe('the sandbox settlement feed', () => {
  interface Report extends SettlementReportOf {
    readonly paymentId: string;
  }

  it('hands each delivery to the owner with the reference, a fresh id and the clock time, and rejects when stopped', async () => {
    const feed = new SandboxSettlementFeedOf<Report>({ now: () => hours(3) });
    const got: Report[] = [];
    await feed.start(async (r) => void got.push(r));
    const sent = await feed.deliver({ paymentId: 'pay_1', kind: 'payout_completed' });
    expect(got).toEqual([sent]);
    expect(sent).toMatchObject({ paymentId: 'pay_1', kind: 'payout_completed', reportedAt: hours(3) });
    expect(sent.id).toMatch(/^sbx_/);
    await feed.stop();
    await expect(feed.deliver({ paymentId: 'pay_1', kind: 'payout_completed' })).rejects.toThrow(
      'not started',
    );
  });
});
