import { SANDBOX_PAYOUT_LATE, SANDBOX_PAYOUT_NEVER_CREDITED, SandboxPayoutSteps } from './sandbox-payouts';

const START = new Date('2026-11-01T00:00:00.000Z');
const after = (ms: number) => new Date(START.getTime() + ms);
const DELAY = 10_000;

describe('sandbox payout steps', () => {
  it('hands out each step once its delays have passed, once, with report ids derived from the reference and step', () => {
    const steps = new SandboxPayoutSteps();
    expect(steps.due('pay_1', START, SANDBOX_PAYOUT_LATE, after(DELAY - 1), DELAY)).toEqual([]);
    const first = steps.due('pay_1', START, SANDBOX_PAYOUT_LATE, after(DELAY), DELAY);
    expect(first.map((s) => s.reports)).toEqual([
      [
        { id: 'sbx_pay_1_0_0', kind: 'deposit_credited', reportedAt: after(DELAY) },
        { id: 'sbx_pay_1_0_1', kind: 'withdraw_started', reportedAt: after(DELAY) },
        { id: 'sbx_pay_1_0_2', kind: 'withdraw_failed', reportedAt: after(DELAY) },
      ],
    ]);
    first[0]?.sent();
    expect(steps.due('pay_1', START, SANDBOX_PAYOUT_LATE, after(DELAY + 1), DELAY)).toEqual([]);
    const last = steps.due('pay_1', START, SANDBOX_PAYOUT_LATE, after(2 * DELAY), DELAY);
    expect(last.map((s) => s.reports.map((r) => r.kind))).toEqual([['payout_completed']]);
  });

  it('a step not reported sent is handed out again; a never-credited amount has no step', () => {
    const steps = new SandboxPayoutSteps();
    expect(steps.due('subc_1', START, '150000', after(DELAY), DELAY)).toHaveLength(1);
    expect(steps.due('subc_1', START, '150000', after(DELAY), DELAY)).toHaveLength(1);
    expect(steps.due('subc_2', START, SANDBOX_PAYOUT_NEVER_CREDITED, after(100 * DELAY), DELAY)).toEqual([]);
  });
});
