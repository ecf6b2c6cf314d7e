import { createHash } from 'node:crypto';
import { conflict, notFound } from '@stablepay/util';

import type {
  ChargeFailureStage,
  ChargeObservation,
  ChargeWritePath,
  SubscriptionCanceller,
  SubscriptionChargeSucceededData,
  SubscriptionCreatedData,
  SubscriptionEvent,
  SubscriptionStatus,
} from './subscription.events';

/**
 * The Subscription aggregate: the service's record of one on-chain SubscriptionManager subscription (SPEC Resources >
 * Subscription, States > Subscription and the paused brake). Chain facts come in through commands (from the subscribe
 * and charge calls' receipts or from the indexer); every command is idempotent because both paths, and redeliveries,
 * report the same fact.
 *
 *   (none) --subscribe confirmed--> active --cancel confirmed--> cancelling --indexer ingests--> cancelled
 *                                   active --indexer ingests a cancel it never saw submitted-----> cancelled
 *
 * `paused` is a brake on `active`, not a status; `flagged` a compliance mark.
 */
export interface SucceededCharge {
  readonly chargeId: string;
  readonly txHash: string;
  readonly amount: bigint;
  readonly quoteHash: string;
}

export interface SubscriptionState {
  readonly created: SubscriptionCreatedData | null;
  readonly subscriber: string;
  readonly cap: bigint;
  readonly budget: bigint;
  /** SPEC `charge_nonce`: the NEXT nonce. One past the highest nonce a SubscriptionCharged log consumed. */
  readonly nextNonce: number;
  /** The window the contract last reported spend for, and that spend (cap and budget rule 3). */
  readonly windowIndex: bigint;
  readonly windowSpent: bigint;
  readonly lastChargedAt: string | null;
  readonly status: SubscriptionStatus;
  readonly cancelledBy: SubscriptionCanceller | null;
  readonly paused: boolean;
  readonly flagged: boolean;
  /** Succeeded charges by the nonce they consumed: a nonce charges at most once, on chain and here. */
  readonly chargesByNonce: ReadonlyMap<number, SucceededCharge>;
  readonly failedChargeIds: ReadonlySet<string>;
  /** Transactions whose cap, budget or migration log is already applied (the indexer may deliver twice). */
  readonly appliedTxs: ReadonlySet<string>;
  /** The subscribe call (API path) reported the first charge, as the writer or after the indexer. */
  readonly firstChargeReportedByApi: boolean;
}

export const initialSubscriptionState = (): SubscriptionState => ({
  created: null,
  subscriber: '',
  cap: 0n,
  budget: 0n,
  nextNonce: 0,
  windowIndex: 0n,
  windowSpent: 0n,
  lastChargedAt: null,
  status: 'active',
  cancelledBy: null,
  paused: false,
  flagged: false,
  chargesByNonce: new Map(),
  failedChargeIds: new Set(),
  appliedTxs: new Set(),
  firstChargeReportedByApi: false,
});

/** On-chain failure names that engage the brake already at simulation (SPEC paused table, first row). */
export const PAUSING_SIMULATION_FAILURES: readonly string[] = [
  'InsufficientBalance',
  'InsufficientAllowance',
];
/** The revert that means "this nonce already charged": the charge landed, whoever submitted it. */
export const NONCE_ALREADY_USED = 'NonceAlreadyUsed';

/**
 * `subc_` id of the succeeded charge with `nonce`: derived from (chain, subscription, nonce), which the API path and
 * the indexer both know, so the id is the same whichever writes first (SPEC Events rule 6) without coordination.
 */
export function succeededChargeId(chain: string, subscriptionId: string, nonce: number): string {
  const digest = createHash('sha256')
    .update(`${chain}|${subscriptionId.toLowerCase()}|${nonce}`)
    .digest('hex');
  return `subc_${digest.slice(0, 26)}`;
}

/** SPEC cap and budget rule 3: floor((now - startedAt) / period_duration), chain time, never last_charged_at. */
export function windowIndexAt(startedAt: bigint, periodDuration: bigint, chainNow: bigint): bigint {
  // A chain-time estimate a little behind the start still belongs to window 0.
  return chainNow <= startedAt ? 0n : (chainNow - startedAt) / periodDuration;
}

export interface BudgetWindowView {
  readonly windowIndex: bigint;
  /** Unix seconds, inclusive start and exclusive end. */
  readonly windowStart: bigint;
  readonly windowEnd: bigint;
  /** SPEC `spent_this_period`: 0 in any window after the one the last reported spend belongs to. */
  readonly spentThisPeriod: bigint;
  /** SPEC cap and budget rule 4: budget - spent_this_period (0 when a lowered budget sits below the spend). */
  readonly remainingBudget: bigint;
}

export function budgetWindow(state: SubscriptionState, chainNow: bigint): BudgetWindowView {
  const created = requireCreated(state);
  return windowView(
    {
      startedAt: BigInt(created.startedAt),
      periodDuration: BigInt(created.periodDuration),
      windowIndex: state.windowIndex,
      windowSpent: state.windowSpent,
      budget: state.budget,
    },
    chainNow,
  );
}

/** The window facts a read model keeps beside the object, so the time-dependent fields can follow chain time. */
export interface WindowFacts {
  readonly startedAt: bigint;
  readonly periodDuration: bigint;
  /** The window the contract last reported spend for, and that spend. */
  readonly windowIndex: bigint;
  readonly windowSpent: bigint;
  readonly budget: bigint;
}

export function windowView(facts: WindowFacts, chainNow: bigint): BudgetWindowView {
  const period = facts.periodDuration;
  const windowIndex = windowIndexAt(facts.startedAt, period, chainNow);
  const windowStart = facts.startedAt + windowIndex * period;
  const spentThisPeriod = windowIndex === facts.windowIndex ? facts.windowSpent : 0n;
  const remainingBudget = spentThisPeriod >= facts.budget ? 0n : facts.budget - spentThisPeriod;
  return { windowIndex, windowStart, windowEnd: windowStart + period, spentThisPeriod, remainingBudget };
}

/** The window facts of a state (what a read model stores beside the object). */
export function windowFacts(state: SubscriptionState): WindowFacts {
  const created = requireCreated(state);
  return {
    startedAt: BigInt(created.startedAt),
    periodDuration: BigInt(created.periodDuration),
    windowIndex: state.windowIndex,
    windowSpent: state.windowSpent,
    budget: state.budget,
  };
}

/**
 * A stored subscription object brought to chain time `chainNow`: `spent_this_period`, `remaining_budget` and
 * `next_charge_at` move with the window (cap and budget rule 3); everything else is the stored object.
 */
export function subscriptionObjectAt(
  object: SubscriptionObject,
  facts: WindowFacts,
  chainNow: bigint,
): SubscriptionObject {
  const w = windowView(facts, chainNow);
  return {
    ...object,
    next_charge_at: object.status === 'active' ? isoFromUnix(w.windowEnd) : null,
    spent_this_period: w.spentThisPeriod.toString(),
    remaining_budget: w.remainingBudget.toString(),
  };
}

/** The contract's window state moves forward only: a later window, or more spend in the same one. */
function laterWindowState(state: SubscriptionState, windowIndex: bigint, windowSpent: bigint) {
  if (
    windowIndex > state.windowIndex ||
    (windowIndex === state.windowIndex && windowSpent > state.windowSpent)
  )
    return { windowIndex, windowSpent };
  return { windowIndex: state.windowIndex, windowSpent: state.windowSpent };
}

export function evolveSubscription(state: SubscriptionState, event: SubscriptionEvent): SubscriptionState {
  switch (event.type) {
    case 'SubscriptionCreated.v1':
      return {
        ...state,
        created: event.data,
        subscriber: event.data.subscriber,
        cap: BigInt(event.data.cap),
        budget: BigInt(event.data.budget),
        appliedTxs: new Set([...state.appliedTxs, event.data.txHash]),
      };
    case 'SubscriptionChargeSucceeded.v1': {
      const d = event.data;
      const charges = new Map(state.chargesByNonce);
      charges.set(d.nonce, {
        chargeId: d.chargeId,
        txHash: d.txHash,
        amount: BigInt(d.amount),
        quoteHash: d.quoteHash,
      });
      const later = state.lastChargedAt === null || Date.parse(d.chargedAt) > Date.parse(state.lastChargedAt);
      return {
        ...state,
        ...laterWindowState(state, BigInt(d.windowIndex), BigInt(d.windowSpent)),
        chargesByNonce: charges,
        nextNonce: Math.max(state.nextNonce, d.nonce + 1),
        lastChargedAt: later ? d.chargedAt : state.lastChargedAt,
        firstChargeReportedByApi: state.firstChargeReportedByApi || (d.nonce === 0 && d.writtenBy === 'api'),
      };
    }
    case 'SubscriptionChargeFailed.v1':
      return { ...state, failedChargeIds: new Set([...state.failedChargeIds, event.data.chargeId]) };
    case 'SubscriptionPaused.v1':
      return { ...state, paused: true };
    case 'SubscriptionUnpaused.v1':
      return { ...state, paused: false };
    case 'SubscriptionCancelConfirmed.v1':
      return { ...state, status: 'cancelling', cancelledBy: event.data.by };
    case 'SubscriptionCancelled.v1':
      return { ...state, status: 'cancelled', cancelledBy: event.data.by };
    case 'SubscriptionCapUpdated.v1':
      return {
        ...state,
        cap: BigInt(event.data.newCap),
        appliedTxs: new Set([...state.appliedTxs, `${event.data.txHash}|cap`]),
      };
    case 'SubscriptionBudgetUpdated.v1':
      return {
        ...state,
        ...laterWindowState(state, BigInt(event.data.windowIndex), BigInt(event.data.windowSpent)),
        budget: BigInt(event.data.newBudget),
        appliedTxs: new Set([...state.appliedTxs, `${event.data.txHash}|budget`]),
      };
    case 'SubscriptionMigrated.v1':
      return {
        ...state,
        subscriber: event.data.newSubscriber,
        appliedTxs: new Set([...state.appliedTxs, `${event.data.txHash}|migration`]),
      };
    case 'SubscriptionFlagged.v1':
      return { ...state, flagged: true };
    case 'SubscriptionFirstChargeReported.v1':
      return { ...state, firstChargeReportedByApi: true };
  }
}

export type SubscriptionCommand =
  | {
      readonly type: 'RecordSubscriptionCreated';
      readonly subscription: SubscriptionCreatedData;
      /** The nonce-0 charge of the same transaction, when the caller has its log (the subscribe call does). */
      readonly firstCharge: ChargeObservation | null;
      readonly writtenBy: ChargeWritePath;
    }
  | {
      readonly type: 'RecordChargeSucceeded';
      readonly charge: ChargeObservation;
      readonly writtenBy: ChargeWritePath;
    }
  | {
      /** Our charge attempt reverted, at simulation or in its receipt. */
      readonly type: 'RecordChargeReverted';
      readonly chargeId: string;
      readonly nonce: number;
      readonly amount: string;
      readonly txHash: string | null;
      readonly failureReason: string;
      readonly stage: ChargeFailureStage;
      /**
       * For NonceAlreadyUsed: the SubscriptionCharged log with that nonce (whoever submitted it). Required then:
       * without it the service cannot tell what landed, and it must never record a failure for it.
       */
      readonly landed: ChargeObservation | null;
      readonly now: Date;
    }
  | {
      /** The merchant cancel (or the hosted page's) transaction was submitted and confirmed. */
      readonly type: 'ConfirmCancel';
      readonly by: SubscriptionCanceller;
      readonly txHash: string;
      readonly now: Date;
    }
  | {
      readonly type: 'RecordCancelled';
      readonly by: SubscriptionCanceller;
      readonly txHash: string;
      readonly cancelledAt: string;
    }
  | {
      readonly type: 'RecordCapUpdated';
      readonly oldCap: string;
      readonly newCap: string;
      readonly txHash: string;
      readonly updatedAt: string;
    }
  | {
      readonly type: 'RecordBudgetUpdated';
      readonly oldBudget: string;
      readonly newBudget: string;
      readonly windowIndex: string;
      readonly windowSpent: string;
      readonly txHash: string;
      readonly updatedAt: string;
    }
  | {
      readonly type: 'RecordMigrated';
      readonly oldSubscriber: string;
      readonly newSubscriber: string;
      readonly newSubscriberBalance: string;
      readonly newSubscriberAllowance: string;
      readonly txHash: string;
      readonly migratedAt: string;
    }
  | { readonly type: 'FlagSubscription'; readonly now: Date };

function requireCreated(state: SubscriptionState): SubscriptionCreatedData {
  if (!state.created) throw notFound('subscription');
  return state.created;
}

function chargeSucceeded(
  state: SubscriptionState,
  created: SubscriptionCreatedData,
  charge: ChargeObservation,
  writtenBy: ChargeWritePath,
  landedByAnotherSubmitter: boolean,
): SubscriptionEvent[] {
  const known = state.chargesByNonce.get(charge.nonce);
  if (known) {
    // Both write paths and redeliveries report the same log: recorded once. The subscribe call reporting the first
    // charge after the indexer is a fact of its own (the ledger backfills the fiat fields from it, fiat rule 3).
    if (known.txHash.toLowerCase() === charge.txHash.toLowerCase()) {
      if (charge.nonce === 0 && writtenBy === 'api' && !state.firstChargeReportedByApi)
        return [
          {
            type: 'SubscriptionFirstChargeReported.v1',
            data: { chargeId: known.chargeId, txHash: known.txHash, reportedAt: charge.chargedAt },
          },
        ];
      return [];
    }
    throw conflict(
      'charge_nonce_conflict',
      `Nonce ${charge.nonce} of subscription ${created.subscriptionId} is recorded with transaction ${known.txHash}, not ${charge.txHash}; a nonce charges once (a reorg must retract the first).`,
    );
  }
  const chargeId = succeededChargeId(created.chain, created.subscriptionId, charge.nonce);
  const data: SubscriptionChargeSucceededData = { chargeId, ...charge, writtenBy, landedByAnotherSubmitter };
  const events: SubscriptionEvent[] = [{ type: 'SubscriptionChargeSucceeded.v1', data }];
  // SPEC paused table: the next successful charge confirmed on chain releases the brake.
  if (state.paused)
    events.push({ type: 'SubscriptionUnpaused.v1', data: { chargeId, unpausedAt: charge.chargedAt } });
  return events;
}

const fold = (state: SubscriptionState, events: readonly SubscriptionEvent[]) =>
  events.reduce(evolveSubscription, state);

/** The state a stream's events fold to. */
export const foldSubscription = (events: readonly SubscriptionEvent[]): SubscriptionState =>
  fold(initialSubscriptionState(), events);

export function decideSubscription(
  command: SubscriptionCommand,
  state: SubscriptionState,
): SubscriptionEvent[] {
  if (command.type === 'RecordSubscriptionCreated') {
    const created: SubscriptionEvent[] = state.created
      ? []
      : [{ type: 'SubscriptionCreated.v1', data: command.subscription }];
    if (!command.firstCharge) return created;
    if (command.firstCharge.nonce !== 0)
      throw conflict('first_charge_nonce', 'The charge of the subscribe transaction carries nonce 0.');
    const after = fold(state, created);
    return [
      ...created,
      ...chargeSucceeded(after, requireCreated(after), command.firstCharge, command.writtenBy, false),
    ];
  }
  const created = requireCreated(state);
  switch (command.type) {
    case 'RecordChargeSucceeded':
      return chargeSucceeded(state, created, command.charge, command.writtenBy, false);
    case 'RecordChargeReverted':
      return decideReverted(state, created, command);
    case 'ConfirmCancel':
      if (state.status !== 'active') return [];
      return [
        {
          type: 'SubscriptionCancelConfirmed.v1',
          data: { by: command.by, txHash: command.txHash, confirmedAt: command.now.toISOString() },
        },
      ];
    case 'RecordCancelled':
      if (state.status === 'cancelled') return [];
      return [
        {
          type: 'SubscriptionCancelled.v1',
          data: { by: command.by, txHash: command.txHash, cancelledAt: command.cancelledAt },
        },
      ];
    case 'RecordCapUpdated': {
      if (state.appliedTxs.has(`${command.txHash}|cap`)) return [];
      const { type: _, ...data } = command;
      return [{ type: 'SubscriptionCapUpdated.v1', data }];
    }
    case 'RecordBudgetUpdated': {
      if (state.appliedTxs.has(`${command.txHash}|budget`)) return [];
      const { type: _, ...data } = command;
      return [{ type: 'SubscriptionBudgetUpdated.v1', data }];
    }
    case 'RecordMigrated': {
      if (state.appliedTxs.has(`${command.txHash}|migration`)) return [];
      const { type: _, ...data } = command;
      return [{ type: 'SubscriptionMigrated.v1', data }];
    }
    case 'FlagSubscription':
      if (state.flagged) return [];
      return [
        {
          type: 'SubscriptionFlagged.v1',
          data: { subscriber: state.subscriber, flaggedAt: command.now.toISOString() },
        },
      ];
  }
}

/**
 * A reverted attempt of ours. NonceAlreadyUsed, or a nonce we already saw charge, means the charge landed (someone
 * else submitted the merchant's signature first, or an earlier attempt of ours did): it is recorded as the success the
 * log shows, never as a failure, and never pauses. Any other name is a real failure (SPEC paused table).
 */
function decideReverted(
  state: SubscriptionState,
  created: SubscriptionCreatedData,
  command: Extract<SubscriptionCommand, { type: 'RecordChargeReverted' }>,
): SubscriptionEvent[] {
  if (state.chargesByNonce.has(command.nonce)) return [];
  if (command.failureReason === NONCE_ALREADY_USED) {
    if (!command.landed || command.landed.nonce !== command.nonce)
      throw conflict(
        'charge_landed_log_missing',
        `Nonce ${command.nonce} is used on chain; read its SubscriptionCharged log and record that charge.`,
      );
    return chargeSucceeded(state, created, command.landed, 'api', true);
  }
  if (state.failedChargeIds.has(command.chargeId)) return [];
  const failedAt = command.now.toISOString();
  const events: SubscriptionEvent[] = [
    {
      type: 'SubscriptionChargeFailed.v1',
      data: {
        chargeId: command.chargeId,
        nonce: command.nonce,
        amount: command.amount,
        txHash: command.txHash,
        failureReason: command.failureReason,
        stage: command.stage,
        failedAt,
      },
    },
  ];
  const brakes = command.stage === 'receipt' || PAUSING_SIMULATION_FAILURES.includes(command.failureReason);
  if (brakes && !state.paused)
    events.push({
      type: 'SubscriptionPaused.v1',
      data: { chargeId: command.chargeId, failureReason: command.failureReason, pausedAt: failedAt },
    });
  return events;
}

/** SPEC Resources > Subscription: the API object, a pure projection of the state at chain time `chainNow`. */
export interface SubscriptionObject {
  readonly object: 'subscription';
  readonly id: string;
  readonly subscription_id: string;
  readonly subscriber: string;
  readonly external_customer_id: string | null;
  readonly asset: string;
  readonly token_symbol: string;
  readonly token_decimals: number;
  readonly chain: string;
  readonly cap_amount: string;
  readonly price: string;
  readonly price_currency: string | null;
  readonly period_duration: number;
  readonly last_charged_at: string | null;
  /** Start of the next window; null once no further charge is eligible (cancelling, cancelled). */
  readonly next_charge_at: string | null;
  readonly charge_nonce: number;
  readonly status: SubscriptionStatus;
  readonly paused: boolean;
  readonly flagged: boolean;
  readonly budget: string;
  readonly spent_this_period: string;
  readonly remaining_budget: string;
  readonly created_at: string;
}

const isoFromUnix = (seconds: bigint) => new Date(Number(seconds) * 1000).toISOString();

export function subscriptionObject(state: SubscriptionState, chainNow: bigint): SubscriptionObject {
  const c = requireCreated(state);
  const w = budgetWindow(state, chainNow);
  return {
    object: 'subscription',
    id: c.subscriptionId,
    subscription_id: c.subscriptionId,
    subscriber: state.subscriber,
    external_customer_id: c.externalCustomerId,
    asset: c.asset,
    token_symbol: c.tokenSymbol,
    token_decimals: c.tokenDecimals,
    chain: c.chain,
    cap_amount: state.cap.toString(),
    price: c.price,
    price_currency: c.priceCurrency,
    period_duration: c.periodDuration,
    last_charged_at: state.lastChargedAt,
    next_charge_at: state.status === 'active' ? isoFromUnix(w.windowEnd) : null,
    charge_nonce: state.nextNonce,
    status: state.status,
    paused: state.paused,
    flagged: state.flagged,
    budget: state.budget.toString(),
    spent_this_period: w.spentThisPeriod.toString(),
    remaining_budget: w.remainingBudget.toString(),
    created_at: c.createdAt,
  };
}

/** The aggregate as plain functions, for handleCommand. */
export const subscriptionDecider = {
  initialState: initialSubscriptionState,
  evolve: evolveSubscription,
  decide: decideSubscription,
};
