/**
 * The SubscriptionManager's cap and budget arithmetic as a pure TypeScript model: the reference the contract is
 * property-tested against, and what API preflight can use to predict `amount_exceeds_cap` / `budget_exceeded`
 * from the last observed on-chain state.
 *
 * Windows are tumbling and anchored at the immutable start: window = floor((now - startedAt) / periodDuration).
 * windowSpent belongs to windowIndex; in any later window the spend starts again from 0.
 */
export interface BudgetTerms {
  readonly startedAt: bigint;
  readonly periodDuration: bigint;
  readonly cap: bigint;
  readonly budget: bigint;
}

export interface BudgetState extends BudgetTerms {
  /** The window `windowSpent` belongs to. */
  readonly windowIndex: bigint;
  readonly windowSpent: bigint;
}

export interface BudgetWindow {
  readonly windowIndex: bigint;
  /** Inclusive start and exclusive end, unix seconds. */
  readonly windowStart: bigint;
  readonly windowEnd: bigint;
  readonly spent: bigint;
  readonly remaining: bigint;
}

export function windowIndexAt(startedAt: bigint, periodDuration: bigint, now: bigint): bigint {
  if (periodDuration <= 0n) throw new RangeError('periodDuration must be positive');
  if (now < startedAt) throw new RangeError('now is before the subscription start');
  return (now - startedAt) / periodDuration;
}

/** The window at `now`, as SubscriptionManager.budgetState reports it. */
export function budgetWindowAt(state: BudgetState, now: bigint): BudgetWindow {
  const windowIndex = windowIndexAt(state.startedAt, state.periodDuration, now);
  const windowStart = state.startedAt + windowIndex * state.periodDuration;
  const spent = windowIndex === state.windowIndex ? state.windowSpent : 0n;
  const remaining = spent >= state.budget ? 0n : state.budget - spent;
  return { windowIndex, windowStart, windowEnd: windowStart + state.periodDuration, spent, remaining };
}

export type ChargeOutcome =
  | {
      readonly ok: true;
      readonly state: BudgetState;
      readonly windowIndex: bigint;
      readonly windowSpent: bigint;
    }
  | { readonly ok: false; readonly error: 'ZeroAmount' | 'ChargeAmountExceedsCap' | 'BudgetExceeded' };

/** Applies one charge of `amount` at `now`, in the contract's order of checks (zero, cap, budget). */
export function applyCharge(state: BudgetState, amount: bigint, now: bigint): ChargeOutcome {
  if (amount === 0n) return { ok: false, error: 'ZeroAmount' };
  if (amount > state.cap) return { ok: false, error: 'ChargeAmountExceedsCap' };
  const w = budgetWindowAt(state, now);
  if (w.spent > state.budget || amount > state.budget - w.spent)
    return { ok: false, error: 'BudgetExceeded' };
  const windowSpent = w.spent + amount;
  return {
    ok: true,
    state: { ...state, windowIndex: w.windowIndex, windowSpent },
    windowIndex: w.windowIndex,
    windowSpent,
  };
}
