import fc from 'fast-check';
import { MaxUint256, id } from 'ethers';
import { applyCharge, budgetWindowAt, type BudgetState } from './budget-window';
import type { SubscriptionManagerEventArgs } from './generated/SubscriptionManager';
import { startTestChain, type TestChain } from './test-support/anvil';
import {
  soon,
  blockTimestamp,
  deployFixture,
  eventIn,
  expectRevert,
  mined,
  signCharge,
  signSubscribe,
  type Fixture,
} from './test-support/fixture';

/**
 * Randomized: the contract's cap/budget/window arithmetic against the TypeScript reference model (budget-window.ts).
 * Each run subscribes with random terms, then attempts random charges at random times (small steps, multi-period
 * jumps, and exact window boundaries +-1 s); every attempt must succeed or fail exactly as the model says, with the
 * same window index and window spend. Set BUDGET_FUZZ_RUNS / BUDGET_FUZZ_SEED to widen or replay.
 */
const RUNS = Number(process.env['BUDGET_FUZZ_RUNS'] ?? 20);
const SEED =
  process.env['BUDGET_FUZZ_SEED'] === undefined ? undefined : Number(process.env['BUDGET_FUZZ_SEED']);

type Step =
  | { readonly kind: 'small'; readonly seconds: number }
  | { readonly kind: 'periods'; readonly permille: number }
  | { readonly kind: 'boundary'; readonly offset: number };

const terms = fc
  .record({
    period: fc.oneof(fc.constant(3600n), fc.bigInt({ min: 3600n, max: 40n * 86_400n })),
    budget: fc.bigInt({ min: 1n, max: 10n ** 12n }),
    capPermille: fc.oneof(fc.constant(1000), fc.integer({ min: 1, max: 1000 })),
    firstPermille: fc.integer({ min: 1, max: 1000 }),
  })
  .map((t) => {
    const cap = (t.budget * BigInt(t.capPermille)) / 1000n || 1n;
    const first = (cap * BigInt(t.firstPermille)) / 1000n || 1n;
    return { period: t.period, budget: t.budget, cap, first };
  });
const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ kind: fc.constant('small' as const), seconds: fc.integer({ min: 1, max: 300 }) }),
  fc.record({ kind: fc.constant('periods' as const), permille: fc.integer({ min: 1, max: 2500 }) }),
  fc.record({ kind: fc.constant('boundary' as const), offset: fc.integer({ min: -2, max: 2 }) }),
);
const attempts = fc.array(fc.record({ step, amountPermilleOfCap: fc.integer({ min: 0, max: 1300 }) }), {
  minLength: 3,
  maxLength: 10,
});

let chain: TestChain;
let f: Fixture;
let clean: string;

beforeAll(async () => {
  chain = await startTestChain(8453);
  f = await deployFixture(chain);
  await mined(f.usdc.connect(f.subscriber).mint(f.subscriber.address, MaxUint256 / 2n));
  await mined(f.usdc.connect(f.subscriber).approve(await f.manager.getAddress(), MaxUint256));
  clean = await chain.snapshot();
});
afterAll(async () => {
  await chain?.stop();
});

function nextTime(now: bigint, s: Step, startedAt: bigint, period: bigint): bigint {
  if (s.kind === 'small') return now + BigInt(s.seconds);
  if (s.kind === 'periods') return now + (period * BigInt(s.permille)) / 1000n + 1n;
  const nextBoundary = startedAt + ((now - startedAt) / period + 1n) * period;
  const t = nextBoundary + BigInt(s.offset);
  return t > now ? t : now + 1n;
}

describe('SubscriptionManager window arithmetic (randomized against the TypeScript model)', () => {
  it('accepts and rejects exactly what the model does, with the same window index and window spend', async () => {
    let run = 0;
    const seen = { succeeded: 0, laterWindow: 0, BudgetExceeded: 0, ChargeAmountExceedsCap: 0 };
    await fc.assert(
      fc.asyncProperty(terms, attempts, async (t, tries) => {
        run += 1;
        await chain.revert(clean);
        clean = await chain.snapshot();
        const manager = await f.manager.getAddress();
        const subscriptionId = id(`fuzz-${run}-${Date.now()}`);
        const auth = {
          subscriptionId,
          subscriber: f.subscriber.address,
          token: await f.usdc.getAddress(),
          cap: t.cap,
          budget: t.budget,
          periodDuration: t.period,
          firstChargeAmount: t.first,
          deadline: await soon(f),
        };
        const sig = await signSubscribe(f.operator, f.chainId, manager, auth);
        const subscribed = await mined(f.manager.connect(f.subscriber).subscribe(auth, sig));
        const startedAt = await blockTimestamp(subscribed);
        let model: BudgetState = {
          startedAt,
          periodDuration: t.period,
          cap: t.cap,
          budget: t.budget,
          windowIndex: 0n,
          windowSpent: t.first,
        };
        let now = startedAt;
        let nonce = 1n;
        for (const a of tries) {
          const at = nextTime(now, a.step, startedAt, t.period);
          const amount = (t.cap * BigInt(a.amountPermilleOfCap)) / 1000n;
          const expected = applyCharge(model, amount, at);
          const quoteHash = id(`q${nonce}`);
          const chargeSig = await signCharge(f.merchantSigner, f.chainId, manager, {
            subscriptionId,
            amount,
            nonce,
            quoteHash,
            deadline: at + 3600n,
          });
          const args = [subscriptionId, amount, nonce, quoteHash, at + 3600n, chargeSig] as const;
          await chain.setNextTimestamp(at);
          if (expected.ok) {
            const receipt = await mined(f.manager.charge(...args, { gasLimit: 500_000 }));
            const ev = eventIn<SubscriptionManagerEventArgs, 'SubscriptionCharged'>(
              receipt,
              f.manager,
              'SubscriptionCharged',
            );
            expect({
              windowIndex: ev.windowIndex,
              windowSpent: ev.windowSpent,
              timestamp: ev.timestamp,
            }).toEqual({
              windowIndex: expected.windowIndex,
              windowSpent: expected.windowSpent,
              timestamp: at,
            });
            model = expected.state;
            now = at;
            seen.succeeded += 1;
            if (expected.windowIndex > 0n) seen.laterWindow += 1;
            nonce += 1n;
            const onChain = await f.manager.budgetState(subscriptionId);
            const w = budgetWindowAt(model, at);
            expect([
              onChain.windowIndex,
              onChain.windowStart,
              onChain.windowEnd,
              onChain.spent,
              onChain.remaining,
            ]).toEqual([w.windowIndex, w.windowStart, w.windowEnd, w.spent, w.remaining]);
          } else {
            await expectRevert(f.manager.charge.staticCall(...args, { blockTag: 'pending' }), expected.error);
            if (expected.error !== 'ZeroAmount') seen[expected.error] += 1;
          }
        }
      }),
      { numRuns: RUNS, ...(SEED === undefined ? {} : { seed: SEED }) },
    );
    // The generator really exercised every branch.
    for (const count of Object.values(seen)) expect(count).toBeGreaterThan(0);
  }, 120_000);
});
