import { createHash } from 'node:crypto';
import { conflict, notFound } from '@stablepay/util';

import type {
  ChargeFailureStage,
  ChargeObservation,
  ChargeWritePath,
  RetractableFact,
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
  /** Block time, ISO. */
  readonly chargedAt: string;
  /** The contract's window state right after this charge. */
  readonly windowIndex: bigint;
  readonly windowSpent: bigint;
}

/** A subscriber-side change a log recorded, kept in order so a reorg can take one back out. */
export interface CapUpdate {
  readonly txHash: string;
  readonly newCap: bigint;
}
export interface BudgetUpdate {
  readonly txHash: string;
  readonly newBudget: bigint;
  readonly windowIndex: bigint;
  readonly windowSpent: bigint;
}
export interface Migration {
  readonly txHash: string;
  readonly newSubscriber: string;
}

/**
 * One fact of the dunning brake, in stream order: engaged by a failed charge, released by the succeeded charge named.
 * `paused` is derived from them, so a reorg that takes the releasing charge out engages the brake again.
 */
export type BrakeFact = { readonly engaged: true } | { readonly engaged: false; readonly chargeId: string };

/**
 * One fact about migration proposals, in stream order: a proposal (the zero address withdraws), a void by a change of
 * terms, an accepted migration. The pending proposal is derived from those still on chain, so a reorged void or
 * acceptance brings the proposal back and a reorged proposal takes it away.
 */
export type MigrationProposalFact =
  | { readonly kind: 'proposed'; readonly proposedSubscriber: string; readonly txHash: string }
  | { readonly kind: 'voided'; readonly txHash: string }
  | { readonly kind: 'accepted'; readonly txHash: string };

/** A broadcast charge of ours whose receipt has not been seen (SubscriptionChargeSubmitted.v1). */
export interface PendingCharge {
  readonly txHash: string;
  readonly amount: bigint;
  readonly quoteHash: string;
}

export interface SubscriptionState {
  readonly created: SubscriptionCreatedData | null;
  /** A reorg orphaned the subscribe transaction (and nothing has re-included it): no subscription on chain. */
  readonly creationRetracted: boolean;
  /** Derived from `created` and `migrations`: the wallet as of the latest recorded migration. */
  readonly subscriber: string;
  /** Derived from `created` and `capUpdates`. */
  readonly cap: bigint;
  /** Derived from `created` and `budgetUpdates`. */
  readonly budget: bigint;
  /** SPEC `charge_nonce`: the NEXT nonce. One past the highest nonce a SubscriptionCharged log consumed. */
  readonly nextNonce: number;
  /** The window the contract last reported spend for, and that spend (cap and budget rule 3). */
  readonly windowIndex: bigint;
  readonly windowSpent: bigint;
  readonly lastChargedAt: string | null;
  readonly status: SubscriptionStatus;
  readonly cancelledBy: SubscriptionCanceller | null;
  /** The cancel transaction behind `cancelling`/`cancelled` (a reorg of it takes the status back). */
  readonly cancelTx: string | null;
  /** Derived from `brakes`: engaged by the latest brake fact, unless the charge that released it is no longer recorded. */
  readonly paused: boolean;
  readonly brakes: readonly BrakeFact[];
  readonly flagged: boolean;
  /** Succeeded charges by the nonce they consumed: a nonce charges at most once, on chain and here. */
  readonly chargesByNonce: ReadonlyMap<number, SucceededCharge>;
  readonly failedChargeIds: ReadonlySet<string>;
  /** Broadcast charges waiting for their receipt, by nonce: a retry waits for them, never sends another. */
  readonly pendingCharges: ReadonlyMap<number, PendingCharge>;
  readonly capUpdates: readonly CapUpdate[];
  readonly budgetUpdates: readonly BudgetUpdate[];
  readonly migrations: readonly Migration[];
  /** Derived from `migrationFacts`: the subscriber's proposal of a new wallet awaiting its acceptance, if any. */
  readonly pendingMigration: { readonly proposedSubscriber: string; readonly txHash: string } | null;
  readonly migrationFacts: readonly MigrationProposalFact[];
  /** The subscribe call (API path) reported the first charge, as the writer or after the indexer. */
  readonly firstChargeReportedByApi: boolean;
  /** Transactions of charges already announced as paying a replaced settlement address (announced once each). */
  readonly replacedSettlementPayments: ReadonlySet<string>;
}

export const initialSubscriptionState = (): SubscriptionState => ({
  created: null,
  creationRetracted: false,
  subscriber: '',
  cap: 0n,
  budget: 0n,
  nextNonce: 0,
  windowIndex: 0n,
  windowSpent: 0n,
  lastChargedAt: null,
  status: 'active',
  cancelledBy: null,
  cancelTx: null,
  paused: false,
  brakes: [],
  flagged: false,
  chargesByNonce: new Map(),
  failedChargeIds: new Set(),
  pendingCharges: new Map(),
  capUpdates: [],
  budgetUpdates: [],
  migrations: [],
  pendingMigration: null,
  migrationFacts: [],
  firstChargeReportedByApi: false,
  replacedSettlementPayments: new Set(),
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
const laterWindow = (
  a: { windowIndex: bigint; windowSpent: bigint },
  b: { windowIndex: bigint; windowSpent: bigint },
) =>
  b.windowIndex > a.windowIndex || (b.windowIndex === a.windowIndex && b.windowSpent > a.windowSpent) ? b : a;

/**
 * The values that follow from the recorded facts: cap, budget and subscriber from the latest change still on chain,
 * the window state from the latest report (charges and budget updates), the next nonce and last charge from the
 * charges. Recomputed after every fact, so a reorg that takes a fact out leaves the state as if it never happened.
 */
function derive(state: SubscriptionState): SubscriptionState {
  const created = state.created;
  if (!created) return state;
  const charges = [...state.chargesByNonce.entries()];
  let window = { windowIndex: 0n, windowSpent: 0n };
  for (const [, c] of charges) window = laterWindow(window, c);
  for (const b of state.budgetUpdates) window = laterWindow(window, b);
  let lastChargedAt: string | null = null;
  for (const [, c] of charges)
    if (lastChargedAt === null || Date.parse(c.chargedAt) > Date.parse(lastChargedAt))
      lastChargedAt = c.chargedAt;
  // SPEC paused table: a release counts only while the successful charge behind it is on chain.
  const recordedChargeIds = new Set(charges.map(([, c]) => c.chargeId));
  const paused = state.brakes.reduce(
    (engaged, b) => (b.engaged ? true : recordedChargeIds.has(b.chargeId) ? false : engaged),
    false,
  );
  const pendingMigration = state.migrationFacts.reduce<SubscriptionState['pendingMigration']>(
    (pending, f) =>
      f.kind !== 'proposed' || ZERO_ADDRESS.test(f.proposedSubscriber)
        ? null
        : { proposedSubscriber: f.proposedSubscriber, txHash: f.txHash },
    null,
  );
  return {
    ...state,
    paused,
    pendingMigration,
    subscriber: state.migrations.at(-1)?.newSubscriber ?? created.subscriber,
    cap: state.capUpdates.at(-1)?.newCap ?? BigInt(created.cap),
    budget: state.budgetUpdates.at(-1)?.newBudget ?? BigInt(created.budget),
    windowIndex: window.windowIndex,
    windowSpent: window.windowSpent,
    nextNonce: charges.reduce((next, [nonce]) => Math.max(next, nonce + 1), 0),
    lastChargedAt,
  };
}

const sameTx = (a: string | null, b: string) => a !== null && a.toLowerCase() === b.toLowerCase();
const ZERO_ADDRESS = /^0x0{40}$/i;

export function evolveSubscription(state: SubscriptionState, event: SubscriptionEvent): SubscriptionState {
  return derive(applyEvent(state, event));
}

function applyEvent(state: SubscriptionState, event: SubscriptionEvent): SubscriptionState {
  switch (event.type) {
    case 'SubscriptionCreated.v1':
      return { ...state, created: event.data, creationRetracted: false };
    case 'SubscriptionChargeSucceeded.v1': {
      const d = event.data;
      const charges = new Map(state.chargesByNonce);
      charges.set(d.nonce, {
        chargeId: d.chargeId,
        txHash: d.txHash,
        amount: BigInt(d.amount),
        quoteHash: d.quoteHash,
        chargedAt: d.chargedAt,
        windowIndex: BigInt(d.windowIndex),
        windowSpent: BigInt(d.windowSpent),
      });
      const pending = new Map(state.pendingCharges);
      pending.delete(d.nonce);
      return {
        ...state,
        chargesByNonce: charges,
        pendingCharges: pending,
        firstChargeReportedByApi: state.firstChargeReportedByApi || (d.nonce === 0 && d.writtenBy === 'api'),
      };
    }
    case 'SubscriptionChargeSubmitted.v1': {
      const pending = new Map(state.pendingCharges);
      pending.set(event.data.nonce, {
        txHash: event.data.txHash,
        amount: BigInt(event.data.amount),
        quoteHash: event.data.quoteHash,
      });
      return { ...state, pendingCharges: pending };
    }
    case 'SubscriptionChargeRetracted.v1': {
      const charges = new Map(state.chargesByNonce);
      charges.delete(event.data.nonce);
      return { ...state, chargesByNonce: charges };
    }
    case 'SubscriptionChargeFailed.v1': {
      // The pending transaction of that nonce reverted: no longer pending.
      const pending = new Map(state.pendingCharges);
      if (
        event.data.txHash !== null &&
        sameTx(pending.get(event.data.nonce)?.txHash ?? null, event.data.txHash)
      )
        pending.delete(event.data.nonce);
      return {
        ...state,
        failedChargeIds: new Set([...state.failedChargeIds, event.data.chargeId]),
        pendingCharges: pending,
      };
    }
    case 'SubscriptionPaused.v1':
      return { ...state, brakes: [...state.brakes, { engaged: true }] };
    case 'SubscriptionUnpaused.v1':
      return { ...state, brakes: [...state.brakes, { engaged: false, chargeId: event.data.chargeId }] };
    case 'SubscriptionCancelConfirmed.v1':
      return { ...state, status: 'cancelling', cancelledBy: event.data.by, cancelTx: event.data.txHash };
    case 'SubscriptionCancelled.v1':
      return { ...state, status: 'cancelled', cancelledBy: event.data.by, cancelTx: event.data.txHash };
    case 'SubscriptionCapUpdated.v1':
      return {
        ...state,
        capUpdates: [...state.capUpdates, { txHash: event.data.txHash, newCap: BigInt(event.data.newCap) }],
      };
    case 'SubscriptionBudgetUpdated.v1':
      return {
        ...state,
        budgetUpdates: [
          ...state.budgetUpdates,
          {
            txHash: event.data.txHash,
            newBudget: BigInt(event.data.newBudget),
            windowIndex: BigInt(event.data.windowIndex),
            windowSpent: BigInt(event.data.windowSpent),
          },
        ],
      };
    case 'SubscriptionMigrated.v1':
      return {
        ...state,
        migrations: [
          ...state.migrations,
          { txHash: event.data.txHash, newSubscriber: event.data.newSubscriber },
        ],
        migrationFacts: [...state.migrationFacts, { kind: 'accepted', txHash: event.data.txHash }],
      };
    case 'SubscriptionMigrationProposed.v1':
      return {
        ...state,
        migrationFacts: [
          ...state.migrationFacts,
          {
            kind: 'proposed',
            proposedSubscriber: event.data.proposedSubscriber,
            txHash: event.data.txHash,
          },
        ],
      };
    case 'SubscriptionMigrationVoided.v1':
      return {
        ...state,
        migrationFacts: [...state.migrationFacts, { kind: 'voided', txHash: event.data.txHash }],
      };
    case 'SubscriptionFactRetracted.v1':
      return retractFact(state, event.data.fact, event.data.txHash);
    case 'SubscriptionFlagged.v1':
      return { ...state, flagged: true };
    case 'SubscriptionFirstChargeReported.v1':
      return { ...state, firstChargeReportedByApi: true };
    case 'SubscriptionChargePaidReplacedSettlement.v1':
      return {
        ...state,
        replacedSettlementPayments: new Set([
          ...state.replacedSettlementPayments,
          event.data.txHash.toLowerCase(),
        ]),
      };
  }
}

function retractFact(state: SubscriptionState, fact: RetractableFact, txHash: string): SubscriptionState {
  const other = <T extends { txHash: string }>(list: readonly T[]) =>
    list.filter((x) => !sameTx(x.txHash, txHash));
  const otherMigrationFacts = (kind: MigrationProposalFact['kind']) =>
    state.migrationFacts.filter((f) => f.kind !== kind || !sameTx(f.txHash, txHash));
  switch (fact) {
    case 'created':
      return { ...state, creationRetracted: true };
    case 'cancelled':
      // The cancel transaction is gone from the chain: the subscription is active there again.
      return { ...state, status: 'active', cancelledBy: null, cancelTx: null };
    case 'cap_updated':
      return { ...state, capUpdates: other(state.capUpdates) };
    case 'budget_updated':
      return { ...state, budgetUpdates: other(state.budgetUpdates) };
    case 'migrated':
      return {
        ...state,
        migrations: other(state.migrations),
        migrationFacts: otherMigrationFacts('accepted'),
      };
    case 'migration_proposed':
      return { ...state, migrationFacts: otherMigrationFacts('proposed') };
    case 'migration_voided':
      return { ...state, migrationFacts: otherMigrationFacts('voided') };
  }
}

/** Whether the fact a retraction names is recorded in the state with that transaction (else nothing to undo). */
function factRecorded(state: SubscriptionState, fact: RetractableFact, txHash: string): boolean {
  switch (fact) {
    case 'created':
      return state.created !== null && !state.creationRetracted && sameTx(state.created.txHash, txHash);
    case 'cancelled':
      return state.status !== 'active' && sameTx(state.cancelTx, txHash);
    case 'cap_updated':
      return state.capUpdates.some((u) => sameTx(u.txHash, txHash));
    case 'budget_updated':
      return state.budgetUpdates.some((u) => sameTx(u.txHash, txHash));
    case 'migrated':
      return state.migrations.some((u) => sameTx(u.txHash, txHash));
    case 'migration_proposed':
      return state.migrationFacts.some((f) => f.kind === 'proposed' && sameTx(f.txHash, txHash));
    case 'migration_voided':
      return state.migrationFacts.some((f) => f.kind === 'voided' && sameTx(f.txHash, txHash));
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
      /** The fiat side of the quote the charge redeemed (the charge call's); absent or null when it had none. */
      readonly quotedFiat?: QuotedFiat | null;
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
      /** The fiat side of the quote the attempt redeemed: recorded with the landed charge (the same signature). */
      readonly quotedFiat?: QuotedFiat | null;
      /**
       * The quoteHash the attempt signed. With it, a landed log of another amount or quoteHash is another signature
       * of the nonce, not this charge (absent: not compared, as before it was sent).
       */
      readonly quoteHash?: string;
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
  | { readonly type: 'FlagSubscription'; readonly now: Date }
  | {
      /** The SubscriptionCharged log of a recorded charge names another payee than the settings' settlement address. */
      readonly type: 'RecordChargePaidReplacedSettlement';
      readonly nonce: number;
      readonly txHash: string;
      readonly paidTo: string;
      readonly settlementAddress: string;
      /** When the settings took `settlementAddress` (ISO): only a charge after it paid a replaced address. */
      readonly settlementChangedAt: string;
      readonly now: Date;
    }
  | {
      readonly type: 'RecordMigrationProposed' | 'RecordMigrationVoided';
      readonly proposedSubscriber: string;
      readonly txHash: string;
      /** Block time, ISO. */
      readonly at: string;
    }
  | {
      /** Our charge transaction was broadcast; its receipt did not arrive in time. */
      readonly type: 'RecordChargeSubmitted';
      readonly nonce: number;
      readonly amount: string;
      readonly quoteHash: string;
      readonly txHash: string;
      readonly now: Date;
    }
  | {
      /** A reorg orphaned the block of a SubscriptionCharged log (the indexer retracted its observation). */
      readonly type: 'RetractCharge';
      readonly nonce: number;
      readonly txHash: string;
      readonly now: Date;
    }
  | {
      /** A reorg orphaned the block of a non-charge log. */
      readonly type: 'RetractFact';
      readonly fact: RetractableFact;
      readonly txHash: string;
      readonly now: Date;
    };

function requireCreated(state: SubscriptionState): SubscriptionCreatedData {
  if (!state.created) throw notFound('subscription');
  return state.created;
}

/** The fiat side of a redeemed charge quote: the minor units it converted and their currency. */
export interface QuotedFiat {
  readonly amount: string;
  readonly currency: string;
  /** The quote's hash: the landed log must carry it, or the charge redeemed another quote (or none). */
  readonly quoteHash: string;
}

/**
 * What a fiat-priced plan's charge is settled at: the fiat amount its quote converted (an ad-hoc `fiat_amount` of
 * metered usage or an add-on, else the plan price), when that quote was in the plan's currency. Null otherwise (no
 * quote, a token-priced plan): the ledger then settles at the plan price, as it always did. The charge that landed
 * must have signed that quote's hash: a charge found landed by another submitter may be another signature of the
 * same nonce (another quote, a smaller amount), whose payout the requested quote's fiat amount would overstate.
 */
export function quotedFiatAmountFor(
  created: Pick<SubscriptionCreatedData, 'priceCurrency'>,
  quotedFiat: QuotedFiat | null | undefined,
  chargeQuoteHash: string,
): string | null {
  if (!quotedFiat || created.priceCurrency === null || quotedFiat.currency !== created.priceCurrency)
    return null;
  if (quotedFiat.quoteHash.toLowerCase() !== chargeQuoteHash.toLowerCase()) return null;
  return quotedFiat.amount;
}

function chargeSucceeded(
  state: SubscriptionState,
  created: SubscriptionCreatedData,
  charge: ChargeObservation,
  writtenBy: ChargeWritePath,
  landedByAnotherSubmitter: boolean,
  quotedFiat: QuotedFiat | null = null,
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
  const quotedFiatAmount = quotedFiatAmountFor(created, quotedFiat, charge.quoteHash);
  const data: SubscriptionChargeSucceededData = {
    chargeId,
    ...charge,
    writtenBy,
    landedByAnotherSubmitter,
    ...(quotedFiatAmount !== null ? { quotedFiatAmount } : {}),
  };
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
    // A subscribe transaction re-included after a reorg took it out is recorded again.
    const created: SubscriptionEvent[] =
      state.created && !state.creationRetracted
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
      return chargeSucceeded(state, created, command.charge, command.writtenBy, false, command.quotedFiat);
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
      if (factRecorded(state, 'cap_updated', command.txHash)) return [];
      const { type: _, ...data } = command;
      return [{ type: 'SubscriptionCapUpdated.v1', data }];
    }
    case 'RecordBudgetUpdated': {
      if (factRecorded(state, 'budget_updated', command.txHash)) return [];
      const { type: _, ...data } = command;
      return [{ type: 'SubscriptionBudgetUpdated.v1', data }];
    }
    case 'RecordMigrated': {
      if (factRecorded(state, 'migrated', command.txHash)) return [];
      const { type: _, ...data } = command;
      return [{ type: 'SubscriptionMigrated.v1', data }];
    }
    case 'RecordChargePaidReplacedSettlement': {
      const charge = state.chargesByNonce.get(command.nonce);
      const txHash = command.txHash.toLowerCase();
      // Only about a charge recorded with that transaction, once (both write paths report the same log).
      if (charge?.txHash.toLowerCase() !== txHash || state.replacedSettlementPayments.has(txHash)) return [];
      // The settings may have changed since the charge (the log read late: after the confirmation depth, a re-scan):
      // a charge whose block time is not after the change paid what the merchant had then: nothing was replaced.
      if (
        command.paidTo.toLowerCase() === command.settlementAddress.toLowerCase() ||
        Date.parse(command.settlementChangedAt) >= Date.parse(charge.chargedAt)
      )
        return [];
      return [
        {
          type: 'SubscriptionChargePaidReplacedSettlement.v1',
          data: {
            chargeId: charge.chargeId,
            nonce: command.nonce,
            txHash: charge.txHash,
            paidTo: command.paidTo,
            settlementAddress: command.settlementAddress,
            recordedAt: command.now.toISOString(),
          },
        },
      ];
    }
    case 'FlagSubscription':
      if (state.flagged) return [];
      return [
        {
          type: 'SubscriptionFlagged.v1',
          data: { subscriber: state.subscriber, flaggedAt: command.now.toISOString() },
        },
      ];
    case 'RecordMigrationProposed':
      if (factRecorded(state, 'migration_proposed', command.txHash)) return [];
      return [
        {
          type: 'SubscriptionMigrationProposed.v1',
          data: {
            proposedSubscriber: command.proposedSubscriber,
            txHash: command.txHash,
            proposedAt: command.at,
          },
        },
      ];
    case 'RecordMigrationVoided':
      // A void of a proposal already gone (voided, accepted, withdrawn, or a redelivery) says nothing new.
      if (state.pendingMigration === null) return [];
      return [
        {
          type: 'SubscriptionMigrationVoided.v1',
          data: {
            proposedSubscriber: command.proposedSubscriber,
            txHash: command.txHash,
            voidedAt: command.at,
          },
        },
      ];
    case 'RecordChargeSubmitted': {
      if (state.chargesByNonce.has(command.nonce)) return [];
      if (sameTx(state.pendingCharges.get(command.nonce)?.txHash ?? null, command.txHash)) return [];
      return [
        {
          type: 'SubscriptionChargeSubmitted.v1',
          data: {
            nonce: command.nonce,
            amount: command.amount,
            quoteHash: command.quoteHash,
            txHash: command.txHash,
            submittedAt: command.now.toISOString(),
          },
        },
      ];
    }
    case 'RetractCharge': {
      // Only the charge of that transaction is undone: a nonce already charged again elsewhere stays.
      const known = state.chargesByNonce.get(command.nonce);
      if (!known || !sameTx(known.txHash, command.txHash)) return [];
      return [
        {
          type: 'SubscriptionChargeRetracted.v1',
          data: {
            chargeId: known.chargeId,
            nonce: command.nonce,
            txHash: known.txHash,
            retractedAt: command.now.toISOString(),
          },
        },
      ];
    }
    case 'RetractFact':
      if (!factRecorded(state, command.fact, command.txHash)) return [];
      return [
        {
          type: 'SubscriptionFactRetracted.v1',
          data: { fact: command.fact, txHash: command.txHash, retractedAt: command.now.toISOString() },
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
    // Another signature of the nonce (other amount or quote) landed: it is not the charge asked for, and recording it
    // here would settle it at this request's quote (or the plan price) whatever it charged. The preflight's answer
    // for a nonce charged on other terms; the indexer records the charge that landed.
    const landed = command.landed;
    if (
      command.quoteHash !== undefined &&
      (BigInt(landed.amount) !== BigInt(command.amount) ||
        landed.quoteHash.toLowerCase() !== command.quoteHash.toLowerCase())
    )
      throw conflict(
        'nonce_already_used',
        `Nonce ${command.nonce} was charged ${landed.amount} by transaction ${landed.txHash} under another signature (amount or quote); the next nonce is ${command.nonce + 1}.`,
        'nonce',
      );
    return chargeSucceeded(state, created, landed, 'api', true, command.quotedFiat);
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

/**
 * The status the API shows: a subscription whose subscribe transaction a reorg took out exists on no chain, so no
 * further charge is eligible; it shows `cancelled` until the transaction is re-included (docs/subscriptions.md, Reorgs).
 */
export const shownStatus = (state: SubscriptionState): SubscriptionStatus =>
  state.creationRetracted ? 'cancelled' : state.status;

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
    next_charge_at: shownStatus(state) === 'active' ? isoFromUnix(w.windowEnd) : null,
    charge_nonce: state.nextNonce,
    status: shownStatus(state),
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
