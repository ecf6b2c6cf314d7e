import {
  evolveProviderProgress,
  type FiatSettlement,
  initialProviderProgress,
  isSettlementOpen,
  settlementDeadlineAt,
  settlementDeadlineOutcomes,
  type SettlementOutcome,
  settlementReportOutcomes,
} from '@stablepay/fiat-settlement';
import { cannotProcess, conflict, notFound, validationError } from '@stablepay/util';
import type {
  AcceptedAsset,
  DeployHoldReason,
  NonFundingReason,
  ObservedTransfer,
  PaymentCreated,
  PaymentEvent,
  PaymentMethod,
  RecoverableReason,
  SettlementFailureReason,
  SettlementReportKind,
} from './payment.events';
import {
  CHECKOUT_LIMITS as LIMITS,
  type SupportedStablecoin,
  parseCurrency,
  parseMetadata,
  parseMethod,
  parseOrderAmount,
  parseRedirectUrl,
  parseSeconds,
  resolveAcceptedAssets,
} from './rules';

/**
 * The Payment aggregate (one per checkout): SPEC Resources > Payment object, States > Payment, Events > Payment
 * events. A pure decider: `decidePayment(command, state)` -> facts, `evolvePayment(state, fact)` -> state; every
 * command carries `now` (no clock here) and nothing here does I/O.
 *
 *   pending --(funding confirmed >= token amount)--> pending + deposit_confirmed
 *           --(payers screened clear)--> deploy requested
 *           --(deployed, DIRECT)--> settled          --(surplus)--> recoverable (over_deposit) --recover--> settled
 *           --(deployed, TWO_STEP)--> escrow_confirmed --capture--> settled | --refund/reclaim--> refunded
 *   pending --cancel--> cancelled;  pending --expires_at--> expired (--funds--> recoverable (abandoned))
 *   any paid state --confirmed funding lost to a reorg--> failed (deposit_lost_to_reorg)
 *   settled (fiat) --settlement_failed--> failed;   any --sanctions match--> flagged (final)
 *
 * A fiat-settled merchant's payment, once settled (DIRECT deployed, or TWO_STEP captured to the end), opens its fiat
 * settlement (`settlement`, the shared process of @stablepay/fiat-settlement): the provider's reports
 * (RecordSettlementReport) and SPEC's deadlines (CheckSettlementDeadlines, by the command's `now`) move it to delayed,
 * completed or failed; failed fails the payment.
 *
 * After every command the aggregate runs its own reactions (`react`): expiry once due, deposit confirmation once
 * the confirmed funding reaches the order, the deploy request once every payer is screened clear, and a
 * recoverable notice whenever payer-owned funds in the payment token grow or the notice named another token (a
 * stream recorded before the payment token was pinned).
 */

export type PaymentPhase =
  'pending' | 'settled' | 'escrow_confirmed' | 'refunded' | 'cancelled' | 'expired' | 'failed';

/** SPEC States > Payment, as `status` shows them. */
export type PaymentStatus = PaymentPhase | 'flagged' | 'screening_pending' | 'recoverable';

export interface TransferState extends ObservedTransfer {
  readonly isFunding: boolean;
  readonly nonFundingReason: NonFundingReason | null;
  readonly confirmed: boolean;
}

export interface PaymentState {
  readonly created: PaymentCreated['data'] | null;
  readonly phase: PaymentPhase;
  readonly transfers: readonly TransferState[];
  readonly depositConfirmed: boolean;
  /** The token PaymentDepositConfirmed.v1 named (the one whose funding paid the order); null before. */
  readonly depositAsset: string | null;
  readonly clearedAddresses: readonly string[];
  readonly screeningPending: boolean;
  readonly flagged: boolean;
  /**
   * Senders screened as a sanctions match who are not the payer (PaymentSanctionedFundsHeld), lower-cased: their
   * transfers fund nothing and stay in the deposit address.
   */
  readonly sanctionedSenders: readonly string[];
  readonly deployRequested: boolean;
  /**
   * The token the deposit contract is bound to (the asset of PaymentDeployRequested.v1); null before. The contract
   * takes one token at deployment, for good: recover returns only it, rescue moves only the others.
   */
  readonly deployAsset: string | null;
  /** The requested deploy is held (PaymentDeployHeld) and not deployed since; null otherwise. */
  readonly deployHold: { readonly chain: string; readonly reason: DeployHoldReason } | null;
  readonly deployment: {
    readonly txHash: string;
    readonly chain: string;
    readonly payer: string;
    readonly payerFinalAt: string;
  } | null;
  readonly authorizationExpiry: string | null;
  readonly escrowFunded: bigint;
  readonly forwarded: bigint;
  readonly captured: bigint;
  readonly refunded: bigint;
  /** Outflows by asset: forwarded, captured, refunded, reclaimed, recovered, rescued. */
  readonly outflows: Readonly<Record<string, bigint>>;
  readonly outflowTxs: readonly string[];
  /** The last payer-owned surplus announced (payment.recoverable); null when none is outstanding. */
  readonly recoverable: {
    readonly reason: RecoverableReason;
    readonly destination: string;
    readonly asset: string;
    readonly amount: bigint;
  } | null;
  readonly failure: { readonly reason: string; readonly message: string } | null;
  readonly settlementDelayReasons: readonly string[];
  readonly settlementFailureReason: SettlementFailureReason | null;
  /** Fiat-settled merchants: the payout of the settled payment (null: crypto-settled, or not settled yet). */
  readonly settlement: FiatSettlement | null;
  /** CAIP-19 of the asset chosen before paying (PaymentAssetSelected), else null: every accepted asset funds. */
  readonly selectedAsset: string | null;
  readonly updatedAt: string | null;
}

export const initialPaymentState = (): PaymentState => ({
  created: null,
  phase: 'pending',
  transfers: [],
  depositConfirmed: false,
  depositAsset: null,
  clearedAddresses: [],
  screeningPending: false,
  flagged: false,
  sanctionedSenders: [],
  deployRequested: false,
  deployAsset: null,
  deployHold: null,
  deployment: null,
  authorizationExpiry: null,
  escrowFunded: 0n,
  forwarded: 0n,
  captured: 0n,
  refunded: 0n,
  outflows: {},
  outflowTxs: [],
  recoverable: null,
  failure: null,
  settlementDelayReasons: [],
  settlementFailureReason: null,
  settlement: null,
  selectedAsset: null,
  updatedAt: null,
});

// ---------------------------------------------------------------------------------------------------------------
// Derived values (pure functions of state; the projection and the decisions share them)

export const sameTransfer = (t: { chain: string; txHash: string; logIndex: number }) => (u: TransferState) =>
  u.chain === t.chain && u.txHash.toLowerCase() === t.txHash.toLowerCase() && u.logIndex === t.logIndex;

const sum = (values: Iterable<bigint>): bigint => {
  let total = 0n;
  for (const v of values) total += v;
  return total;
};

/** A transfer from a sender held as sanctioned: it funds nothing and is never the payer's. */
export const fromSanctioned = (state: PaymentState, t: TransferState): boolean =>
  state.sanctionedSenders.includes(t.from.toLowerCase());

/**
 * Transfers classified funding at observation (an accepted token in time, before any token paid the order), from no
 * sanctioned sender: candidates of every accepted token, only the detected one's pay the order.
 */
const fundingCandidates = (state: PaymentState): TransferState[] =>
  state.transfers.filter(
    (t) =>
      t.isFunding &&
      !fromSanctioned(state, t) &&
      // Configure may follow dust in another token (below the dust share): the chosen asset alone funds from then on.
      (state.selectedAsset === null || t.asset === state.selectedAsset),
  );

/**
 * Of `transfers` (in arrival order), the accepted token that pays the order: the first whose running sum reaches its
 * token amount; before any does, the one furthest along (the largest share of its amount, ties to the earliest).
 */
function leadingAsset(
  accepted: readonly AcceptedAsset[],
  transfers: readonly TransferState[],
): AcceptedAsset | null {
  const sums = new Map<AcceptedAsset, bigint>();
  for (const t of transfers) {
    const a = accepted.find((x) => x.asset === t.asset);
    if (!a) continue;
    const total = (sums.get(a) ?? 0n) + BigInt(t.amount);
    if (total >= BigInt(a.tokenAmount)) return a;
    sums.set(a, total);
  }
  let best: [AcceptedAsset, bigint] | null = null;
  for (const [a, total] of sums) {
    // total / a.tokenAmount > best share, in integers (tokens of other decimals compare by share, not by units).
    if (!best || total * BigInt(best[0].tokenAmount) > best[1] * BigInt(a.tokenAmount)) best = [a, total];
  }
  return best?.[0] ?? null;
}

/**
 * The asset (and so the chain) of the payment: the accepted token whose funding transfers pay the order, fixed for
 * good by the deposit confirmation. Before any token paid the order, the one furthest along, which a later
 * transfer may still displace: a dust transfer sent first in another accepted token named the payment's token and
 * classified the payer's real payment `wrong_token`.
 */
export function detectedAsset(state: PaymentState): AcceptedAsset | null {
  if (!state.created) return null;
  const accepted = state.created.acceptedAssets;
  if (state.depositAsset) return accepted.find((a) => a.asset === state.depositAsset) ?? null;
  return leadingAsset(accepted, fundingCandidates(state));
}

/** Funding transfers that pay the order: the detected token's funding candidates. */
const fundingTransfers = (state: PaymentState): TransferState[] => {
  const detected = detectedAsset(state)?.asset;
  return fundingCandidates(state).filter((t) => t.asset === detected);
};

/**
 * SPEC is_funding / non_funding_reason of one transfer as shown: its classification at observation, except that a
 * funding candidate of a token that did not pay the order is `wrong_token` (`wrong_chain`), and a held sanctioned
 * sender's transfer is `sanctioned`.
 */
export function fundingStatus(
  state: PaymentState,
  t: TransferState,
): { isFunding: boolean; nonFundingReason: NonFundingReason | 'sanctioned' | null } {
  if (fromSanctioned(state, t)) return { isFunding: false, nonFundingReason: 'sanctioned' };
  if (!t.isFunding) return { isFunding: false, nonFundingReason: t.nonFundingReason };
  const paying =
    detectedAsset(state) ??
    state.created?.acceptedAssets.find((a) => a.asset === state.selectedAsset) ??
    null;
  if (!paying || paying.asset === t.asset) return { isFunding: true, nonFundingReason: null };
  return { isFunding: false, nonFundingReason: paying.chain === t.chain ? 'wrong_token' : 'wrong_chain' };
}

/** SPEC `amount_paid`: every funding transfer observed, confirmed or not, in smallest units of the detected token. */
export const amountPaid = (state: PaymentState): bigint =>
  sum(fundingTransfers(state).map((t) => BigInt(t.amount)));

/** The least `amount_paid` that is not dust for an order of `tokenAmount` (CHECKOUT_LIMITS.dustShareBasisPoints). */
export const dustThreshold = (tokenAmount: bigint): bigint => {
  const share = (tokenAmount * BigInt(LIMITS.dustShareBasisPoints) + 9_999n) / 10_000n;
  return share > 1n ? share : 1n;
};

/**
 * Funds paying the order arrived: `amount_paid` (the paying token's funding, confirmed or not, no held sanctioned
 * sender's, no other token's, no straggler or duplicate) reaches the dust threshold. What blocks cancel and configure:
 * the recorded "funding at observation" flag also held one unit anyone sent to the public address.
 */
export function orderFundingArrived(state: PaymentState): boolean {
  const detected = detectedAsset(state);
  return detected !== null && amountPaid(state) >= dustThreshold(BigInt(detected.tokenAmount));
}

const confirmedFunding = (state: PaymentState): bigint =>
  sum(
    fundingTransfers(state)
      .filter((t) => t.confirmed)
      .map((t) => BigInt(t.amount)),
  );

/** The sender who sent the most of `transfers` (ties: the earliest of them to send). */
function largestSender(transfers: readonly TransferState[]): string | null {
  const sums = new Map<string, { from: string; total: bigint }>();
  for (const t of transfers) {
    const key = t.from.toLowerCase();
    const entry = sums.get(key) ?? { from: t.from, total: 0n };
    sums.set(key, { ...entry, total: entry.total + BigInt(t.amount) });
  }
  let best: { from: string; total: bigint } | null = null;
  for (const entry of sums.values()) if (!best || entry.total > best.total) best = entry;
  return best?.from ?? null;
}

/**
 * The payer (attested at deployment): the sender of the largest part of the funding transfers (ties: the earliest),
 * else, when nothing funded the order (an abandoned deposit), of the payment token's transfers. A deposit address is
 * public: named by the first transfer, anyone sending dust before the payer became the payer, to whom refunds and
 * recover go unless the merchant disputes in time. To be named by share, a sender must pay the larger part of the
 * order itself.
 */
export function payerOf(state: PaymentState): string | null {
  if (state.deployment) return state.deployment.payer;
  const funding = fundingTransfers(state);
  if (funding.length > 0) return largestSender(funding);
  const asset = paymentAsset(state);
  return largestSender(state.transfers.filter((t) => t.asset === asset && !fromSanctioned(state, t)));
}

/**
 * The token whose surplus is the payer's: the detected asset, or, when nothing funded the order, the first
 * accepted token that arrived after the funding window closed (an abandoned deposit). An expired or cancelled
 * checkout that received only tokens it did not accept (on one of its chains) takes the first of those the
 * deployment lists as a stablecoin (`ObservedTransfer.listed`; never any contract's Transfer log): SPEC makes
 * funds left in an expired checkout's address recoverable, and without a payment token its deposit was never
 * deployed, so neither recover nor rescue could ever move them.
 *
 * Pinned once named: by the deploy request (the contract binds that token on chain; recover can return no other),
 * and before it by the recoverable notice the merchant was sent (payment.recoverable), while its transfers are
 * still held. A token arriving later is a straggler of another token: the merchant's rescue, never a new payment
 * token. Left derived, a later accepted token took over, replaced the notice and made the first sender's funds
 * rescuable by the merchant.
 */
export function paymentAsset(state: PaymentState): string | null {
  if (state.deployAsset) return state.deployAsset;
  const announced = state.recoverable?.asset;
  if (announced && state.transfers.some((t) => t.asset === announced)) return announced;
  const detected = detectedAsset(state);
  if (detected) return detected.asset;
  const acceptedAssets = state.created?.acceptedAssets ?? [];
  const clean = state.transfers.filter((t) => !fromSanctioned(state, t));
  const first = leadingAsset(acceptedAssets, clean)?.asset;
  if (first || (state.phase !== 'expired' && state.phase !== 'cancelled')) return first ?? null;
  // Only a token the deployment lists: an attacker's own token logging transfers to the address names none (it
  // would be announced to the merchant, deployed on the operator's gas and pin the payer's later stablecoin out).
  const chains = new Set(acceptedAssets.map((a) => a.chain));
  return clean.find((t) => chains.has(t.chain) && t.listed === true)?.asset ?? null;
}

/** Confirmed tokens of `asset` still in the deposit address. */
export const heldBalance = (state: PaymentState, asset: string): bigint =>
  sum(state.transfers.filter((t) => t.confirmed && t.asset === asset).map((t) => BigInt(t.amount))) -
  (state.outflows[asset] ?? 0n);

/**
 * Confirmed tokens of `asset` that sanctioned senders sent (held for good: no outflow ever takes them, the
 * forward, escrow, capture, refund and reclaim are bounded by the order's amount and recover is refused).
 */
export const sanctionedBalance = (state: PaymentState, asset: string): bigint =>
  sum(
    state.transfers
      .filter((t) => t.confirmed && t.asset === asset && fromSanctioned(state, t))
      .map((t) => BigInt(t.amount)),
  );

export const escrowRemaining = (state: PaymentState): bigint =>
  state.escrowFunded - state.captured - state.refunded;

/** Payer-owned funds of the payment token in the deposit address: everything above the escrow, once deployed. */
export function payerSurplus(
  state: PaymentState,
): { asset: string; amount: bigint; reason: RecoverableReason } | null {
  const asset = paymentAsset(state);
  if (!asset || state.flagged || state.phase === 'failed') return null;
  const abandoned = state.phase === 'expired' || state.phase === 'cancelled';
  if (!abandoned && !state.deployment) return null;
  const amount = heldBalance(state, asset) - escrowRemaining(state) - sanctionedBalance(state, asset);
  if (amount <= 0n) return null;
  return { asset, amount, reason: abandoned ? 'abandoned' : 'over_deposit' };
}

export function paymentStatus(state: PaymentState): PaymentStatus {
  if (state.flagged) return 'flagged';
  if (state.phase === 'failed') return 'failed';
  if (state.screeningPending) return 'screening_pending';
  // A TWO_STEP escrow stays capturable: its surplus is announced but the status keeps saying escrow_confirmed.
  if (state.recoverable && state.phase !== 'escrow_confirmed') return 'recoverable';
  return state.phase;
}

/** Distinct senders of `transfers` neither screened clear nor held as sanctioned, lower-cased. */
const unscreened = (state: PaymentState, transfers: readonly TransferState[]): string[] =>
  [...new Set(transfers.map((t) => t.from.toLowerCase()))].filter(
    (a) => !state.clearedAddresses.includes(a) && !state.sanctionedSenders.includes(a),
  );

/**
 * Addresses the service must screen now (empty: nothing to screen): before the deploy, the senders of the payment
 * token; once deployed, every sender of a confirmed transfer, whatever its token. Recover returns the payment
 * token's balance above the escrow to the payer and rescue moves another token wherever the merchant says: a
 * transfer confirmed after the deploy request, or of another token, was never screened, so a sanctioned sender's
 * funds left that way.
 */
export function addressesToScreen(state: PaymentState): string[] {
  if (state.flagged || !state.created) return [];
  if (state.deployment)
    return unscreened(
      state,
      state.transfers.filter((t) => t.confirmed),
    );
  if (state.deployRequested) return [];
  const asset = paymentAsset(state);
  const due = state.depositConfirmed || (payerSurplus(state)?.amount ?? 0n) > 0n;
  if (!due || !asset) return [];
  return unscreened(
    state,
    state.transfers.filter((t) => t.confirmed && t.asset === asset),
  );
}

/** Recover and rescue move no funds of `asset` whose sender is not screened yet, nor a sanctioned sender's. */
function refuseUnscreenedFunds(state: PaymentState, asset: string, held: boolean): void {
  if (held) {
    throw conflict(
      'sanctioned_funds_held',
      `The deposit holds funds of a sanctioned sender in ${asset}; they stay held, and this would move them.`,
    );
  }
  if (
    unscreened(
      state,
      state.transfers.filter((t) => t.asset === asset),
    ).length > 0
  ) {
    throw conflict(
      'sender_screening_pending',
      `A sender of ${asset} to the deposit is not screened yet (screened once its transfer is confirmed); retry once it is.`,
    );
  }
}

const isDue = (state: PaymentState, at: Date): boolean =>
  state.created !== null && at.getTime() >= Date.parse(state.created.expiresAt);

// ---------------------------------------------------------------------------------------------------------------
// evolve

function addOutflow(state: PaymentState, asset: string, amount: bigint, tx: string): PaymentState {
  return {
    ...state,
    outflows: { ...state.outflows, [asset]: (state.outflows[asset] ?? 0n) + amount },
    outflowTxs: [...state.outflowTxs, tx],
  };
}

function afterEscrowMoved(state: PaymentState): PaymentState {
  if (state.phase !== 'escrow_confirmed' || escrowRemaining(state) > 0n) return state;
  return { ...state, phase: state.captured > 0n ? 'settled' : 'refunded' };
}

export function evolvePayment(state: PaymentState, event: PaymentEvent): PaymentState {
  let s = evolveInner(state, event);
  const at = eventTime(event);
  // The crypto reached the settlement address: a fiat-settled merchant's payout starts now (SPEC: its deadlines count
  // from the time the crypto settled).
  if (at && s.phase === 'settled' && !s.settlement && s.created?.settlementMode === 'fiat') {
    s = {
      ...s,
      settlement: { status: 'pending', startedAt: at, delayReasons: [], provider: initialProviderProgress() },
    };
  }
  return at ? { ...s, updatedAt: at } : s;
}

const withSettlement = (state: PaymentState, change: Partial<FiatSettlement>): PaymentState =>
  state.settlement ? { ...state, settlement: { ...state.settlement, ...change } } : state;

/** The open fiat settlement of a settled payment (null: none, or over). */
function openSettlement(state: PaymentState): FiatSettlement | null {
  const settlement = state.settlement;
  return settlement && state.phase === 'settled' && isSettlementOpen(settlement) ? settlement : null;
}

/** When the settlement deadlines must next be checked (the durable timer's due time; null: nothing open). */
export function paymentSettlementCheckAt(state: PaymentState): Date | null {
  const settlement = openSettlement(state);
  return settlement ? settlementDeadlineAt(settlement) : null;
}

function eventTime(event: PaymentEvent): string | null {
  const d = event.data as unknown as Record<string, unknown>;
  for (const k of [
    'at',
    'createdAt',
    'observedAt',
    'confirmedAt',
    'retractedAt',
    'screenedAt',
    'flaggedAt',
  ]) {
    if (typeof d[k] === 'string') return d[k] as string;
  }
  for (const k of ['requestedAt', 'cancelledAt', 'expiredAt', 'failedAt', 'selectedAt']) {
    if (typeof d[k] === 'string') return d[k] as string;
  }
  return null;
}

function evolveInner(state: PaymentState, event: PaymentEvent): PaymentState {
  switch (event.type) {
    case 'PaymentCreated.v1':
      return { ...state, created: event.data };
    case 'PaymentTransferObserved.v1':
      return {
        ...state,
        transfers: [
          ...state.transfers,
          {
            ...event.data.transfer,
            isFunding: event.data.isFunding,
            nonFundingReason: event.data.nonFundingReason,
            confirmed: false,
          },
        ],
      };
    case 'PaymentTransferConfirmed.v1': {
      const match = sameTransfer(event.data);
      return { ...state, transfers: state.transfers.map((t) => (match(t) ? { ...t, confirmed: true } : t)) };
    }
    case 'PaymentTransferRetracted.v1': {
      const match = sameTransfer(event.data);
      return { ...state, transfers: state.transfers.filter((t) => !match(t)) };
    }
    case 'PaymentDepositConfirmed.v1':
      return { ...state, depositConfirmed: true, depositAsset: event.data.asset };
    case 'PaymentPayerCleared.v1':
      return {
        ...state,
        screeningPending: false,
        clearedAddresses: [
          ...new Set([...state.clearedAddresses, ...event.data.addresses.map((a) => a.toLowerCase())]),
        ],
      };
    case 'PaymentScreeningUnavailable.v1':
      return { ...state, screeningPending: true };
    case 'PaymentFlagged.v1':
      return { ...state, flagged: true, screeningPending: false, recoverable: null };
    case 'PaymentSanctionedFundsHeld.v1': {
      const next = {
        ...state,
        screeningPending: false,
        sanctionedSenders: [...new Set([...state.sanctionedSenders, event.data.address.toLowerCase()])],
      };
      // The announced surplus was all that sender's: nothing is the payer's to recover any more.
      return payerSurplus(next) ? next : { ...next, recoverable: null };
    }
    case 'PaymentDeployRequested.v1':
      return { ...state, deployRequested: true, deployAsset: state.deployAsset ?? event.data.asset };
    case 'PaymentDeployHeld.v1':
      return { ...state, deployHold: { chain: event.data.chain, reason: event.data.reason } };
    case 'PaymentSettled.v1': {
      const amount = BigInt(event.data.amount);
      const deployed = withDeployment(state, event.data);
      const asset = paymentAsset(state) ?? '';
      return {
        ...addOutflow(deployed, asset, amount, event.data.deployTxHash),
        phase: 'settled',
        forwarded: amount,
      };
    }
    case 'PaymentEscrowFunded.v1':
      return {
        ...withDeployment(state, event.data),
        phase: 'escrow_confirmed',
        escrowFunded: BigInt(event.data.amount),
        authorizationExpiry: event.data.authorizationExpiry,
      };
    case 'PaymentDepositDeployed.v1':
      return withDeployment(state, event.data);
    case 'PaymentRecoverable.v1':
      return {
        ...state,
        recoverable: {
          reason: event.data.reason,
          destination: event.data.destination,
          asset: event.data.asset,
          amount: BigInt(event.data.amount),
        },
      };
    case 'PaymentCaptureRequested.v1':
    case 'PaymentRefundRequested.v1':
    case 'PaymentRescueRequested.v1':
    case 'PaymentRecoverRequested.v1':
      return state;
    case 'PaymentCaptured.v1': {
      const s = addOutflow(state, event.data.asset, BigInt(event.data.amount), event.data.txHash);
      return afterEscrowMoved({ ...s, captured: s.captured + BigInt(event.data.amount) });
    }
    case 'PaymentRefunded.v1':
    case 'PaymentReclaimed.v1': {
      const s = addOutflow(state, event.data.asset, BigInt(event.data.amount), event.data.txHash);
      return afterEscrowMoved({ ...s, refunded: s.refunded + BigInt(event.data.amount) });
    }
    case 'PaymentRecovered.v1': {
      const s = addOutflow(state, event.data.asset, BigInt(event.data.amount), event.data.txHash);
      return { ...s, recoverable: null };
    }
    case 'PaymentRescued.v1':
      return addOutflow(state, event.data.asset, BigInt(event.data.amount), event.data.txHash);
    case 'PaymentAssetSelected.v1':
      return { ...state, selectedAsset: event.data.asset };
    case 'PaymentCancelled.v1':
      return { ...state, phase: 'cancelled' };
    case 'PaymentExpired.v1':
      return { ...state, phase: 'expired' };
    case 'PaymentFailed.v1':
      return {
        ...state,
        phase: 'failed',
        recoverable: null,
        failure: {
          reason: event.data.reason,
          message: `The confirmed deposit ${event.data.txHash} on ${event.data.chain} was lost to a chain reorganization.`,
        },
      };
    case 'PaymentSettlementDelayed.v1':
      return {
        ...withSettlement(state, {
          status: 'delayed',
          delayReasons: [...(state.settlement?.delayReasons ?? []), event.data.reason],
        }),
        settlementDelayReasons: [...state.settlementDelayReasons, event.data.reason ?? 'unknown'],
      };
    case 'PaymentSettlementReported.v1':
      return state.settlement
        ? withSettlement(state, { provider: evolveProviderProgress(state.settlement.provider, event.data) })
        : state;
    case 'PaymentSettlementCompleted.v1':
      return withSettlement(state, { status: 'completed' });
    case 'PaymentSettlementFailed.v1':
      return {
        ...withSettlement(state, { status: 'failed' }),
        phase: 'failed',
        settlementFailureReason: event.data.reason,
        failure: {
          reason: event.data.reason,
          message: `Fiat settlement will not complete on its own (${event.data.reason}).`,
        },
      };
  }
}

function withDeployment(
  state: PaymentState,
  d: { deployTxHash: string; chain: string; payer: string; payerFinalAt: string },
): PaymentState {
  return {
    ...state,
    deployHold: null,
    deployment: { txHash: d.deployTxHash, chain: d.chain, payer: d.payer, payerFinalAt: d.payerFinalAt },
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Commands

/** What the merchant sent to POST /checkouts (types checked at the edge; values checked here). */
export interface CreateCheckoutInput {
  readonly amount?: unknown;
  readonly currency?: unknown;
  readonly method?: unknown;
  readonly accepted_chains?: unknown;
  readonly accepted_tokens?: unknown;
  readonly expires_in?: unknown;
  /** TWO_STEP only: seconds the escrow stays capturable after deployment (1 hour to 30 days, default 7 days). */
  readonly authorization_period?: unknown;
  readonly metadata?: unknown;
  readonly success_url?: unknown;
  readonly cancel_url?: unknown;
}

export interface CreateCheckoutContext {
  readonly stablecoins: readonly SupportedStablecoin[];
  readonly settlementMode: 'crypto' | 'fiat';
  /** Fiat-settled merchants: whether PUT /payments/settlement holds a complete configuration (absent: complete). */
  readonly fiatSettlementComplete?: boolean;
  /**
   * Where the merchant stands in the registry of each chain this deployment deploys deposits on (the settings'
   * `chain_registrations` status; absent or empty: no chain is acted on, nothing to check). A deposit on a chain
   * whose registry lacks the merchant, or holds other values than its settings, is never deployed.
   */
  readonly chainRegistrations?: Readonly<Record<string, MerchantChainStatus>>;
}

/** GET /settings `chain_registrations[].status`. */
export type MerchantChainStatus =
  'not_started' | 'pending' | 'registered' | 'change_requires_merchant_signature';

/**
 * A payment is taken only if each accepted chain the deployment acts on can deploy its deposit: the merchant has a
 * signer and a settlement address (the operator registers them), and no settings change awaits the merchant's
 * MerchantChange signature. Otherwise the customer would pay into a deposit held until the merchant acts.
 */
function assertMerchantOnChains(
  acceptedAssets: readonly AcceptedAsset[],
  context: CreateCheckoutContext,
): void {
  const statuses = context.chainRegistrations ?? {};
  const chains = [...new Set(acceptedAssets.map((a) => a.chain))].filter((c) => statuses[c] !== undefined);
  if (chains.some((c) => statuses[c] === 'not_started'))
    throw cannotProcess(
      'merchant_signer_required',
      'The merchant has no signer and settlement address on chain yet: register them with POST /settings (merchant_signer, settlement_address) before taking payments; the operator then registers them on every chain.',
      'merchant_signer',
    );
  const held = chains.filter((c) => statuses[c] === 'change_requires_merchant_signature');
  if (held.length > 0)
    throw conflict(
      'merchant_change_pending',
      `The merchant's signer or settlement address changed in its settings but not on ${held.join(', ')}: sign a MerchantChange with the current signer and send it with POST /settings/merchant-change (one per chain), or leave those chains out of accepted_chains. GET /settings shows chain_registrations.`,
      'accepted_chains',
    );
}

interface DeploymentRecord {
  readonly txHash: string;
  readonly chain: string;
  readonly payer: string;
  readonly payerFinalAt: Date;
}

export type PaymentCommand =
  | {
      readonly type: 'CreateCheckout';
      readonly paymentId: string;
      readonly checkoutId: string;
      readonly merchantId: string;
      readonly onChainId: string;
      readonly depositAddress: string;
      readonly checkoutUrl: string;
      readonly input: CreateCheckoutInput;
      readonly context: CreateCheckoutContext;
      readonly now: Date;
    }
  | {
      readonly type: 'ObserveTransfer';
      readonly transfer: ObservedTransfer;
      /** When the block holding the transfer was produced: decides "in time" against expires_at. */
      readonly blockTime: Date;
      readonly now: Date;
    }
  | {
      readonly type: 'ConfirmTransfer';
      readonly chain: string;
      readonly txHash: string;
      readonly logIndex: number;
      readonly now: Date;
    }
  | {
      readonly type: 'RetractTransfer';
      readonly chain: string;
      readonly txHash: string;
      readonly logIndex: number;
      readonly now: Date;
    }
  | {
      readonly type: 'RecordScreening';
      readonly result:
        | { readonly kind: 'clear'; readonly addresses: readonly string[] }
        | { readonly kind: 'match'; readonly address: string }
        | { readonly kind: 'unreachable'; readonly addresses: readonly string[] };
      readonly now: Date;
    }
  | {
      /** The deposit flow found the registry disagreeing with the merchant's settings and did not deploy. */
      readonly type: 'RecordDeployHeld';
      readonly chain: string;
      readonly reason: DeployHoldReason;
      readonly now: Date;
    }
  | (DeploymentRecord & { readonly type: 'RecordDeployed'; readonly method: 'NONE'; readonly now: Date })
  | (DeploymentRecord & {
      readonly type: 'RecordDeployed';
      readonly method: 'DIRECT';
      readonly amount: string;
      readonly settlementAddress: string;
      readonly now: Date;
    })
  | (DeploymentRecord & {
      readonly type: 'RecordDeployed';
      readonly method: 'TWO_STEP';
      readonly amount: string;
      readonly authorizationExpiry: Date;
      readonly now: Date;
    })
  | {
      readonly type: 'RequestCapture';
      readonly amount: string;
      readonly settlementAddress: string;
      readonly now: Date;
    }
  | { readonly type: 'RequestRefund'; readonly amount: string; readonly now: Date }
  | {
      readonly type: 'RequestRescue';
      readonly asset: string;
      readonly to: string;
      readonly amount: string;
      /**
       * What the deposit holds of `asset`, read from the chain just before. When given it bounds the rescue instead
       * of the observed transfers: the native coin and tokens outside the indexer's watch list are never observed.
       */
      readonly onChainBalance?: string;
      readonly now: Date;
    }
  | { readonly type: 'RequestRecover'; readonly now: Date }
  | {
      readonly type: 'RecordOutflow';
      readonly kind: 'captured' | 'refunded' | 'reclaimed' | 'recovered' | 'rescued';
      readonly txHash: string;
      readonly asset: string;
      readonly amount: string;
      readonly to: string;
      readonly now: Date;
    }
  | {
      /** The alternate surface's configure call: `chain` (CAIP-2) and `token` (symbol), both as the caller sent them. */
      readonly type: 'SelectAsset';
      readonly chain: unknown;
      readonly token: unknown;
      readonly now: Date;
    }
  | { readonly type: 'Cancel'; readonly now: Date }
  | { readonly type: 'Expire'; readonly now: Date }
  | {
      readonly type: 'RecordSettlementDelayed';
      readonly reason: SettlementFailureReason | null;
      readonly now: Date;
    }
  | { readonly type: 'RecordSettlementFailed'; readonly reason: SettlementFailureReason; readonly now: Date }
  | {
      /** The settlement provider's feed: one report about the payout of this payment. */
      readonly type: 'RecordSettlementReport';
      readonly reportId: string;
      readonly kind: SettlementReportKind;
      readonly reportedAt: Date;
      readonly now: Date;
    }
  /** The durable timer: SPEC's six- and 72-hour settlement deadlines at `now`. */
  | { readonly type: 'CheckSettlementDeadlines'; readonly now: Date };

const OUTFLOW_EVENT = {
  captured: 'PaymentCaptured.v1',
  refunded: 'PaymentRefunded.v1',
  reclaimed: 'PaymentReclaimed.v1',
  recovered: 'PaymentRecovered.v1',
  rescued: 'PaymentRescued.v1',
} as const;

function requireCreated(state: PaymentState): PaymentCreated['data'] {
  if (!state.created) throw notFound('payment');
  return state.created;
}

/**
 * Whether the payment stands without `address`'s transfers: a confirmed deposit whose order the other senders'
 * confirmed funding still covers, or an abandoned deposit with another sender of the payment token (its payer).
 * Otherwise `address` is the payer (SPEC: the payment is flagged).
 */
function paidWithoutSender(state: PaymentState, address: string): boolean {
  const without: PaymentState = {
    ...state,
    sanctionedSenders: [...state.sanctionedSenders, address.toLowerCase()],
  };
  if (state.depositConfirmed) {
    const detected = detectedAsset(without);
    return detected !== null && confirmedFunding(without) >= BigInt(detected.tokenAmount);
  }
  const abandoned = state.phase === 'expired' || state.phase === 'cancelled';
  // No order was paid to test against: the payer is the one payerOf names (the largest sender). Held only when that
  // is someone else; otherwise one unit from a second wallet would turn a sanctioned payer into "dust".
  if (payerOf(state)?.toLowerCase() === address.toLowerCase()) return false;
  const asset = paymentAsset(without);
  return abandoned && asset !== null && payerOf(without) !== null && payerSurplus(without) !== null;
}

function refuseFlagged(state: PaymentState): void {
  if (state.flagged) {
    throw cannotProcess(
      'payment_flagged',
      'This payment is flagged by sanctions screening and permanently halted.',
    );
  }
}

function parseTokenAmount(value: string, param = 'amount'): bigint {
  if (!/^(0|[1-9][0-9]*)$/.test(value) || value.length > 78) {
    throw validationError(param, `${param} must be an integer string in the token's smallest unit.`);
  }
  const amount = BigInt(value);
  if (amount === 0n) throw validationError(param, `${param} must be greater than 0.`);
  return amount;
}

/** Decide, then apply the aggregate's own reactions until none is due. */
export function decidePayment(command: PaymentCommand, state: PaymentState): PaymentEvent[] {
  const out: PaymentEvent[] = [];
  let s = state;
  const emit = (event: PaymentEvent) => {
    out.push(event);
    s = evolvePayment(s, event);
  };
  // A command after expires_at (other than a transfer stamped in time) first lets the expiry happen.
  if (command.type !== 'CreateCheckout' && command.type !== 'ObserveTransfer' && state.created) {
    react(command.now, emit, () => s);
  }
  decideCommand(command, s, emit);
  react(command.now, emit, () => s);
  return out;
}

function decideCommand(command: PaymentCommand, s: PaymentState, emit: (e: PaymentEvent) => void): void {
  const at = command.now.toISOString();
  switch (command.type) {
    case 'CreateCheckout': {
      if (s.created) throw conflict('checkout_exists', `Checkout ${command.checkoutId} already exists.`);
      emit({ type: 'PaymentCreated.v1', data: validateCreate(command) });
      return;
    }
    case 'ObserveTransfer': {
      requireCreated(s);
      const t = command.transfer;
      if (s.transfers.some(sameTransfer(t))) return; // the indexer may deliver a log twice
      const { isFunding, nonFundingReason } = classify(s, t, command.blockTime);
      emit({
        type: 'PaymentTransferObserved.v1',
        data: { transfer: t, isFunding, nonFundingReason, observedAt: at },
      });
      return;
    }
    case 'ConfirmTransfer': {
      const t = s.transfers.find(sameTransfer(command));
      if (!t || t.confirmed) return;
      emit({
        type: 'PaymentTransferConfirmed.v1',
        data: { chain: command.chain, txHash: t.txHash, logIndex: t.logIndex, confirmedAt: at },
      });
      return;
    }
    case 'RetractTransfer': {
      const t = s.transfers.find(sameTransfer(command));
      if (!t) return;
      // Only a transfer that pays the order can lose it. Funding at observation is not enough: a held sanctioned
      // sender's transfer, and a funding candidate of a token that did not pay the order (dust sent first in another
      // accepted token, or dust left beside the asset configure chose), paid nothing, and a reorg losing them failed
      // a paid payment deposit_lost_to_reorg.
      const funded = fundingTransfers(s).some(sameTransfer(t));
      if (t.confirmed && funded && s.depositConfirmed && s.phase !== 'failed') {
        // A confirmed deposit lost beyond recovery: the payment fails, the record of the transfer stays.
        emit({
          type: 'PaymentFailed.v1',
          data: { reason: 'deposit_lost_to_reorg', txHash: t.txHash, chain: t.chain, failedAt: at },
        });
        return;
      }
      emit({
        type: 'PaymentTransferRetracted.v1',
        data: { chain: t.chain, txHash: t.txHash, logIndex: t.logIndex, retractedAt: at },
      });
      return;
    }
    case 'RecordScreening': {
      requireCreated(s);
      if (s.flagged) return; // never re-screened
      const r = command.result;
      if (r.kind === 'match') {
        if (s.sanctionedSenders.includes(r.address.toLowerCase())) return; // a stale result again
        // SPEC flags the payment when its payer matches. A sender the order does not need is not the payer
        // (anyone can send to a public deposit address): its funds are held, the payer's payment goes on. Once the
        // deploy is requested the payer was screened clear: any later match is another sender's.
        const attested = s.deployRequested && payerOf(s)?.toLowerCase() === r.address.toLowerCase();
        if (!attested && (s.deployRequested || paidWithoutSender(s, r.address))) {
          emit({ type: 'PaymentSanctionedFundsHeld.v1', data: { address: r.address, at } });
        } else {
          emit({ type: 'PaymentFlagged.v1', data: { address: r.address, flaggedAt: at } });
        }
      } else if (r.kind === 'unreachable') {
        if (!s.screeningPending) {
          emit({ type: 'PaymentScreeningUnavailable.v1', data: { addresses: r.addresses, at } });
        }
      } else {
        emit({ type: 'PaymentPayerCleared.v1', data: { addresses: r.addresses, screenedAt: at } });
      }
      return;
    }
    case 'RecordDeployHeld': {
      requireCreated(s);
      if (!s.deployRequested || s.deployment) return;
      if (s.deployHold?.chain === command.chain && s.deployHold.reason === command.reason) return;
      emit({
        type: 'PaymentDeployHeld.v1',
        data: { chain: command.chain, reason: command.reason, heldAt: at },
      });
      return;
    }
    case 'RecordDeployed': {
      requireCreated(s);
      if (s.deployment) return;
      const fact = {
        deployTxHash: command.txHash,
        chain: command.chain,
        payer: command.payer,
        payerFinalAt: command.payerFinalAt.toISOString(),
        at,
      };
      if (command.method === 'DIRECT') {
        emit({
          type: 'PaymentSettled.v1',
          data: { ...fact, amount: command.amount, settlementAddress: command.settlementAddress },
        });
      } else if (command.method === 'TWO_STEP') {
        emit({
          type: 'PaymentEscrowFunded.v1',
          data: {
            ...fact,
            amount: command.amount,
            authorizationExpiry: command.authorizationExpiry.toISOString(),
          },
        });
      } else {
        emit({ type: 'PaymentDepositDeployed.v1', data: fact });
      }
      return;
    }
    case 'RequestCapture': {
      requireCreated(s);
      refuseFlagged(s);
      const amount = parseTokenAmount(command.amount);
      if (s.phase !== 'escrow_confirmed') {
        throw conflict(
          'payment_not_capturable',
          `Only an escrow_confirmed TWO_STEP payment can be captured; this one is ${paymentStatus(s)}.`,
        );
      }
      if (s.authorizationExpiry && command.now.getTime() >= Date.parse(s.authorizationExpiry)) {
        throw cannotProcess(
          'authorization_expired',
          `The escrow authorization expired at ${s.authorizationExpiry}; the payer can reclaim it.`,
        );
      }
      if (amount > escrowRemaining(s)) {
        throw validationError(
          'amount',
          `amount exceeds the escrow left (${escrowRemaining(s)}).`,
          'amount_exceeds_escrow',
        );
      }
      emit({
        type: 'PaymentCaptureRequested.v1',
        data: {
          asset: paymentAsset(s) ?? '',
          amount: amount.toString(),
          to: command.settlementAddress,
          requestedAt: at,
        },
      });
      return;
    }
    case 'RequestRefund': {
      requireCreated(s);
      refuseFlagged(s);
      const amount = parseTokenAmount(command.amount);
      if (s.phase !== 'escrow_confirmed') {
        throw conflict(
          'payment_not_refundable',
          `Only an escrow_confirmed TWO_STEP payment can be refunded; this one is ${paymentStatus(s)}.`,
        );
      }
      if (amount > escrowRemaining(s)) {
        throw validationError(
          'amount',
          `amount exceeds the escrow left (${escrowRemaining(s)}).`,
          'amount_exceeds_escrow',
        );
      }
      emit({
        type: 'PaymentRefundRequested.v1',
        data: {
          asset: paymentAsset(s) ?? '',
          amount: amount.toString(),
          to: s.deployment?.payer ?? '',
          requestedAt: at,
        },
      });
      return;
    }
    case 'RequestRescue': {
      requireCreated(s);
      refuseFlagged(s);
      const amount = parseTokenAmount(command.amount);
      if (!s.deployment) {
        throw conflict(
          'deposit_not_deployed',
          'The deposit contract is not deployed yet; nothing can be rescued.',
        );
      }
      if (command.asset === paymentAsset(s)) {
        throw cannotProcess(
          'payer_owned_token',
          'Funds in the payment token belong to the payer: use recover.',
          'asset',
        );
      }
      // Held sanctioned funds stay: the rescue may move the rest (the contract's rescue is amount-bounded).
      const sanctioned = sum(
        s.transfers
          .filter((t) => t.asset === command.asset && fromSanctioned(s, t))
          .map((t) => BigInt(t.amount)),
      );
      const balance =
        command.onChainBalance !== undefined ? BigInt(command.onChainBalance) : heldBalance(s, command.asset);
      const available = balance - sanctioned;
      refuseUnscreenedFunds(s, command.asset, sanctioned > 0n && amount > available);
      if (amount > available) {
        throw validationError(
          'amount',
          `amount exceeds what the deposit holds of ${command.asset} (${available}).`,
          'amount_exceeds_balance',
        );
      }
      emit({
        type: 'PaymentRescueRequested.v1',
        data: { asset: command.asset, amount: amount.toString(), to: command.to, requestedAt: at },
      });
      return;
    }
    case 'RequestRecover': {
      requireCreated(s);
      refuseFlagged(s);
      if (!s.recoverable) throw conflict('nothing_to_recover', 'This payment holds no funds to recover.');
      if (!s.deployment) {
        throw conflict('deposit_not_deployed', 'The deposit contract is being deployed; recover once it is.');
      }
      // The contract's recover returns the whole balance above the escrow: it would carry the held funds along.
      refuseUnscreenedFunds(s, s.recoverable.asset, sanctionedBalance(s, s.recoverable.asset) > 0n);
      if (command.now.getTime() < Date.parse(s.deployment.payerFinalAt)) {
        throw cannotProcess(
          'payer_not_final',
          `The payer becomes final at ${s.deployment.payerFinalAt} (challenge period).`,
        );
      }
      emit({
        type: 'PaymentRecoverRequested.v1',
        data: { asset: s.recoverable.asset, destination: s.deployment.payer, requestedAt: at },
      });
      return;
    }
    case 'RecordOutflow': {
      requireCreated(s);
      if (s.outflowTxs.includes(command.txHash)) return;
      emit({
        type: OUTFLOW_EVENT[command.kind],
        data: { txHash: command.txHash, asset: command.asset, amount: command.amount, to: command.to, at },
      } as PaymentEvent);
      return;
    }
    case 'SelectAsset': {
      const created = requireCreated(s);
      const asset = selectableAsset(created.acceptedAssets, command.chain, command.token);
      if (s.phase !== 'pending' || s.flagged) {
        throw conflict(
          'payment_not_configurable',
          `Only a pending payment can be configured; this one is ${paymentStatus(s)}.`,
        );
      }
      if (s.selectedAsset === asset.asset) return; // the same choice again changes nothing
      if (orderFundingArrived(s)) {
        throw conflict(
          'payment_has_deposit',
          `A deposit paying this order has arrived (amount_paid ${amountPaid(s)}); its token and chain can no longer change.`,
        );
      }
      emit({
        type: 'PaymentAssetSelected.v1',
        data: { asset: asset.asset, chain: asset.chain, selectedAt: at },
      });
      return;
    }
    case 'Cancel': {
      requireCreated(s);
      if (s.phase !== 'pending' || s.flagged) {
        throw conflict(
          'checkout_not_pending',
          `Only a pending checkout can be cancelled; this one is ${paymentStatus(s)}.`,
        );
      }
      if (orderFundingArrived(s)) {
        throw conflict(
          'checkout_has_deposit',
          `A deposit paying this order has arrived (amount_paid ${amountPaid(s)}); the checkout can no longer be cancelled.`,
        );
      }
      emit({ type: 'PaymentCancelled.v1', data: { cancelledAt: at } });
      return;
    }
    case 'Expire':
      requireCreated(s);
      return; // the reaction expires a due payment; a timer firing twice or early decides nothing
    case 'RecordSettlementDelayed': {
      requireCreated(s);
      if (s.created?.settlementMode !== 'fiat' || s.phase !== 'settled') return;
      if (s.settlement && !isSettlementOpen(s.settlement)) return;
      // Once per distinct failure reason, not on every retry (SPEC Fiat settlement delay and failure).
      if (s.settlementDelayReasons.includes(command.reason ?? 'unknown')) return;
      emit({ type: 'PaymentSettlementDelayed.v1', data: { reason: command.reason, at } });
      return;
    }
    case 'RecordSettlementFailed': {
      requireCreated(s);
      if (s.created?.settlementMode !== 'fiat' || s.phase !== 'settled') return;
      if (s.settlement && !isSettlementOpen(s.settlement)) return;
      emit({ type: 'PaymentSettlementFailed.v1', data: { reason: command.reason, at } });
      return;
    }
    case 'RecordSettlementReport': {
      const created = requireCreated(s);
      if (!s.settlement) {
        throw conflict(
          'payment_not_fiat_settled',
          created.settlementMode === 'fiat'
            ? `Payment ${created.paymentId} has not settled yet: it has no fiat payout to report on.`
            : `Payment ${created.paymentId} belongs to a crypto-settled business: it has no fiat payout.`,
        );
      }
      if (s.settlement.provider.reportIds.includes(command.reportId)) return;
      const report: PaymentEvent = {
        type: 'PaymentSettlementReported.v1',
        data: {
          reportId: command.reportId,
          kind: command.kind,
          reportedAt: command.reportedAt.toISOString(),
          receivedAt: at,
        },
      };
      emit(report);
      // Reports after the end (or about a payment a reorg failed) are kept; nothing follows from them.
      const open = openSettlement(evolvePayment(s, report));
      if (open) emitSettlementOutcomes(settlementReportOutcomes(open, command.kind, command.now), at, emit);
      return;
    }
    case 'CheckSettlementDeadlines': {
      requireCreated(s);
      const open = openSettlement(s);
      if (open) emitSettlementOutcomes(settlementDeadlineOutcomes(open, command.now), at, emit);
      return;
    }
  }
}

function emitSettlementOutcomes(
  outcomes: readonly SettlementOutcome[],
  at: string,
  emit: (e: PaymentEvent) => void,
): void {
  for (const outcome of outcomes) {
    if (outcome.kind === 'completed') emit({ type: 'PaymentSettlementCompleted.v1', data: { at } });
    else if (outcome.kind === 'delayed')
      emit({ type: 'PaymentSettlementDelayed.v1', data: { reason: outcome.reason, at } });
    else emit({ type: 'PaymentSettlementFailed.v1', data: { reason: outcome.reason, at } });
  }
}

/** The accepted asset named by a CAIP-2 chain and a token symbol, or 400 naming `chain` / `token`. */
function selectableAsset(accepted: readonly AcceptedAsset[], chain: unknown, token: unknown): AcceptedAsset {
  if (typeof chain !== 'string' || chain.length === 0) {
    throw validationError(
      'chain',
      'chain is required: a CAIP-2 chain id the payment accepts (for example eip155:8453).',
    );
  }
  if (typeof token !== 'string' || token.length === 0) {
    throw validationError(
      'token',
      'token is required: the symbol of a token the payment accepts (for example USDC).',
    );
  }
  const chains = [...new Set(accepted.map((a) => a.chain))];
  if (!chains.includes(chain)) {
    throw validationError(
      'chain',
      `chain ${chain} is not accepted by this payment (accepted: ${chains.join(', ')}).`,
      'unsupported_chain',
    );
  }
  const symbol = token.toUpperCase();
  const asset = accepted.find((a) => a.chain === chain && a.symbol === symbol);
  if (!asset) {
    throw validationError(
      'token',
      `token ${token} is not accepted on ${chain} (accepted: ${accepted
        .filter((a) => a.chain === chain)
        .map((a) => a.symbol)
        .join(', ')}).`,
      'unsupported_token',
    );
  }
  return asset;
}

/** is_funding: an accepted token on an accepted chain, in time, while the order is not yet fully paid. */
function classify(
  s: PaymentState,
  t: ObservedTransfer,
  blockTime: Date,
): { isFunding: boolean; nonFundingReason: NonFundingReason | null } {
  const created = requireCreated(s);
  const no = (reason: NonFundingReason) => ({ isFunding: false, nonFundingReason: reason });
  const accepted = created.acceptedAssets.find((a) => a.asset === t.asset);
  if (!created.acceptedAssets.some((a) => a.chain === t.chain)) return no('wrong_chain');
  if (!accepted) return no('wrong_token');
  // A chosen asset is the only one that funds (another chain or token is listed, never counted).
  if (s.selectedAsset && t.asset !== s.selectedAsset) {
    const selected = created.acceptedAssets.find((a) => a.asset === s.selectedAsset);
    return no(selected && selected.chain !== t.chain ? 'wrong_chain' : 'wrong_token');
  }
  const windowOpen =
    s.phase === 'pending' &&
    !s.flagged &&
    !s.depositConfirmed &&
    blockTime.getTime() < Date.parse(created.expiresAt);
  if (!windowOpen) return no('straggler');
  // Until a token pays the order every accepted one may: a first transfer (dust) names no token.
  const detected = detectedAsset(s);
  if (detected && amountPaid(s) >= BigInt(detected.tokenAmount)) {
    if (detected.asset !== t.asset) return no(detected.chain === t.chain ? 'wrong_token' : 'wrong_chain');
    return no('duplicate');
  }
  return { isFunding: true, nonFundingReason: null };
}

/** The aggregate's own consequences of the state it reached. */
function react(now: Date, emit: (e: PaymentEvent) => void, current: () => PaymentState): void {
  const at = now.toISOString();
  let s = current();
  const created = s.created;
  if (!created) return;
  const detected = detectedAsset(s);

  // Expiry: due, still pending, and what arrived in time does not cover the order.
  if (s.phase === 'pending' && !s.flagged && !s.depositConfirmed && isDue(s, now)) {
    if (!detected || amountPaid(s) < BigInt(detected.tokenAmount)) {
      emit({ type: 'PaymentExpired.v1', data: { expiredAt: at } });
      s = current();
    }
  }

  // Deposit confirmed: confirmed funding reached the order (always before settled / escrow_confirmed).
  if (s.phase === 'pending' && !s.depositConfirmed && !s.flagged && detected) {
    const paid = confirmedFunding(s);
    if (paid >= BigInt(detected.tokenAmount)) {
      emit({
        type: 'PaymentDepositConfirmed.v1',
        data: { asset: detected.asset, amountPaid: paid.toString(), confirmedAt: at },
      });
      s = current();
    }
  }

  // Payer-owned surplus changed, or the notice named another token or payer: announce it (again, with the new
  // amount, token or destination). It shrinks when a sender is held as sanctioned: its funds are no longer the
  // payer's, and a sender announced as the payer may have been that sanctioned one.
  // Once deployed, a surplus is announced only after its senders are screened: one sent after the payer was screened
  // may be a sanctioned sender's, which is never the payer's to recover.
  const surplus = payerSurplus(s);
  const payer = payerOf(s);
  const unscreenedSurplus =
    surplus !== null &&
    s.deployment !== null &&
    unscreened(
      s,
      s.transfers.filter((t) => t.confirmed && t.asset === surplus.asset),
    ).length > 0;
  if (
    surplus &&
    payer &&
    !unscreenedSurplus &&
    (!s.recoverable ||
      surplus.asset !== s.recoverable.asset ||
      surplus.amount !== s.recoverable.amount ||
      payer.toLowerCase() !== s.recoverable.destination.toLowerCase())
  ) {
    emit({
      type: 'PaymentRecoverable.v1',
      data: {
        reason: surplus.reason,
        destination: payer,
        asset: surplus.asset,
        amount: surplus.amount.toString(),
        at,
      },
    });
    s = current();
  }

  // Deploy once the deposit is confirmed (or funds were abandoned) and every sender is screened clear.
  if (
    !s.deployRequested &&
    !s.flagged &&
    s.phase !== 'failed' &&
    payer &&
    addressesToScreen(s).length === 0
  ) {
    const asset = paymentAsset(s);
    const abandoned = s.phase === 'expired' || s.phase === 'cancelled';
    const screened = s.clearedAddresses.includes(payer.toLowerCase());
    if (asset && screened && (s.depositConfirmed || (abandoned && payerSurplus(s)))) {
      const method: PaymentMethod | 'NONE' = s.depositConfirmed && detected ? created.method : 'NONE';
      emit({
        type: 'PaymentDeployRequested.v1',
        data: {
          method,
          chain: s.transfers.find((t) => t.asset === asset)?.chain ?? '',
          asset,
          payer,
          amount: method === 'NONE' || !detected ? '0' : detected.tokenAmount,
          requestedAt: at,
        },
      });
    }
  }
}

function validateCreate(
  command: Extract<PaymentCommand, { type: 'CreateCheckout' }>,
): PaymentCreated['data'] {
  const input = command.input;
  const amount = parseOrderAmount(input.amount);
  const currency = parseCurrency(input.currency);
  const method = parseMethod(input.method);
  const expiresIn = parseSeconds(
    input.expires_in,
    'expires_in',
    LIMITS.minExpiresInSeconds,
    LIMITS.maxExpiresInSeconds,
    LIMITS.defaultExpiresInSeconds,
  );
  if (
    method !== 'TWO_STEP' &&
    input.authorization_period !== undefined &&
    input.authorization_period !== null
  ) {
    throw validationError('authorization_period', 'authorization_period applies to TWO_STEP payments only.');
  }
  const authorizationPeriodSeconds =
    method === 'TWO_STEP'
      ? parseSeconds(
          input.authorization_period,
          'authorization_period',
          LIMITS.minAuthorizationSeconds,
          LIMITS.maxAuthorizationSeconds,
          LIMITS.defaultAuthorizationSeconds,
        )
      : null;
  const metadata = parseMetadata(input.metadata);
  const successUrl = parseRedirectUrl(input.success_url, 'success_url');
  const cancelUrl = parseRedirectUrl(input.cancel_url, 'cancel_url');
  const acceptedAssets = resolveAcceptedAssets(
    input.accepted_chains,
    input.accepted_tokens,
    currency,
    amount,
    command.context.stablecoins,
  );
  assertMerchantOnChains(acceptedAssets, command.context);
  // SPEC Errors: a fiat-settled business cannot take a payment its settlement could not pay out.
  if (command.context.settlementMode === 'fiat' && command.context.fiatSettlementComplete === false) {
    throw cannotProcess(
      'fiat_settlement_required',
      'This business settles in fiat and has no complete fiat settlement configuration: set it with PUT /payments/settlement first.',
    );
  }
  return {
    paymentId: command.paymentId,
    checkoutId: command.checkoutId,
    merchantId: command.merchantId,
    onChainId: command.onChainId,
    depositAddress: command.depositAddress,
    method,
    amount: amount.toString(),
    currency,
    acceptedAssets,
    settlementMode: command.context.settlementMode,
    authorizationPeriodSeconds,
    checkoutUrl: command.checkoutUrl,
    successUrl,
    cancelUrl,
    metadata,
    expiresAt: new Date(command.now.getTime() + expiresIn * 1000).toISOString(),
    createdAt: command.now.toISOString(),
  };
}
