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
  OutflowKind,
  PaymentCaptured,
  PaymentCreated,
  PaymentEvent,
  PaymentMethod,
  PaymentOutflowRetracted,
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
 *           --(lost funding confirmed again and the recorded deploy found on the new fork)--> settled | escrow_confirmed
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
   * When the merchant asked to recover funds below the dust share (PaymentDustRecoveryRequested): deploy them. Null
   * before (or without) such a request.
   */
  readonly dustRecoveryRequestedAt: string | null;
  /** The method of the last PaymentDeployRequested.v1 (the one the deposit flow deploys); null before any. */
  readonly deployMethod: PaymentMethod | 'NONE' | null;
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
    /**
     * The payer the deposit attests (refunds, reclaim and recover go there); null after the merchant disputed it
     * (PaymentPayerDisputed) until the admin attests one (PaymentPayerAttested).
     */
    readonly payer: string | null;
    /** When the attested payer becomes final (chain time): the deployment's, or the admin's later attestation's. */
    readonly payerFinalAt: string | null;
    /** What the deploy did: DIRECT forwarded the order, TWO_STEP escrowed it, NONE moved nothing. */
    readonly method: PaymentMethod | 'NONE';
  } | null;
  /** The payer the deployment itself attested (before any dispute), and when it became final; null before. */
  readonly deployPayer: { readonly payer: string; readonly finalAt: string } | null;
  /**
   * The deposit's PayerDisputed / PayerAttested logs recorded since the deployment and not retracted, in block order
   * (facts from before blocks were kept first, in stream order): the last one is the payer now (`deployment.payer`).
   */
  readonly payerLogs: readonly PayerLogState[];
  /**
   * Our relay of the merchant's dispute of `payer` is requested (PaymentPayerDisputeRequested.v1 with its signature's
   * `deadline`) and neither its log nor a failure is recorded yet: a second dispute is refused meanwhile.
   */
  readonly payerDisputeRequest: { readonly payer: string; readonly deadline: string } | null;
  /**
   * The DIRECT or TWO_STEP deployment's transaction has the chain's confirmations (PaymentDeploymentConfirmed.v1): its
   * webhook is sent. False before, and again once a deployment is lost.
   */
  readonly deploymentConfirmed: boolean;
  /**
   * Deployments undone (PaymentDeploymentLost.v1). Part of the keys of a deploy recorded, confirmed or lost again
   * after one (deploymentKey): the same transaction, mined after all, records once more.
   */
  readonly deploymentsLost: number;
  readonly authorizationExpiry: string | null;
  readonly escrowFunded: bigint;
  readonly forwarded: bigint;
  readonly captured: bigint;
  readonly refunded: bigint;
  /** Outflows by asset: forwarded, captured, refunded, reclaimed, recovered, rescued. */
  readonly outflows: Readonly<Record<string, bigint>>;
  /**
   * What recover returned to the payer and rescue moved out, by asset (also in `outflows`): the payments CSV shows
   * them, so a deposit's history reconciles after its recoverable notice is gone.
   */
  readonly recovered: Readonly<Record<string, bigint>>;
  readonly rescued: Readonly<Record<string, bigint>>;
  readonly outflowTxs: readonly string[];
  /**
   * The outflows recorded, one key per log (`<tx>#<logIndex>`), or per transaction (`<tx>`) for the deploy's forward
   * and for facts recorded before the log index was kept: one transaction may move funds out more than once (a
   * capture and a refund batched by the merchant's wallet), and each log is its own fact.
   */
  readonly outflowLogs: readonly string[];
  /**
   * Outflows recorded (captures, refunds, reclaims, recovers, rescues) whose transaction has not been seen with the
   * chain's confirmations yet, by transaction (one entry per outflow of it): their webhooks wait for `ConfirmOutflow`.
   */
  readonly outflowsAwaitingConfirmations: Readonly<Record<string, readonly OutflowKind[]>>;
  /**
   * Captures, refunds and reclaims recorded and not confirmed yet, by outflow key (as `outflowLogs`): what a reorg
   * before the confirmations undoes (`RetractOutflow`).
   */
  readonly unconfirmedEscrowMoves: Readonly<Record<string, EscrowMove>>;
  /**
   * The outflows recorded with the block and log index their log was last seen at, by outflow key (as `outflowLogs`):
   * a log of the same transaction seen in another block is that transaction mined again, after a reorg, at another log
   * index; it claims one of these (PaymentOutflowMinedAgain.v1), which is then seen there.
   */
  readonly outflowSightings: Readonly<Record<string, OutflowSighting>>;
  /** The outflow keys a reorg undid (PaymentOutflowRetracted), once per undo: the same log mined again counts again. */
  readonly undoneOutflowLogs: readonly string[];
  /** The last payer-owned surplus announced (payment.recoverable); null when none is outstanding. */
  readonly recoverable: {
    readonly reason: RecoverableReason;
    readonly destination: string;
    readonly payerUnknown: boolean;
    readonly asset: string;
    readonly amount: bigint;
  } | null;
  readonly failure: { readonly reason: string; readonly message: string } | null;
  /**
   * The transfer whose loss to a reorg failed the payment (PaymentFailed.v1; `logIndex` null on facts from before it
   * was kept). It stays listed, unconfirmed (out of the held balance) until the new fork has it confirmed again.
   */
  readonly lostTransfer: {
    readonly chain: string;
    readonly txHash: string;
    readonly logIndex: number | null;
  } | null;
  readonly settlementDelayReasons: readonly string[];
  readonly settlementFailureReason: SettlementFailureReason | null;
  /** Fiat-settled merchants: the payout of the settled payment (null: crypto-settled, or not settled yet). */
  readonly settlement: FiatSettlement | null;
  /**
   * The provider paid the payout out (it reported payout_completed, or the settlement completed): kept apart from the
   * settlement's status, which does not move while a reorg has the payment failed.
   */
  readonly settlementPaidOut: boolean;
  /** Fiat paid out for a deposit a reorg took (PaymentSettlementExposed.v1), until a reinstatement; else null. */
  readonly settlementExposure: { readonly reason: 'deposit_lost_to_reorg'; readonly at: string } | null;
  /** CAIP-19 of the asset chosen before paying (PaymentAssetSelected), else null: every accepted asset funds. */
  readonly selectedAsset: string | null;
  readonly updatedAt: string | null;
}

export interface PayerLogState {
  readonly kind: 'disputed' | 'attested';
  readonly chain: string;
  readonly txHash: string;
  readonly logIndex: number;
  /** Null: recorded before blocks were kept; it keeps its stream order even once a redelivery names its block. */
  readonly blockNumber: bigint | null;
  readonly blockHash: string | null;
  readonly payer: string;
  readonly finalAt: string | null;
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
  dustRecoveryRequestedAt: null,
  deployMethod: null,
  deployAsset: null,
  deployHold: null,
  deployment: null,
  deployPayer: null,
  payerLogs: [],
  payerDisputeRequest: null,
  deploymentConfirmed: false,
  deploymentsLost: 0,
  authorizationExpiry: null,
  escrowFunded: 0n,
  forwarded: 0n,
  captured: 0n,
  refunded: 0n,
  outflows: {},
  recovered: {},
  rescued: {},
  outflowTxs: [],
  outflowLogs: [],
  outflowsAwaitingConfirmations: {},
  unconfirmedEscrowMoves: {},
  outflowSightings: {},
  undoneOutflowLogs: [],
  recoverable: null,
  failure: null,
  lostTransfer: null,
  settlementDelayReasons: [],
  settlementFailureReason: null,
  settlement: null,
  settlementPaidOut: false,
  settlementExposure: null,
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
 * The payment failed because a reorg took a confirmed transfer paying the order (SPEC deposit_lost_to_reorg), not
 * because its fiat settlement failed. Its order is over, but what its deposit address holds (the rest of a payment
 * paid in parts, the lost transfer mined again on the new fork, anything sent later) is the payer's, returned as an
 * abandoned deposit's funds are.
 */
export const lostToReorg = (state: PaymentState): boolean =>
  state.phase === 'failed' && state.lostTransfer !== null;

/**
 * The recorded deployment of a payment a reorg failed, which the deposit flow checks is still on the chain (the
 * reorg took the funding, and the deploy mined after it with it): null when there is none to check. Only a
 * deployment nothing moved out of since: a capture, refund, recover or rescue recorded after it is an outflow undone
 * as well, which the aggregate does not model (the operator is paged for those, docs/payment-deposits.md step 9).
 */
export function deploymentToVerify(state: PaymentState): { txHash: string; chain: string } | null {
  const deployment = state.deployment;
  if (!lostToReorg(state) || !deployment) return null;
  if (state.outflowTxs.some((tx) => tx !== deployment.txHash)) return null;
  return { txHash: deployment.txHash, chain: deployment.chain };
}

/**
 * The idempotency key of a fact about deploy `txHash` (`deploy:<tx>`, `deploy-lost:<tx>`, a receipt row's id): as is
 * before any deployment was lost, so a redelivery then records nothing twice and older streams keep their keys; with
 * the number lost after one, so the same transaction recorded again (mined after all, its loss declared too soon, or
 * found by a redeploy refused as already deployed) is a new fact, not the old one's id.
 */
export function deploymentKey(state: PaymentState, prefix: string, txHash: string): string {
  const key = `${prefix}:${txHash}`;
  return state.deploymentsLost ? `${key}:${state.deploymentsLost}` : key;
}

/**
 * The recorded DIRECT or TWO_STEP deployment of a payment whose funding stands (not failed) that a reorg may still
 * undo (RecordDeploymentLost, PaymentDeploymentLost.v1): not confirmed yet (nothing announced), nothing moved out of
 * the deposit since (a capture or refund recorded after it is undone first, by its own receipt's check), and no fiat
 * payout under way for it (the provider reported on it, or it is over: kept, as an escrow move's undo is refused
 * then). Null otherwise. Undone, the payment is deployed again: the deposit address is deterministic and the funds
 * are still in it.
 */
export function unannouncedDeployment(state: PaymentState): { txHash: string; chain: string } | null {
  const deployment = state.deployment;
  if (!deployment || state.phase === 'failed' || state.deploymentConfirmed) return null;
  if (deployment.method !== 'DIRECT' && deployment.method !== 'TWO_STEP') return null;
  if (state.outflowTxs.some((tx) => tx !== deployment.txHash)) return null;
  if (settlementUnderway(state)) return null;
  return { txHash: deployment.txHash, chain: deployment.chain };
}

/**
 * A payment a reorg failed that the canonical chain shows paid after all (PaymentReinstated.v1), once the deposit
 * flow found its recorded deployment on the new fork with the chain's confirmations (RecordDeploymentFound, or the
 * worker's ConfirmDeployment of it): the deployment is a DIRECT or TWO_STEP one nothing moved out of since
 * (`deploymentToVerify`), and what the new fork confirmed into the deposit covers the order again
 * (`confirmedDeposits`). That need not be the lost transfer mined again: the payer's transaction replaced on the new
 * fork by another one paying the address funded the re-mined deploy just as well. Null otherwise: the payment stays
 * failed, and what its deposit holds goes back to the payer.
 */
export function reinstatement(
  state: PaymentState,
): { deployTxHash: string; chain: string; phase: 'settled' | 'escrow_confirmed' } | null {
  const recorded = deploymentToVerify(state);
  const method = state.deployment?.method;
  if (!recorded || (method !== 'DIRECT' && method !== 'TWO_STEP')) return null;
  const detected = detectedAsset(state);
  if (!detected || confirmedDeposits(state, detected.asset) < BigInt(detected.tokenAmount)) return null;
  return {
    deployTxHash: recorded.txHash,
    chain: recorded.chain,
    phase: method === 'DIRECT' ? 'settled' : 'escrow_confirmed',
  };
}

/** Whether `t` is the transfer whose loss failed the payment. */
const isLostTransfer = (
  state: PaymentState,
  t: { chain: string; txHash: string; logIndex: number },
): boolean => {
  const lost = state.lostTransfer;
  return (
    lost !== null &&
    lost.chain === t.chain &&
    lost.txHash.toLowerCase() === t.txHash.toLowerCase() &&
    (lost.logIndex === null || lost.logIndex === t.logIndex)
  );
};

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
 * Funding at or above the dust threshold in an accepted token other than `asset` (no held sanctioned sender's): what
 * configure refuses to leave behind. Held to `asset`, the deposit is deployed bound to it and funds already paid in
 * another token could only be moved by the merchant's rescue, never returned to their payer by recover. The token
 * that holds the funding can still be chosen: a griefer's share of the order blocks a change of token only (and
 * the cancel not at all), not the configure call the payer's own token needs.
 */
function fundingOutside(state: PaymentState, asset: string): AcceptedAsset | null {
  const accepted = state.created?.acceptedAssets ?? [];
  const funded = (a: AcceptedAsset) =>
    sum(
      state.transfers
        .filter((t) => t.asset === a.asset && t.isFunding && !fromSanctioned(state, t))
        .map((t) => BigInt(t.amount)),
    );
  return accepted.find((a) => a.asset !== asset && funded(a) >= dustThreshold(BigInt(a.tokenAmount))) ?? null;
}

/**
 * The order is paid in full: the paying token's funding (confirmed or not) reaches its token amount. What blocks the
 * merchant's cancel: a part of it does not (SPEC: a pending checkout can be cancelled; the part is returned to its
 * payer as any funds left in a cancelled checkout are), so a griefer's share of the order blocks nothing.
 */
export function orderPaidInFull(state: PaymentState): boolean {
  const detected = detectedAsset(state);
  return detected !== null && amountPaid(state) >= BigInt(detected.tokenAmount);
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
 * Whether the payer `payerOf` names before the deploy is not known to be one: that address sent a transaction that
 * minted funds straight to the deposit address. A bridge's mint (CCTP's `receiveMessage`, open to anyone unless the
 * burn named a `destinationCaller`) is sent by whoever relays the message, a front-runner who copied the
 * attestation included, and an issuer's mint by the issuer; the depositor is not on this chain's transfer. Such a
 * payment's deploy attests the merchant's settlement address, so a refund, reclaim or recover never pays the
 * relayer (docs/payments.md, The payer). Once deployed, the attested payer is known.
 */
export function payerUnknown(state: PaymentState): boolean {
  // Deployed: known, unless the merchant disputed it and the admin has not attested another yet.
  if (state.deployment) return state.deployment.payer === null;
  const payer = payerOf(state)?.toLowerCase();
  return (
    payer !== undefined && state.transfers.some((t) => t.minted === true && t.from.toLowerCase() === payer)
  );
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
 * Confirmed tokens of `asset` sent to the deposit address by anyone but a held sanctioned sender, whatever their
 * classification at observation: after a reorg failed the payment, a transfer on the new fork is a straggler by then,
 * yet it is what the deploy mined again there forwarded or escrowed.
 */
const confirmedDeposits = (state: PaymentState, asset: string): bigint =>
  sum(
    state.transfers
      .filter((t) => t.confirmed && t.asset === asset && !fromSanctioned(state, t))
      .map((t) => BigInt(t.amount)),
  );

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
  if (!asset || state.flagged || (state.phase === 'failed' && !lostToReorg(state))) return null;
  const abandoned = isAbandoned(state);
  if (!abandoned && !state.deployment) return null;
  const amount = heldBalance(state, asset) - escrowRemaining(state) - sanctionedBalance(state, asset);
  if (amount <= 0n) return null;
  return { asset, amount, reason: abandoned ? 'abandoned' : 'over_deposit' };
}

/**
 * The order is over and whatever the deposit holds is its payer's: expired, cancelled, or failed by a reorg that
 * took the transfer paying it (funds there are returned to the payer; the payment stays failed).
 */
const isAbandoned = (state: PaymentState): boolean =>
  state.phase === 'expired' || state.phase === 'cancelled' || lostToReorg(state);

/** The checkout's status (SPEC lists checkouts apart from payments): paid once a deposit paying it confirmed. */
export function checkoutStatus(state: PaymentState): 'pending' | 'paid' | 'cancelled' | 'expired' | 'failed' {
  // The deposit that paid it is not on the chain any more: not paid (a reinstatement makes it paid again). A fiat
  // settlement failure stays `paid`: the customer paid; the merchant's payout failed (on the payment).
  if (lostToReorg(state)) return 'failed';
  if (state.depositConfirmed) return 'paid';
  return state.phase === 'cancelled' || state.phase === 'expired' ? state.phase : 'pending';
}

/**
 * An abandoned deposit's surplus below the dust share of the order, not asked for yet: announced, but neither
 * screened nor deployed until the merchant asks to recover it (RequestRecover). One unit anyone sends to a known
 * deposit address cost the operator a screening per sender and a NONE deployment. The share is taken in the payment
 * token when the checkout accepted it (its token amount is known); a token it did not accept has no amount to take a
 * share of, and is deployed as before.
 */
export function dustAwaitingMerchant(state: PaymentState): boolean {
  if (state.dustRecoveryRequestedAt !== null || state.deployment || !isAbandoned(state)) return false;
  if (state.deployRequested && state.deployMethod === 'NONE') return false;
  const surplus = payerSurplus(state);
  if (!surplus) return false;
  const accepted = state.created?.acceptedAssets.find((a) => a.asset === surplus.asset);
  return accepted !== undefined && surplus.amount < dustThreshold(BigInt(accepted.tokenAmount));
}

/**
 * The merchant's recover asked for the deposit of dust (PaymentDustRecoveryRequested) and it is not deployed yet: a
 * recover now is the same request again (202, nothing recorded); once deployed, recover runs as for any deposit.
 */
export function dustRecoveryPending(state: PaymentState): boolean {
  return state.dustRecoveryRequestedAt !== null && !state.deployment;
}

export function paymentStatus(state: PaymentState): PaymentStatus {
  if (state.flagged) return 'flagged';
  // A payment failed by a reorg shows recoverable while funds wait in its deposit, then failed again (as expired).
  if (state.phase === 'failed' && !(lostToReorg(state) && state.recoverable)) return 'failed';
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
  if (state.deployment) {
    const senders = unscreened(
      state,
      state.transfers.filter((t) => t.confirmed),
    );
    const attested = operatorAttestedPayer(state);
    return attested && !senders.includes(attested) ? [...senders, attested] : senders;
  }
  if (state.deployRequested) return [];
  const asset = paymentAsset(state);
  const surplusDue = (payerSurplus(state)?.amount ?? 0n) > 0n && !dustAwaitingMerchant(state);
  const due = (state.depositConfirmed && !lostToReorg(state)) || surplusDue;
  if (!due || !asset) return [];
  // A reorg-failed payment's payer may have sent the lost transfer (unconfirmed now): its NONE deploy attests it.
  return unscreened(
    state,
    state.transfers.filter((t) => (t.confirmed || isLostTransfer(state, t)) && t.asset === asset),
  );
}

/**
 * The payer the admin attested after a dispute (PaymentPayerAttested.v1), lower-cased, while it is the payer and not
 * screened clear: SPEC flags a payment whose payer matches a sanctions list, and this payer never sent a transfer
 * that was screened (nor was it named before the deploy). Null otherwise. A sender held as sanctioned is named too:
 * attested as the payer, its match flags the payment.
 */
function operatorAttestedPayer(state: PaymentState): string | null {
  const payer = state.deployment?.payer?.toLowerCase();
  if (!payer || state.payerLogs.at(-1)?.kind !== 'attested') return null;
  return state.clearedAddresses.includes(payer) ? null : payer;
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

const outflowKey = (tx: string, logIndex: number | undefined): string =>
  logIndex === undefined ? tx : `${tx}#${logIndex}`;

/** Whether this log (or, with no log index, any log of the transaction) is recorded already. */
function outflowRecorded(state: PaymentState, tx: string, logIndex: number | undefined): boolean {
  const key = outflowKey(tx, logIndex);
  return state.outflowLogs.some(
    (k) => k === tx || k === key || (logIndex === undefined && k.startsWith(`${tx}#`)),
  );
}

function addOutflow(
  state: PaymentState,
  asset: string,
  amount: bigint,
  tx: string,
  logIndex?: number,
): PaymentState {
  return {
    ...state,
    outflows: { ...state.outflows, [asset]: (state.outflows[asset] ?? 0n) + amount },
    outflowTxs: [...state.outflowTxs, tx],
    outflowLogs: [...state.outflowLogs, outflowKey(tx, logIndex)],
  };
}

interface OutflowSighting {
  readonly kind: OutflowKind;
  readonly asset: string;
  readonly amount: bigint;
  /** Where the outflow's log was last seen: its first record's, or the log mined again that claimed it. */
  readonly blockHash: string;
  readonly logIndex: number;
}

const addOutflowOf = (
  state: PaymentState,
  d: {
    readonly asset: string;
    readonly amount: string;
    readonly txHash: string;
    readonly logIndex?: number;
    readonly blockHash?: string;
  },
  kind: OutflowKind,
): PaymentState => {
  const s = addOutflow(state, d.asset, BigInt(d.amount), d.txHash, d.logIndex);
  if (d.logIndex === undefined || d.blockHash === undefined) return s;
  const sighting: OutflowSighting = {
    kind,
    asset: d.asset,
    amount: BigInt(d.amount),
    blockHash: d.blockHash,
    logIndex: d.logIndex,
  };
  return { ...s, outflowSightings: { ...s.outflowSightings, [outflowKey(d.txHash, d.logIndex)]: sighting } };
};

const addTo = (
  sums: Readonly<Record<string, bigint>>,
  d: { readonly asset: string; readonly amount: string },
): Readonly<Record<string, bigint>> => ({ ...sums, [d.asset]: (sums[d.asset] ?? 0n) + BigInt(d.amount) });

const awaitConfirmations = (state: PaymentState, tx: string, kind: OutflowKind): PaymentState => ({
  ...state,
  outflowsAwaitingConfirmations: {
    ...state.outflowsAwaitingConfirmations,
    [tx]: [...(state.outflowsAwaitingConfirmations[tx] ?? []), kind],
  },
});

interface EscrowMove {
  readonly kind: 'captured' | 'refunded' | 'reclaimed';
  readonly asset: string;
  readonly amount: bigint;
}

/** A capture, refund or reclaim recorded: it waits for its confirmations, and a reorg before them undoes it. */
function addEscrowMove(
  state: PaymentState,
  kind: EscrowMove['kind'],
  d: PaymentCaptured['data'],
): PaymentState {
  const s = awaitConfirmations(addOutflowOf(state, d, kind), d.txHash, kind);
  const move: EscrowMove = { kind, asset: d.asset, amount: BigInt(d.amount) };
  const moves = { ...s.unconfirmedEscrowMoves, [outflowKey(d.txHash, d.logIndex)]: move };
  const amount = BigInt(d.amount);
  const moved = kind === 'captured' ? { captured: s.captured + amount } : { refunded: s.refunded + amount };
  return afterEscrowMoved({ ...s, ...moved, unconfirmedEscrowMoves: moves });
}

/**
 * Whether the payment holds this outflow log now (recorded, and not undone by a reorg since). With its block: this log
 * of that block (its outflow's record or claim there); an outflow recorded at this index but last seen at another log
 * (a block a reorg took) is not this log: the transaction mined again there is to be recorded (RecordOutflow judges).
 */
export function outflowLogRecorded(
  state: PaymentState,
  tx: string,
  logIndex: number,
  blockHash?: string,
): boolean {
  const t = tx.toLowerCase();
  if (blockHash === undefined) return outflowRecorded(state, t, logIndex);
  const block = blockHash.toLowerCase();
  const seenHere = Object.entries(state.outflowSightings).some(
    ([key, seen]) => key.startsWith(`${t}#`) && seen.blockHash === block && seen.logIndex === logIndex,
  );
  return (
    seenHere || (outflowRecorded(state, t, logIndex) && !outflowSeenElsewhere(state, t, logIndex, block))
  );
}

/** How many times a reorg undid this outflow log (its record after the n-th undo is a new fact). */
export function timesOutflowUndone(state: PaymentState, tx: string, logIndex: number | undefined): number {
  const key = outflowKey(tx, logIndex);
  return state.undoneOutflowLogs.filter((k) => k === key).length;
}

/** The unconfirmed escrow move of this log (or, for a fact without a log index, of the transaction). */
function unconfirmedEscrowMove(
  state: PaymentState,
  tx: string,
  logIndex: number | undefined,
): { readonly key: string; readonly move: EscrowMove } | null {
  for (const key of [outflowKey(tx, logIndex), tx]) {
    const move = state.unconfirmedEscrowMoves[key];
    if (move) return { key, move };
  }
  return null;
}

/** An outflow log being recorded, as the checks for one mined again read it. */
type OutflowLogRecord = Extract<PaymentCommand, { readonly type: 'RecordOutflow' }>;

/**
 * The unconfirmed escrow move of this transaction at another log index that `record` is, mined again: same kind,
 * asset and amount. A second log of one transaction (a batch) recorded from the same receipt has its own key already.
 */
function remintedEscrowMove(
  state: PaymentState,
  record: OutflowLogRecord,
): { readonly logIndex: number; readonly move: EscrowMove } | null {
  if (record.logIndex === undefined) return null;
  const own = outflowKey(record.txHash, record.logIndex);
  // The move recorded at this very index first (a log mined again at the same index is that one).
  const moves = Object.entries(state.unconfirmedEscrowMoves).sort(
    ([a], [b]) => Number(b === own) - Number(a === own),
  );
  for (const [key, move] of moves) {
    if (!key.startsWith(`${record.txHash}#`)) continue;
    const seen = state.outflowSightings[key];
    // Seen in the same block: another log of a batch, not the move mined again.
    if (record.blockHash !== undefined && seen?.blockHash === record.blockHash) continue;
    // An action's receipt records each log of a batch in turn: it is a move mined again only where both blocks are
    // known and differ.
    if (!record.atConfirmations && (record.blockHash === undefined || seen === undefined)) continue;
    if (move.kind !== record.kind || move.asset !== record.asset || move.amount !== BigInt(record.amount))
      continue;
    return { logIndex: Number(key.slice(record.txHash.length + 1)), move };
  }
  return null;
}

/**
 * Whether `record`, a recover or rescue log, is one of this transaction recorded at another log index and awaiting its
 * confirmations: the same outflow mined again in another block (our own action records every log of its receipt).
 */
function remintedUndoneNever(state: PaymentState, record: OutflowLogRecord): boolean {
  if (record.logIndex === undefined || (record.kind !== 'recovered' && record.kind !== 'rescued'))
    return false;
  if (!(state.outflowsAwaitingConfirmations[record.txHash] ?? []).includes(record.kind)) return false;
  const logs = state.outflowLogs.filter((k) => k.startsWith(`${record.txHash}#`));
  // Every log of it recorded with its block, and this one's known: the blocks tell (minedAgainClaim), one to one.
  if (record.blockHash !== undefined && logs.every((k) => state.outflowSightings[k] !== undefined))
    return false;
  return logs.length > 0;
}

/** Whether `record`, this log of this block, is recorded already (its outflow's record, or its claim of one). */
function outflowLogSeen(state: PaymentState, record: OutflowLogRecord): boolean {
  if (record.logIndex === undefined || record.blockHash === undefined) return false;
  return Object.entries(state.outflowSightings).some(
    ([key, seen]) =>
      key.startsWith(`${record.txHash}#`) &&
      seen.blockHash === record.blockHash &&
      seen.logIndex === record.logIndex,
  );
}

/**
 * Whether the outflow recorded at this log index of the transaction was last seen at another log than this index of
 * `blockHash` (another block, or claimed by another log of it): a log at this index of `blockHash` is then the
 * transaction mined again there (log indexes are per block), not that outflow's log.
 */
export function outflowSeenElsewhere(
  state: PaymentState,
  txHash: string,
  logIndex: number,
  blockHash: string | undefined,
): boolean {
  const seen = state.outflowSightings[outflowKey(txHash, logIndex)];
  return (
    blockHash !== undefined &&
    seen !== undefined &&
    (seen.blockHash !== blockHash || seen.logIndex !== logIndex)
  );
}

/**
 * The recorded outflow `record` is, mined again in another block (its log index): a transaction is in one block of the
 * chain, so its logs seen in block B stand for those recorded from a block B' a reorg took back (matched by kind,
 * asset and amount), however deep the reorg and whether or not they were confirmed. One to one: an outflow already
 * seen in B (recorded from B, or claimed by another log of B) is not claimed again, so two logs of one block (a batch)
 * are two outflows and a log with no counterpart left is a new one. The outflow recorded at this very index first,
 * then the earliest recorded. An undoable escrow move is taken by `remintedEscrowMove` instead. A fact or sighting
 * without its block (from before it was kept) matches nothing.
 */
function minedAgainClaim(state: PaymentState, record: OutflowLogRecord): number | null {
  if (record.logIndex === undefined || record.blockHash === undefined) return null;
  const amount = BigInt(record.amount);
  const prefix = `${record.txHash}#`;
  const claimable = Object.entries(state.outflowSightings).filter(
    ([key, seen]) =>
      key.startsWith(prefix) &&
      state.unconfirmedEscrowMoves[key] === undefined &&
      seen.blockHash !== record.blockHash &&
      seen.kind === record.kind &&
      seen.asset === record.asset &&
      seen.amount === amount,
  );
  const own = outflowKey(record.txHash, record.logIndex);
  const [key] = claimable.find(([k]) => k === own) ?? claimable[0] ?? [];
  return key === undefined ? null : Number(key.slice(prefix.length));
}

const withoutOne = <T>(list: readonly T[], item: T): T[] => {
  const at = list.indexOf(item);
  return at < 0 ? [...list] : [...list.slice(0, at), ...list.slice(at + 1)];
};

const withoutKey = <T>(record: Readonly<Record<string, T>>, key: string): Record<string, T> => {
  const { [key]: _dropped, ...rest } = record;
  return rest;
};

/** An escrow move a reorg took back before its confirmations: the escrow holds it again. */
function undoEscrowMove(state: PaymentState, event: PaymentOutflowRetracted): PaymentState {
  const { txHash, logIndex, kind, asset } = event.data;
  const amount = BigInt(event.data.amount);
  const key = unconfirmedEscrowMove(state, txHash, logIndex)?.key ?? outflowKey(txHash, logIndex);
  const { [key]: _undone, ...moves } = state.unconfirmedEscrowMoves;
  const { [txHash]: waiting = [], ...awaiting } = state.outflowsAwaitingConfirmations;
  const left = withoutOne(waiting, kind);
  const s: PaymentState = {
    ...state,
    outflows: { ...state.outflows, [asset]: (state.outflows[asset] ?? 0n) - amount },
    outflowTxs: withoutOne(state.outflowTxs, txHash),
    outflowLogs: withoutOne(state.outflowLogs, key),
    outflowsAwaitingConfirmations: left.length > 0 ? { ...awaiting, [txHash]: left } : awaiting,
    unconfirmedEscrowMoves: moves,
    outflowSightings: withoutKey(state.outflowSightings, key),
    undoneOutflowLogs: [...state.undoneOutflowLogs, key],
    captured: kind === 'captured' ? state.captured - amount : state.captured,
    refunded: kind === 'captured' ? state.refunded : state.refunded - amount,
  };
  // Drained by this move (afterEscrowMoved): capturable and refundable again. The fiat settlement it opened (nothing
  // reported on it: RetractOutflow) is dropped: the next drain opens one from its own time (SPEC deadlines).
  const drained = s.phase === 'settled' || s.phase === 'refunded';
  return drained && escrowRemaining(s) > 0n ? { ...s, phase: 'escrow_confirmed', settlement: null } : s;
}

/** A fiat settlement the provider reported on, or over: past what an undone escrow move may take back. */
const settlementUnderway = (state: PaymentState): boolean =>
  state.settlement !== null &&
  (state.settlement.provider.reportIds.length > 0 || !isSettlementOpen(state.settlement));

/** A capture, refund or reclaim of `tx` confirmed: one of its unconfirmed moves of that kind is no longer undoable. */
function escrowMoveConfirmed(state: PaymentState, tx: string, kind: OutflowKind): PaymentState {
  const key = Object.keys(state.unconfirmedEscrowMoves).find(
    (k) => (k === tx || k.startsWith(`${tx}#`)) && state.unconfirmedEscrowMoves[k]?.kind === kind,
  );
  if (key === undefined) return state;
  const { [key]: _confirmed, ...moves } = state.unconfirmedEscrowMoves;
  return { ...state, unconfirmedEscrowMoves: moves };
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
      // The transfer that failed the payment, re-included and then taken again: listed still, out of the balance.
      if (isLostTransfer(state, event.data)) return unconfirm(state, match);
      return { ...state, transfers: state.transfers.filter((t) => !match(t)) };
    }
    case 'PaymentTransferReincluded.v1': {
      const match = sameTransfer(event.data);
      return {
        ...state,
        transfers: state.transfers.map((t) =>
          match(t) ? { ...t, blockNumber: event.data.blockNumber, confirmed: false } : t,
        ),
      };
    }
    case 'PaymentTransferReclassified.v1': {
      const match = sameTransfer(event.data);
      const { isFunding, nonFundingReason } = event.data;
      return {
        ...state,
        transfers: state.transfers.map((t) => (match(t) ? { ...t, isFunding, nonFundingReason } : t)),
      };
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
      return {
        ...state,
        deployRequested: true,
        deployMethod: event.data.method,
        deployAsset: state.deployAsset ?? event.data.asset,
      };
    case 'PaymentDeployHeld.v1':
      return { ...state, deployHold: { chain: event.data.chain, reason: event.data.reason } };
    case 'PaymentSettled.v1': {
      const amount = BigInt(event.data.amount);
      const deployed = withDeployment(state, event.data, 'DIRECT');
      const asset = paymentAsset(state) ?? '';
      return {
        ...failureUndone(addOutflow(deployed, asset, amount, event.data.deployTxHash)),
        phase: 'settled',
        forwarded: amount,
        // Recorded before the webhook waited for the confirmations: announced from the fact itself.
        deploymentConfirmed: !event.data.announcedAtConfirmations,
      };
    }
    case 'PaymentEscrowFunded.v1':
      return {
        ...failureUndone(withDeployment(state, event.data, 'TWO_STEP')),
        phase: 'escrow_confirmed',
        escrowFunded: BigInt(event.data.amount),
        authorizationExpiry: event.data.authorizationExpiry,
        deploymentConfirmed: !event.data.announcedAtConfirmations,
      };
    case 'PaymentDepositDeployed.v1':
      return withDeployment(state, event.data, 'NONE');
    case 'PaymentDeploymentConfirmed.v1':
      return { ...state, deploymentConfirmed: true };
    case 'PaymentReinstated.v1':
      // Decided at the re-mined deploy's confirmations and announced by itself (as it was before it waited for them):
      // the deploy's confirmation after it announces nothing again.
      return { ...failureUndone(state), phase: event.data.phase, deploymentConfirmed: true };
    case 'PaymentDustRecoveryRequested.v1':
      return { ...state, dustRecoveryRequestedAt: event.data.requestedAt };
    case 'PaymentDeploymentLost.v1': {
      const deployment = state.deployment;
      if (!deployment || deployment.txHash !== event.data.deployTxHash) return state;
      const asset = paymentAsset(state) ?? '';
      return {
        ...state,
        // The funding stands (not failed): back where the deploy found it, paid and its deploy requested (the flow
        // deploys it again). The fiat payout the settle opened (nothing reported on it) goes with it; the next
        // settle opens one from its own time.
        ...(state.phase === 'failed' ? {} : { phase: 'pending' as const, settlement: null }),
        deployment: null,
        deploymentConfirmed: false,
        deploymentsLost: state.deploymentsLost + 1,
        authorizationExpiry: null,
        escrowFunded: 0n,
        forwarded: 0n,
        outflows: { ...state.outflows, [asset]: (state.outflows[asset] ?? 0n) - state.forwarded },
        outflowTxs: state.outflowTxs.filter((tx) => tx !== deployment.txHash),
        outflowLogs: state.outflowLogs.filter((k) => k !== deployment.txHash),
      };
    }
    case 'PaymentRecoverable.v1':
      return {
        ...state,
        recoverable: {
          reason: event.data.reason,
          destination: event.data.destination,
          payerUnknown: event.data.payerUnknown === true,
          asset: event.data.asset,
          amount: BigInt(event.data.amount),
        },
      };
    case 'PaymentCaptureRequested.v1':
    case 'PaymentRefundRequested.v1':
    case 'PaymentRescueRequested.v1':
    case 'PaymentRecoverRequested.v1':
      return state;
    case 'PaymentPayerDisputeRequested.v1':
      // Facts from before the deadline was kept hold nothing back (their relay's outcome is long known).
      return event.data.deadline === undefined
        ? state
        : { ...state, payerDisputeRequest: { payer: event.data.payer, deadline: event.data.deadline } };
    case 'PaymentPayerDisputeFailed.v1':
      return { ...state, payerDisputeRequest: null };
    case 'PaymentPayerDisputed.v1':
      return withPayerLog(state, { kind: 'disputed', finalAt: null, ...event.data });
    case 'PaymentPayerAttested.v1':
      return withPayerLog(state, { kind: 'attested', ...event.data });
    case 'PaymentPayerLogRetracted.v1':
      return withPayerLogs(
        state,
        state.payerLogs.filter((l) => !retractedBy(l, event.data)),
      );
    case 'PaymentCaptured.v1':
      return addEscrowMove(state, 'captured', event.data);
    case 'PaymentRefunded.v1':
      return addEscrowMove(state, 'refunded', event.data);
    case 'PaymentReclaimed.v1':
      return addEscrowMove(state, 'reclaimed', event.data);
    case 'PaymentOutflowRetracted.v1':
      return undoEscrowMove(state, event);
    case 'PaymentOutflowMinedAgain.v1': {
      // The outflow is now seen where it was mined again: no other log of that block claims it.
      const key = outflowKey(event.data.txHash, event.data.recordedLogIndex);
      const seen = state.outflowSightings[key];
      if (!seen) return state;
      const moved = { ...seen, blockHash: event.data.blockHash, logIndex: event.data.logIndex };
      return { ...state, outflowSightings: { ...state.outflowSightings, [key]: moved } };
    }
    case 'PaymentRecovered.v1': {
      const s = addOutflowOf(state, event.data, 'recovered');
      return {
        ...awaitConfirmations(s, event.data.txHash, 'recovered'),
        recoverable: null,
        recovered: addTo(state.recovered, event.data),
      };
    }
    case 'PaymentRescued.v1': {
      const s = addOutflowOf(state, event.data, 'rescued');
      return {
        ...awaitConfirmations(s, event.data.txHash, 'rescued'),
        rescued: addTo(state.rescued, event.data),
      };
    }
    case 'PaymentCaptureConfirmed.v1':
    case 'PaymentRefundConfirmed.v1':
    case 'PaymentReclaimConfirmed.v1':
    case 'PaymentRecoveryConfirmed.v1':
    case 'PaymentRescueConfirmed.v1': {
      // One outflow of the transaction confirmed: the kind its fact names (another outflow of it may still wait).
      const { [event.data.txHash]: waiting = [], ...rest } = state.outflowsAwaitingConfirmations;
      const kind = CONFIRMED_KIND[event.type];
      const at = waiting.indexOf(kind);
      const left = at < 0 ? [] : [...waiting.slice(0, at), ...waiting.slice(at + 1)];
      return {
        ...escrowMoveConfirmed(state, event.data.txHash, kind),
        outflowsAwaitingConfirmations: left.length > 0 ? { ...rest, [event.data.txHash]: left } : rest,
      };
    }
    case 'PaymentAssetSelected.v1':
      return { ...state, selectedAsset: event.data.asset };
    case 'PaymentCancelled.v1':
      return { ...state, phase: 'cancelled' };
    case 'PaymentExpired.v1':
      return { ...state, phase: 'expired' };
    case 'PaymentFailed.v1': {
      const lostTransfer = {
        chain: event.data.chain,
        txHash: event.data.txHash,
        logIndex: event.data.logIndex ?? null,
      };
      // The chain no longer holds it: listed (what failed the payment), out of the held balance.
      const next = { ...state, lostTransfer };
      return {
        ...unconfirm(next, (t) => isLostTransfer(next, t)),
        phase: 'failed',
        recoverable: null,
        failure: {
          reason: event.data.reason,
          message: `The confirmed deposit ${event.data.txHash} on ${event.data.chain} was lost to a chain reorganization.`,
        },
      };
    }
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
        ? {
            ...withSettlement(state, {
              provider: evolveProviderProgress(state.settlement.provider, event.data),
            }),
            settlementPaidOut: state.settlementPaidOut || event.data.kind === 'payout_completed',
          }
        : state;
    case 'PaymentSettlementCompleted.v1':
      return { ...withSettlement(state, { status: 'completed' }), settlementPaidOut: true };
    case 'PaymentSettlementExposed.v1':
      return { ...state, settlementExposure: { reason: event.data.reason, at: event.data.at } };
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

/**
 * A payment a reorg failed whose order the chain shows paid after all (PaymentReinstated, or the deploy of its
 * order found on the new fork after the one recorded before was lost): the failure and the abandoned-funds notice
 * of the failed order go; the lost transfer is an ordinary one again. Any other payment is returned as it is.
 */
function failureUndone(state: PaymentState): PaymentState {
  if (!lostToReorg(state)) return state;
  // The crypto the payout was made for is back: the payout stands, nothing is owed back.
  return { ...state, failure: null, lostTransfer: null, recoverable: null, settlementExposure: null };
}

function unconfirm(state: PaymentState, match: (t: TransferState) => boolean): PaymentState {
  return { ...state, transfers: state.transfers.map((t) => (match(t) ? { ...t, confirmed: false } : t)) };
}

function withDeployment(
  state: PaymentState,
  d: { deployTxHash: string; chain: string; payer: string; payerFinalAt: string },
  method: PaymentMethod | 'NONE',
): PaymentState {
  return {
    ...state,
    deployHold: null,
    deployment: {
      txHash: d.deployTxHash,
      chain: d.chain,
      payer: d.payer,
      payerFinalAt: d.payerFinalAt,
      method,
    },
    // A new deployment (a NONE deploy after a lost one) is a new contract: no dispute or attestation of it yet.
    deployPayer: { payer: d.payer, finalAt: d.payerFinalAt },
    payerLogs: [],
    payerDisputeRequest: null,
  };
}

const sameLog = (a: { txHash: string; logIndex: number }, b: { txHash: string; logIndex: number }) =>
  a.txHash.toLowerCase() === b.txHash.toLowerCase() && a.logIndex === b.logIndex;

/** A log recorded before blocks were kept goes first (stream order); the others by block, then log index. */
function payerLogOrder(a: PayerLogState, b: PayerLogState): number {
  if (a.blockNumber === null || b.blockNumber === null) {
    return (a.blockNumber === null ? 0 : 1) - (b.blockNumber === null ? 0 : 1);
  }
  if (a.blockNumber !== b.blockNumber) return a.blockNumber < b.blockNumber ? -1 : 1;
  return a.logIndex - b.logIndex;
}

/** The retraction names the block it took; a log recorded before blocks were kept is matched by its log alone. */
const retractedBy = (l: PayerLogState, r: { txHash: string; logIndex: number; blockHash: string }) =>
  sameLog(l, r) && (l.blockHash === null || l.blockHash === r.blockHash.toLowerCase());

function withPayerLog(
  state: PaymentState,
  d: {
    kind: PayerLogState['kind'];
    chain: string;
    txHash: string;
    logIndex: number;
    blockNumber?: string;
    blockHash?: string;
    payer: string;
    finalAt: string | null;
  },
): PaymentState {
  if (!state.deployment) return state;
  const log: PayerLogState = {
    kind: d.kind,
    chain: d.chain,
    txHash: d.txHash.toLowerCase(),
    logIndex: d.logIndex,
    blockNumber: d.blockNumber === undefined ? null : BigInt(d.blockNumber),
    blockHash: d.blockHash?.toLowerCase() ?? null,
    payer: d.payer,
    finalAt: d.finalAt,
  };
  // A log recorded before blocks were kept, delivered again with its block (at least once, across the upgrade): the
  // same sighting. It learns its block where it stands, in stream order, so it neither moves behind the other old logs
  // nor is retracted by another block's retraction; only its own block's takes it back.
  const unblocked = state.payerLogs.find((l) => sameLog(l, log) && l.blockHash === null);
  if (unblocked && log.blockHash !== null) {
    const blockHash = log.blockHash;
    return withPayerLogs(
      state,
      state.payerLogs.map((l) => (l === unblocked ? { ...l, blockHash } : l)),
    );
  }
  // The same log seen in another block is the transaction mined again after a reorg: it stands there instead.
  return withPayerLogs(state, [...state.payerLogs.filter((l) => !sameLog(l, log)), log]);
}

/**
 * The payer now is the one the last log in block order leaves (a dispute: none; an attestation: its payer), else the
 * deployment's: each log replaces the deposit's payer outright, so logs read out of block order, or one of them taken
 * back by a reorg, still leave the chain's payer.
 */
function withPayerLogs(state: PaymentState, logs: readonly PayerLogState[]): PaymentState {
  const deployment = state.deployment;
  if (!deployment) return state;
  const payerLogs = [...logs].sort(payerLogOrder);
  const last = payerLogs.at(-1);
  const payer = last ? (last.kind === 'attested' ? last.payer : null) : (state.deployPayer?.payer ?? null);
  const payerFinalAt = last ? last.finalAt : (state.deployPayer?.finalAt ?? null);
  const disputedNow = last?.kind === 'disputed';
  return {
    ...state,
    deployment: { ...deployment, payer, payerFinalAt },
    payerLogs,
    // The requested dispute landed (or another log replaced the payer it named): the request is answered.
    payerDisputeRequest:
      state.payerDisputeRequest && payer?.toLowerCase() === state.payerDisputeRequest.payer.toLowerCase()
        ? state.payerDisputeRequest
        : null,
    // The announced destination is no payer while disputed: shown unknown until one is attested.
    recoverable:
      state.recoverable && disputedNow ? { ...state.recoverable, payerUnknown: true } : state.recoverable,
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
      /**
       * The merchant disputes the attested payer (its DisputePayer signature passed preflight). `now` is the deposit
       * chain's time: the challenge period is judged as the contract judges it.
       */
      readonly type: 'RequestPayerDispute';
      /** The signature's deadline (chain time): the request holds a second dispute back until then at most. */
      readonly deadline?: Date;
      readonly now: Date;
    }
  | {
      /** Our relay of the requested dispute was refused at the broadcast or reverted: nothing changed on chain. */
      readonly type: 'RecordPayerDisputeFailed';
      readonly txHash: string | null;
      readonly now: Date;
    }
  | {
      /** The deposit's PayerDisputed log, as the indexer saw it (in `blockNumber` / `blockHash`). */
      readonly type: 'RecordPayerDisputed';
      readonly chain: string;
      readonly txHash: string;
      readonly logIndex: number;
      readonly blockNumber: string;
      readonly blockHash: string;
      readonly payer: string;
      readonly now: Date;
    }
  | {
      /** The deposit's PayerAttested log (the deployment's own is part of the deployment fact and records nothing). */
      readonly type: 'RecordPayerAttested';
      readonly chain: string;
      readonly txHash: string;
      readonly logIndex: number;
      readonly blockNumber: string;
      readonly blockHash: string;
      readonly payer: string;
      readonly finalAt: Date;
      readonly now: Date;
    }
  | {
      /** The indexer retracted the block a deposit log was seen in (a reorg): a payer log recorded from it is undone. */
      readonly type: 'RetractPayerLog';
      readonly chain: string;
      readonly txHash: string;
      readonly logIndex: number;
      readonly blockHash: string;
      readonly now: Date;
    }
  | {
      /** The deposit flow found no contract at the deposit address of a payment a reorg failed after its deploy. */
      readonly type: 'RecordDeploymentLost';
      readonly deployTxHash: string;
      readonly now: Date;
    }
  | {
      /**
       * The deposit flow found the deployment recorded for a payment a reorg failed on the new fork (the deploy landed
       * again there), its transaction in a canonical block with the chain's confirmations: reinstated once the funding
       * confirmed there covers the order.
       */
      readonly type: 'RecordDeploymentFound';
      readonly deployTxHash: string;
      readonly now: Date;
    }
  | {
      /** The deposit worker saw the deploy's transaction `txHash` with the chain's confirmations (after RecordDeployed). */
      readonly type: 'ConfirmDeployment';
      readonly txHash: string;
      readonly now: Date;
    }
  | {
      /** The deposit worker saw the outflow of `txHash` with the chain's confirmations (after RecordOutflow). */
      readonly type: 'ConfirmOutflow';
      readonly txHash: string;
      readonly now: Date;
    }
  | {
      /** A reorg took the block of this outflow log back before the deposit worker confirmed it. */
      readonly type: 'RetractOutflow';
      readonly txHash: string;
      readonly logIndex: number;
      /**
       * The block taken back (lowercase), when known: a record of the log from another block (the transaction mined
       * again and recorded there) is not the one taken back, and stays.
       */
      readonly blockHash?: string;
      readonly now: Date;
    }
  | {
      readonly type: 'RecordOutflow';
      readonly kind: OutflowKind;
      readonly txHash: string;
      /** The outflow's log in the transaction (absent: the whole transaction, as before it was kept). */
      readonly logIndex?: number;
      /** The block the log was seen in, lowercase (absent where the sighting has none). */
      readonly blockHash?: string;
      /** That block's number (absent where the sighting has none). */
      readonly blockNumber?: string;
      readonly asset: string;
      readonly amount: string;
      readonly to: string;
      /**
       * The deposit worker's sighting at the chain's confirmations: the transaction's block is final, so an unconfirmed
       * move of it at another log index was recorded from a block a reorg took back. Absent from an action's receipt,
       * which records each log of a batch in turn (two equal captures of one transaction are two moves there).
       */
      readonly atConfirmations?: boolean;
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

/** The fact `ConfirmOutflow` records for each kind of outflow (the one its webhook comes from). */
const OUTFLOW_CONFIRMED_EVENT = {
  captured: 'PaymentCaptureConfirmed.v1',
  refunded: 'PaymentRefundConfirmed.v1',
  reclaimed: 'PaymentReclaimConfirmed.v1',
  recovered: 'PaymentRecoveryConfirmed.v1',
  rescued: 'PaymentRescueConfirmed.v1',
} as const;

const CONFIRMED_KIND: Readonly<Record<(typeof OUTFLOW_CONFIRMED_EVENT)[OutflowKind], OutflowKind>> = {
  'PaymentCaptureConfirmed.v1': 'captured',
  'PaymentRefundConfirmed.v1': 'refunded',
  'PaymentReclaimConfirmed.v1': 'reclaimed',
  'PaymentRecoveryConfirmed.v1': 'recovered',
  'PaymentRescueConfirmed.v1': 'rescued',
};

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
  if (state.depositConfirmed && !lostToReorg(state)) {
    const detected = detectedAsset(without);
    return detected !== null && confirmedFunding(without) >= BigInt(detected.tokenAmount);
  }
  const abandoned = isAbandoned(state);
  // No order was paid to test against: the payer is the one payerOf names (the largest sender). Held only when that
  // is someone else; otherwise one unit from a second wallet would turn a sanctioned payer into "dust".
  if (payerOf(state)?.toLowerCase() === address.toLowerCase()) return false;
  const asset = paymentAsset(without);
  return abandoned && asset !== null && payerOf(without) !== null && payerSurplus(without) !== null;
}

/** The deployment, for a payer dispute or attestation (409 `deposit_not_deployed` before it). */
function attestedDeployment(state: PaymentState): NonNullable<PaymentState['deployment']> {
  if (!state.deployment) {
    throw conflict('deposit_not_deployed', 'The deposit contract is not deployed yet; no payer is attested.');
  }
  return state.deployment;
}

/** Refund and recover go only to an attested payer: none after a dispute until the admin attests one. */
function refusePayerDisputed(state: PaymentState): void {
  if (state.deployment && state.deployment.payer === null) {
    throw cannotProcess(
      'payer_unknown',
      'The merchant disputed the payer and no payer is attested now; the operator attests the right one first.',
    );
  }
  // Screened as the first payer was before the deploy: nothing goes to it before its result.
  const attested = operatorAttestedPayer(state);
  if (attested) {
    throw conflict(
      'payer_screening_pending',
      `The payer attested after the dispute (${attested}) is not screened yet; retry once it is.`,
    );
  }
}

/**
 * The admin's attestation (`attestPayer`, the registry admin's cold key) is possible only after the merchant
 * disputed the payer: 409 `deposit_not_deployed` before the deploy, 409 `payer_not_disputed` while a payer stands.
 */
export function assertPayerAttestable(state: PaymentState): NonNullable<PaymentState['deployment']> {
  requireCreated(state);
  const deployment = attestedDeployment(state);
  if (deployment.payer !== null) {
    throw conflict(
      'payer_not_disputed',
      `The payer ${deployment.payer} stands (not disputed by the merchant); only a disputed payer can be attested again.`,
      'payer',
    );
  }
  return deployment;
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
  /**
   * The recorded deploy `deployTxHash` of a payment a reorg failed is on the new fork with the chain's confirmations:
   * reinstated when the funding confirmed there covers the order, else nothing yet (the flow asks again on the next
   * confirmation). Another transaction than the recorded deploy reinstates nothing.
   */
  const reinstate = (deployTxHash: string): void => {
    const back = reinstatement(s);
    if (back?.deployTxHash.toLowerCase() !== deployTxHash.toLowerCase()) return;
    emit({ type: 'PaymentReinstated.v1', data: { ...back, at } });
  };
  switch (command.type) {
    case 'CreateCheckout': {
      if (s.created) throw conflict('checkout_exists', `Checkout ${command.checkoutId} already exists.`);
      emit({ type: 'PaymentCreated.v1', data: validateCreate(command) });
      return;
    }
    case 'ObserveTransfer': {
      requireCreated(s);
      const t = command.transfer;
      const listed = s.transfers.find(sameTransfer(t));
      if (listed) {
        // The transfer whose loss failed the payment, mined again on the new fork: listed at its new block, and
        // confirmed there like any transfer (then returned to the payer). The same sighting again is a redelivery.
        if (lostToReorg(s) && isLostTransfer(s, listed) && listed.blockNumber !== t.blockNumber) {
          emit({
            type: 'PaymentTransferReincluded.v1',
            data: {
              chain: t.chain,
              txHash: listed.txHash,
              logIndex: t.logIndex,
              blockNumber: t.blockNumber,
              observedAt: at,
            },
          });
        }
        return; // the indexer may deliver a log twice
      }
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
          data: {
            reason: 'deposit_lost_to_reorg',
            txHash: t.txHash,
            chain: t.chain,
            logIndex: t.logIndex,
            failedAt: at,
          },
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
        // SPEC flags the payment when its payer matches. A sender the order does not need is not the payer
        // (anyone can send to a public deposit address): its funds are held, the payer's payment goes on. Once the
        // deploy is requested the payer was screened clear: any later match is another sender's, unless it is the
        // payer the admin attested after a dispute (screened only then; held already as a sender or not).
        const attested = s.deployRequested && payerOf(s)?.toLowerCase() === r.address.toLowerCase();
        if (!attested && s.sanctionedSenders.includes(r.address.toLowerCase())) return; // a stale result again
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
          data: {
            ...fact,
            amount: command.amount,
            settlementAddress: command.settlementAddress,
            announcedAtConfirmations: true,
          },
        });
      } else if (command.method === 'TWO_STEP') {
        emit({
          type: 'PaymentEscrowFunded.v1',
          data: {
            ...fact,
            amount: command.amount,
            authorizationExpiry: command.authorizationExpiry.toISOString(),
            announcedAtConfirmations: true,
          },
        });
      } else {
        emit({ type: 'PaymentDepositDeployed.v1', data: fact });
      }
      return;
    }
    case 'RecordDeploymentLost': {
      requireCreated(s);
      // A failed payment's deploy the flow found gone (the reorg took the funding too), or a deploy taken back before
      // its confirmations while the funding stands (the receipt pass found it on no chain).
      const deployment = deploymentToVerify(s) ?? unannouncedDeployment(s);
      if (deployment?.txHash.toLowerCase() !== command.deployTxHash.toLowerCase()) return;
      emit({
        type: 'PaymentDeploymentLost.v1',
        data: { deployTxHash: deployment.txHash, chain: deployment.chain, at },
      });
      return;
    }
    case 'RecordDeploymentFound': {
      requireCreated(s);
      reinstate(command.deployTxHash);
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
      refusePayerDisputed(s);
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
      if (dustAwaitingMerchant(s)) {
        // Asked for now: the flow screens its senders and deploys it; the recover itself comes after (the caller
        // answers 202 with the request on the payment, see PaymentActions.recover).
        emit({ type: 'PaymentDustRecoveryRequested.v1', data: { requestedAt: at } });
        return;
      }
      // Asked already and the deploy is on its way: the same request again, nothing new to record.
      if (dustRecoveryPending(s)) return;
      if (!s.deployment) {
        throw conflict('deposit_not_deployed', 'The deposit contract is being deployed; recover once it is.');
      }
      // The contract's recover returns the whole balance above the escrow: it would carry the held funds along.
      refuseUnscreenedFunds(s, s.recoverable.asset, sanctionedBalance(s, s.recoverable.asset) > 0n);
      refusePayerDisputed(s);
      if (s.deployment.payer === null || s.deployment.payerFinalAt === null) return;
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
    case 'RequestPayerDispute': {
      requireCreated(s);
      const deployment = attestedDeployment(s);
      if (deployment.payer === null || deployment.payerFinalAt === null) {
        throw conflict(
          'payer_disputed',
          'The payer was disputed already; no payer is attested until the operator attests the right one.',
        );
      }
      if (command.now.getTime() >= Date.parse(deployment.payerFinalAt)) {
        throw conflict(
          'payer_already_final',
          `The payer ${deployment.payer} became final at ${deployment.payerFinalAt}; it can no longer be disputed.`,
        );
      }
      const pending = s.payerDisputeRequest;
      if (pending && command.now.getTime() < Date.parse(pending.deadline)) {
        throw conflict(
          'payer_dispute_pending',
          `A dispute of the payer ${pending.payer} is being relayed; its outcome shows on the payment (payer_status) once the deposit's log is seen on chain.`,
        );
      }
      emit({
        type: 'PaymentPayerDisputeRequested.v1',
        data: {
          payer: deployment.payer,
          requestedAt: at,
          ...(command.deadline ? { deadline: command.deadline.toISOString() } : {}),
        },
      });
      return;
    }
    case 'RecordPayerDisputeFailed': {
      requireCreated(s);
      if (!s.payerDisputeRequest) return;
      emit({ type: 'PaymentPayerDisputeFailed.v1', data: { txHash: command.txHash, at } });
      return;
    }
    case 'RecordPayerDisputed':
    case 'RecordPayerAttested': {
      requireCreated(s);
      // The deployment's own attestation is the deployment fact; an attestation before any deployment is recorded is
      // the deploy's too (its fact follows).
      if (!s.deployment || s.deployment.txHash.toLowerCase() === command.txHash.toLowerCase()) return;
      // The same log of the same block seen again (a redelivery): nothing new. A log of an earlier block read late
      // (after a later one) is recorded all the same: it takes effect in block order, behind the later log, and
      // counts again if a reorg takes that one back.
      const blockHash = command.blockHash.toLowerCase();
      if (s.payerLogs.some((l) => sameLog(l, command) && l.blockHash === blockHash)) return;
      const log = {
        chain: command.chain,
        txHash: command.txHash.toLowerCase(),
        logIndex: command.logIndex,
        blockNumber: command.blockNumber,
        blockHash,
        payer: command.payer,
      };
      if (command.type === 'RecordPayerDisputed') {
        emit({ type: 'PaymentPayerDisputed.v1', data: { ...log, at } });
      } else {
        emit({
          type: 'PaymentPayerAttested.v1',
          data: { ...log, finalAt: command.finalAt.toISOString(), at },
        });
      }
      return;
    }
    case 'RetractPayerLog': {
      requireCreated(s);
      if (!s.payerLogs.some((l) => retractedBy(l, command))) return;
      emit({
        type: 'PaymentPayerLogRetracted.v1',
        data: {
          chain: command.chain,
          txHash: command.txHash.toLowerCase(),
          logIndex: command.logIndex,
          blockHash: command.blockHash.toLowerCase(),
          at,
        },
      });
      return;
    }
    case 'ConfirmDeployment': {
      requireCreated(s);
      // The recorded deploy of a payment a reorg failed, mined again on the new fork, has its confirmations there:
      // the payment is reinstated (which announces it) or stays failed; never payment.settled while failed.
      if (lostToReorg(s)) {
        reinstate(command.txHash);
        return;
      }
      // A repeat, a NONE deployment (nothing announced) or a transaction that is not the recorded deploy: nothing.
      const deployment = s.deployment;
      if (!deployment || s.deploymentConfirmed || deployment.method === 'NONE') return;
      if (deployment.txHash.toLowerCase() !== command.txHash.toLowerCase()) return;
      emit({
        type: 'PaymentDeploymentConfirmed.v1',
        data: { deployTxHash: deployment.txHash, method: deployment.method, reachedConfirmationsAt: at },
      });
      return;
    }
    case 'ConfirmOutflow': {
      requireCreated(s);
      // A repeat, or a transaction that is no recorded outflow, records nothing; each outflow of it is confirmed.
      for (const kind of s.outflowsAwaitingConfirmations[command.txHash] ?? []) {
        emit({
          type: OUTFLOW_CONFIRMED_EVENT[kind],
          data: { txHash: command.txHash, reachedConfirmationsAt: at },
        });
      }
      return;
    }
    case 'RetractOutflow': {
      requireCreated(s);
      // Only an escrow move is undone (the escrow's amounts say what it holds). A recover or rescue is not: a recover
      // cleared the recoverable notice, which its undo cannot restore; those stay recorded and an operator is told.
      // An outflow already confirmed, or not recorded, records nothing either.
      const found = unconfirmedEscrowMove(s, command.txHash, command.logIndex);
      if (!found) return;
      // Recorded from another block than the one taken back: the transaction mined again there, which stands.
      const seenIn = s.outflowSightings[found.key]?.blockHash;
      if (command.blockHash !== undefined && seenIn !== undefined && seenIn !== command.blockHash) return;
      // The fiat settlement the move opened has gone on (the provider reported on it, or it is over): its payout may
      // be made, and undoing the move would let the escrow be captured or refunded again beside it. The fact stays and
      // an operator is told, as for a deeper reorg.
      if (settlementUnderway(s)) return;
      const logIndex = found.key === command.txHash ? undefined : command.logIndex;
      emit({
        type: 'PaymentOutflowRetracted.v1',
        data: {
          txHash: command.txHash,
          ...(logIndex !== undefined ? { logIndex } : {}),
          kind: found.move.kind,
          asset: found.move.asset,
          amount: found.move.amount.toString(),
          retractedAt: at,
        },
      });
      return;
    }
    case 'RecordOutflow': {
      requireCreated(s);
      // This log of this block recorded already, or claimed as an outflow mined again.
      if (outflowLogSeen(s, command)) return;
      // The outflow recorded at this index was last seen at another log (another block, or claimed by another log of
      // this one): this log is the transaction mined again (judged below), not that outflow's. Otherwise a recorded
      // index is this log (facts without their block included).
      const keyTaken = outflowRecorded(s, command.txHash, command.logIndex);
      if (
        keyTaken &&
        !(
          command.logIndex !== undefined &&
          outflowSeenElsewhere(s, command.txHash, command.logIndex, command.blockHash)
        )
      )
        return;
      // Log indexes are per block: our own move recorded from its receipt and mined again in another block (a reorg
      // the deposit worker never sighted, so no RetractOutflow came) shows at another index. The same move, not a
      // second one: its first record is undone before this one is recorded.
      // A recover or rescue is never undone (RetractOutflow): mined again at another index, it is recorded already
      // (facts without their blocks; with them, claimed below).
      if (!keyTaken && command.atConfirmations && remintedUndoneNever(s, command)) return;
      const reminted = remintedEscrowMove(s, command);
      // At a recorded index only the move recorded there is undone and recorded again (one outflow per key).
      const moved = reminted && (!keyTaken || reminted.logIndex === command.logIndex) ? reminted : null;
      // Its undo would drop the fiat settlement the provider has reported on (or that is over) and the record open a
      // fresh one (reports forgotten, deadlines counted again): as RetractOutflow, the move stays as first recorded,
      // the same outflow, and ConfirmOutflow confirms it.
      if (moved && settlementUnderway(s)) return;
      // Recorded from another block (confirmed, or not undone): a reorg deeper than the confirmations mined the
      // transaction again; its log index is the new block's, the outflow a recorded one not claimed in this block yet.
      const claimed = moved ? null : minedAgainClaim(s, command);
      if (claimed !== null && command.logIndex !== undefined && command.blockHash !== undefined) {
        emit({
          type: 'PaymentOutflowMinedAgain.v1',
          data: {
            txHash: command.txHash,
            recordedLogIndex: claimed,
            logIndex: command.logIndex,
            blockHash: command.blockHash,
            seenAt: at,
          },
        });
        return;
      }
      // Another outflow holds this index (one outflow per key): nothing this log could be recorded as.
      if (keyTaken && !moved) return;
      if (moved)
        emit({
          type: 'PaymentOutflowRetracted.v1',
          data: {
            txHash: command.txHash,
            logIndex: moved.logIndex,
            kind: moved.move.kind,
            asset: moved.move.asset,
            amount: moved.move.amount.toString(),
            retractedAt: at,
          },
        });
      emit({
        type: OUTFLOW_EVENT[command.kind],
        data: {
          txHash: command.txHash,
          ...(command.logIndex !== undefined ? { logIndex: command.logIndex } : {}),
          ...(command.blockHash !== undefined ? { blockHash: command.blockHash } : {}),
          ...(command.blockNumber !== undefined ? { blockNumber: command.blockNumber } : {}),
          asset: command.asset,
          amount: command.amount,
          to: command.to,
          at,
        },
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
      const elsewhere = fundingOutside(s, asset.asset);
      if (elsewhere) {
        throw conflict(
          'payment_has_deposit',
          `A deposit paying this order has arrived in ${elsewhere.symbol} on ${elsewhere.chain}; the payment can no longer be held to another token or chain.`,
        );
      }
      const selected: PaymentEvent = {
        type: 'PaymentAssetSelected.v1',
        data: { asset: asset.asset, chain: asset.chain, selectedAt: at },
      };
      emit(selected);
      reclassifyChosen(evolvePayment(s, selected), asset.asset, command.now, emit);
      return;
    }
    case 'Cancel': {
      requireCreated(s);
      if (s.phase !== 'pending' || s.flagged) {
        throw conflict(
          'checkout_not_pending',
          `Only a pending checkout can be cancelled; this one is ${checkoutStatus(s)} (its payment is ${paymentStatus(s)}).`,
        );
      }
      if (orderPaidInFull(s)) {
        throw conflict(
          'checkout_has_deposit',
          `The order is paid in full (amount_paid ${amountPaid(s)}, confirming or confirmed); the checkout can no longer be cancelled.`,
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

/**
 * The chosen token's transfers that an earlier choice (or another token paying the order, since lost) listed
 * wrong_token / wrong_chain, classified again in arrival order as if they arrived at the choice: the docs promise the
 * token holding the funds can still be chosen, and a payer who paid in it must not see the order expire unpaid.
 * `now` stands for their block time: they were mined before it, and a choice at or after expires_at finds the
 * payment expired (or classifies them stragglers).
 */
function reclassifyChosen(
  state: PaymentState,
  asset: string,
  now: Date,
  emit: (e: PaymentEvent) => void,
): void {
  let s = state;
  for (const t of state.transfers) {
    if (t.asset !== asset || t.isFunding) continue;
    if (t.nonFundingReason !== 'wrong_token' && t.nonFundingReason !== 'wrong_chain') continue;
    const { isFunding, nonFundingReason } = classify(s, t, now);
    if (!isFunding && nonFundingReason === t.nonFundingReason) continue;
    const event: PaymentEvent = {
      type: 'PaymentTransferReclassified.v1',
      data: {
        chain: t.chain,
        txHash: t.txHash,
        logIndex: t.logIndex,
        isFunding,
        nonFundingReason,
        at: now.toISOString(),
      },
    };
    emit(event);
    s = evolvePayment(s, event);
  }
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

  // The provider paid the merchant out for a deposit a reorg took (before the reorg, or reported while the payment
  // is lost): fiat went out for crypto we no longer hold. Recorded once per loss, for the operator to recover.
  if (lostToReorg(s) && s.settlementPaidOut && !s.settlementExposure) {
    emit({ type: 'PaymentSettlementExposed.v1', data: { reason: 'deposit_lost_to_reorg', at } });
    s = current();
  }
  // Reinstated (the deposit mined again) after the provider reported the payout completed while the payment was lost
  // (a report that moved nothing then): the settlement completes from it, not failed later by a deadline, and no
  // second payout is opened.
  if (s.settlementPaidOut && openSettlement(s)) {
    emit({ type: 'PaymentSettlementCompleted.v1', data: { at } });
    s = current();
  }

  // Expiry: due, still pending, and what arrived in time does not cover the order.
  if (s.phase === 'pending' && !s.flagged && !s.depositConfirmed && isDue(s, now)) {
    if (!orderPaidInFull(s)) {
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
  const unknown = payerUnknown(s);
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
      payer.toLowerCase() !== s.recoverable.destination.toLowerCase() ||
      unknown !== s.recoverable.payerUnknown)
  ) {
    emit({
      type: 'PaymentRecoverable.v1',
      data: {
        reason: surplus.reason,
        destination: payer,
        ...(unknown ? { payerUnknown: true } : {}),
        asset: surplus.asset,
        amount: surplus.amount.toString(),
        at,
      },
    });
    s = current();
  }

  // Deploy once the deposit is confirmed (or funds were abandoned) and every sender is screened clear. A payment a
  // reorg failed is deployed NONE for what its deposit holds, also when its DIRECT or TWO_STEP deploy was asked for
  // before the reorg (the deposit flow deploys the last request, and none for a failed payment but NONE).
  const lost = lostToReorg(s);
  const redeploy = lost && !s.deployment && s.deployMethod !== null && s.deployMethod !== 'NONE';
  if (
    (!s.deployRequested || redeploy) &&
    !s.flagged &&
    (s.phase !== 'failed' || lost) &&
    payer &&
    addressesToScreen(s).length === 0
  ) {
    const asset = paymentAsset(s);
    const screened = s.clearedAddresses.includes(payer.toLowerCase());
    const orderPaid = s.depositConfirmed && !lost;
    const abandonedFunds = isAbandoned(s) && payerSurplus(s) !== null && !dustAwaitingMerchant(s);
    if (asset && screened && (orderPaid || abandonedFunds)) {
      const method: PaymentMethod | 'NONE' = orderPaid && detected ? created.method : 'NONE';
      emit({
        type: 'PaymentDeployRequested.v1',
        data: {
          method,
          chain: s.transfers.find((t) => t.asset === asset)?.chain ?? '',
          asset,
          payer,
          ...(unknown ? { payerUnknown: true } : {}),
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
