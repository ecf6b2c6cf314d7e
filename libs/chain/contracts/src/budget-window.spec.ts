import fc from 'fast-check';
import { applyCharge, budgetWindowAt, windowIndexAt, type BudgetState } from './budget-window';

interface Attempt {
  readonly advance: bigint;
  readonly amount: bigint;
}

interface Scenario {
  readonly period: bigint;
  readonly budget: bigint;
  readonly cap: bigint;
  readonly startedAt: bigint;
  readonly attempts: readonly Attempt[];
}

const scenario: fc.Arbitrary<Scenario> = fc
  .record({
    period: fc.bigInt({ min: 3600n, max: 90n * 86_400n }),
    budget: fc.bigInt({ min: 1n, max: 10n ** 15n }),
    capRatio: fc.integer({ min: 1, max: 1000 }),
  })
  .chain(({ period, budget, capRatio }) => {
    const cap = (budget * BigInt(capRatio)) / 1000n || 1n;
    const attempt: fc.Arbitrary<Attempt> = fc.record({
      advance: fc.oneof(fc.bigInt({ min: 1n, max: 120n }), fc.bigInt({ min: 1n, max: 3n * period })),
      amount: fc.bigInt({ min: 0n, max: cap + cap / 5n + 1n }),
    });
    return fc.record({
      period: fc.constant(period),
      budget: fc.constant(budget),
      cap: fc.constant(cap),
      startedAt: fc.bigInt({ min: 1_700_000_000n, max: 1_800_000_000n }),
      attempts: fc.array(attempt, { minLength: 1, maxLength: 40 }),
    });
  });

function run(s: Scenario): { state: BudgetState; accepted: { at: bigint; amount: bigint }[] } {
  let state: BudgetState = {
    startedAt: s.startedAt,
    periodDuration: s.period,
    cap: s.cap,
    budget: s.budget,
    windowIndex: 0n,
    windowSpent: 0n,
  };
  const accepted: { at: bigint; amount: bigint }[] = [];
  let now = s.startedAt;
  for (const a of s.attempts) {
    now += a.advance;
    const outcome = applyCharge(state, a.amount, now);
    if (outcome.ok) {
      state = outcome.state;
      accepted.push({ at: now, amount: a.amount });
    }
  }
  return { state, accepted };
}

describe('budget window model', () => {
  it('never lets the charges inside one window exceed the budget, nor any charge exceed the cap', () => {
    fc.assert(
      fc.property(scenario, (s) => {
        const { accepted } = run(s);
        const perWindow = new Map<bigint, bigint>();
        for (const c of accepted) {
          expect(c.amount).toBeLessThanOrEqual(s.cap);
          const w = windowIndexAt(s.startedAt, s.period, c.at);
          perWindow.set(w, (perWindow.get(w) ?? 0n) + c.amount);
        }
        for (const total of perWindow.values()) expect(total).toBeLessThanOrEqual(s.budget);
      }),
      { numRuns: 500 },
    );
  });

  it('never lets any span of one period length take more than 2 x budget', () => {
    fc.assert(
      fc.property(scenario, (s) => {
        const { accepted } = run(s);
        for (const end of accepted) {
          const inSpan = accepted.filter((c) => c.at > end.at - s.period && c.at <= end.at);
          const total = inSpan.reduce((sum, c) => sum + c.amount, 0n);
          expect(total).toBeLessThanOrEqual(2n * s.budget);
        }
      }),
      { numRuns: 500 },
    );
  });

  it('anchors the window at the start, whatever was charged before', () => {
    const state: BudgetState = {
      startedAt: 1000n,
      periodDuration: 3600n,
      cap: 10n,
      budget: 10n,
      windowIndex: 0n,
      windowSpent: 10n,
    };
    expect(budgetWindowAt(state, 1000n + 3599n)).toMatchObject({
      windowIndex: 0n,
      spent: 10n,
      remaining: 0n,
    });
    expect(budgetWindowAt(state, 1000n + 3600n)).toEqual({
      windowIndex: 1n,
      windowStart: 4600n,
      windowEnd: 8200n,
      spent: 0n,
      remaining: 10n,
    });
    expect(applyCharge(state, 11n, 5000n)).toEqual({ ok: false, error: 'ChargeAmountExceedsCap' });
    expect(applyCharge(state, 1n, 4599n)).toEqual({ ok: false, error: 'BudgetExceeded' });
    expect(applyCharge(state, 0n, 4599n)).toEqual({ ok: false, error: 'ZeroAmount' });
  });
});
