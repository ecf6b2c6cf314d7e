import type { SettlementFailureReason, SettlementReportKind } from '@stablepay/fiat-settlement';

/**
 * Events of the `payment-<payment id>` stream: one stream per checkout (the checkout is the session that creates
 * exactly one payment; both ids are fixed at creation).
 *
 * Events are facts, past tense, with an explicit version, carrying only what happened (never the API object: the
 * payment object is `toPaymentObject(state)`, a pure projection). A changed shape becomes a new version plus an
 * upcaster. Amounts are integer strings (token smallest unit unless named otherwise).
 */

export type PaymentMethod = 'DIRECT' | 'TWO_STEP';

/** A stablecoin the checkout accepts, fixed at creation so later decisions never depend on configuration drift. */
export interface AcceptedAsset {
  /** CAIP-19, e.g. `eip155:8453/erc20:0x8335...`. */
  readonly asset: string;
  /** CAIP-2 of the asset's chain. */
  readonly chain: string;
  readonly symbol: string;
  readonly decimals: number;
  /** Smallest units of this token the order requires (see `orderAmountToTokenUnits`). */
  readonly tokenAmount: string;
}

/** One ERC-20 Transfer log into the deposit address, as the indexer saw it. Key: (chain, txHash, logIndex). */
export interface ObservedTransfer {
  readonly txHash: string;
  readonly logIndex: number;
  readonly from: string;
  /** CAIP-19 of the token contract that emitted the log. */
  readonly asset: string;
  /** CAIP-2. */
  readonly chain: string;
  readonly amount: string;
  readonly blockNumber: string;
  /**
   * The token is one of the stablecoins this deployment lists on the chain (a test or mainnet stablecoin), not just
   * any contract that emitted a Transfer log to the address. Only a listed token can become the payment token of an
   * abandoned deposit nothing accepted funded (`paymentAsset`): anyone can make a contract of their own log a
   * transfer to every public deposit address. Absent on transfers recorded before the field: not listed.
   */
  readonly listed?: boolean;
  /**
   * The log named no sender (tokens minted straight to the deposit address: a bridge such as CCTP, an issuer's
   * mint); `from` is then the minting transaction's sender, whom nothing makes the payer: a bridge's mint is sent by
   * whoever relays the message. Absent on transfers recorded before the field (those minted were taken for their
   * minter's, docs/payments.md).
   */
  readonly minted?: boolean;
}

/**
 * Why a transfer does not fund the order (SPEC `non_funding_transactions_count`):
 * - `wrong_token`: not an accepted token of this checkout, or another token than the detected one on its chain;
 * - `wrong_chain`: a chain the checkout does not accept, or another chain than the detected one;
 * - `duplicate`: the order was already fully paid when it arrived (the customer paid twice);
 * - `straggler`: arrived after the funding window closed (deposit confirmed, settled, expired, cancelled...).
 */
export type NonFundingReason = 'wrong_token' | 'wrong_chain' | 'duplicate' | 'straggler';

export type RecoverableReason = 'over_deposit' | 'abandoned';

/** SPEC Events > Fiat settlement delay and failure: shared with subscription charges (@stablepay/fiat-settlement). */
export type {
  SettlementFailureReason,
  SettlementReportKind,
  SettlementStatus,
} from '@stablepay/fiat-settlement';

export type PaymentCreated = {
  type: 'PaymentCreated.v1';
  data: {
    readonly paymentId: string;
    readonly checkoutId: string;
    readonly merchantId: string;
    readonly onChainId: string;
    readonly depositAddress: string;
    readonly method: PaymentMethod;
    /** Order value, 6-decimal canonical integer string. */
    readonly amount: string;
    readonly currency: string;
    readonly acceptedAssets: readonly AcceptedAsset[];
    readonly settlementMode: 'crypto' | 'fiat';
    /** TWO_STEP only: seconds from deployment until the escrow can no longer be captured (else null). */
    readonly authorizationPeriodSeconds: number | null;
    readonly checkoutUrl: string;
    readonly successUrl: string | null;
    readonly cancelUrl: string | null;
    readonly metadata: Readonly<Record<string, string>>;
    readonly expiresAt: string;
    readonly createdAt: string;
  };
};

export type PaymentTransferObserved = {
  type: 'PaymentTransferObserved.v1';
  data: {
    readonly transfer: ObservedTransfer;
    /** Classified once, at observation: later events never reclassify history. */
    readonly isFunding: boolean;
    readonly nonFundingReason: NonFundingReason | null;
    readonly observedAt: string;
  };
};

export type PaymentTransferConfirmed = {
  type: 'PaymentTransferConfirmed.v1';
  data: {
    readonly chain: string;
    readonly txHash: string;
    readonly logIndex: number;
    readonly confirmedAt: string;
  };
};

/** A reorg removed a transfer that had not reached its confirmations: it simply never happened. */
export type PaymentTransferRetracted = {
  type: 'PaymentTransferRetracted.v1';
  data: {
    readonly chain: string;
    readonly txHash: string;
    readonly logIndex: number;
    readonly retractedAt: string;
  };
};

/**
 * A transfer that failed the payment (PaymentFailed.v1, deposit_lost_to_reorg) was observed again on the new fork
 * (the same log mined in another block): listed again at its new block, unconfirmed until it has its
 * confirmations there. It does not revive the order by itself (the merchant was told payment.failed): once confirmed
 * it is what any funds left in the failed payment's deposit are, recoverable to the payer (docs/payments.md, Reorg),
 * unless the recorded deploy stands on the new fork too (PaymentReinstated.v1).
 */
export type PaymentTransferReincluded = {
  type: 'PaymentTransferReincluded.v1';
  data: {
    readonly chain: string;
    readonly txHash: string;
    readonly logIndex: number;
    readonly blockNumber: string;
    readonly observedAt: string;
  };
};

/**
 * Configure chose the token of a transfer an earlier choice had listed wrong_token / wrong_chain: the transfer is
 * classified again as if it arrived now (funding, or a duplicate once the order is paid). Without it a payment paid
 * in full in the token finally chosen stayed unpaid and expired abandoned.
 */
export type PaymentTransferReclassified = {
  type: 'PaymentTransferReclassified.v1';
  data: {
    readonly chain: string;
    readonly txHash: string;
    readonly logIndex: number;
    readonly isFunding: boolean;
    readonly nonFundingReason: NonFundingReason | null;
    readonly at: string;
  };
};

/** Confirmed funding transfers reached the order's token amount (SPEC payment.deposit_confirmed). */
export type PaymentDepositConfirmed = {
  type: 'PaymentDepositConfirmed.v1';
  data: { readonly asset: string; readonly amountPaid: string; readonly confirmedAt: string };
};

export type PaymentPayerCleared = {
  type: 'PaymentPayerCleared.v1';
  data: { readonly addresses: readonly string[]; readonly screenedAt: string };
};

export type PaymentScreeningUnavailable = {
  type: 'PaymentScreeningUnavailable.v1';
  data: { readonly addresses: readonly string[]; readonly at: string };
};

/**
 * A sender of the payment token screened as a sanctions match who is not the payment's payer: the order is paid
 * without its transfers (the payer's own confirmed funding covers it). Its funds are held in the deposit address for
 * good: they fund nothing, name no payer, are never forwarded, escrowed, recovered or rescued. SPEC flags the payment
 * only when the payer matches; flagging it for any sender let anyone holding a sanctioned address freeze an honest
 * payer's payment by sending dust to its public deposit address.
 */
export type PaymentSanctionedFundsHeld = {
  type: 'PaymentSanctionedFundsHeld.v1';
  /** Matched address; its transfers are listed with `non_funding_reason` `sanctioned`. */
  data: { readonly address: string; readonly at: string };
};

export type PaymentFlagged = {
  type: 'PaymentFlagged.v1';
  /** Matched address; kept in the stream for the operator, never shown in the payment object or webhook. */
  data: { readonly address: string; readonly flaggedAt: string };
};

/**
 * The relayer is to call `PaymentFactory.deployDeposit`. `NONE` deploys an abandoned deposit without moving
 * funds, so `recover` can then run.
 */
export type PaymentDeployRequested = {
  type: 'PaymentDeployRequested.v1';
  data: {
    readonly method: PaymentMethod | 'NONE';
    readonly chain: string;
    readonly asset: string;
    /** The attested payer: sender of the first funding (or, abandoned, first payment-token) transfer. */
    readonly payer: string;
    /**
     * `payer` sent a minting transaction of the payment's funds, so the true payer is unknown: the deploy attests
     * the merchant's settlement address instead (docs/payments.md, The payer). Absent before the field: false.
     */
    readonly payerUnknown?: boolean;
    /** Forwarded (DIRECT) or escrowed (TWO_STEP); 0 for NONE. */
    readonly amount: string;
    readonly requestedAt: string;
  };
};

/** Why a requested deploy is held (docs/payment-deposits.md, registry check). */
export type DeployHoldReason = 'merchant_not_registered' | 'merchant_change_pending' | 'chain_mode_mismatch';

/**
 * The requested deploy is held: the chain's registry lacks the merchant (`merchant_not_registered`) or holds
 * another signer or settlement address than its settings (`merchant_change_pending`), so deploying would bind the
 * deposit to values the merchant did not give; or the payment is of the other mode than the deployment's chains
 * (`chain_mode_mismatch`: recorded before such checkouts were refused; its deposit is on chains that are not its
 * merchant's). Recorded once per reason; a deployment ends the hold.
 */
export type PaymentDeployHeld = {
  type: 'PaymentDeployHeld.v1';
  data: { readonly chain: string; readonly reason: DeployHoldReason; readonly heldAt: string };
};

/** Fields every deployment fact shares (from the DepositDeployed and PayerAttested logs). */
interface DeploymentFact {
  readonly deployTxHash: string;
  readonly chain: string;
  readonly payer: string;
  readonly payerFinalAt: string;
  readonly at: string;
}

/**
 * A DIRECT or TWO_STEP deployment recorded since its webhook waits for the chain's confirmations: `true`, and the fact
 * announces nothing (PaymentDeploymentConfirmed.v1 does). Absent on facts recorded before (2026-11-24): those were
 * announced from the fact itself, still are when read, and count as confirmed (never announced a second time).
 */
interface AnnouncedAtConfirmations {
  readonly announcedAtConfirmations?: true;
}

/** DIRECT: deployed, `amount` forwarded to the settlement address (SPEC payment.settled). */
export type PaymentSettled = {
  type: 'PaymentSettled.v1';
  data: DeploymentFact &
    AnnouncedAtConfirmations & { readonly amount: string; readonly settlementAddress: string };
};

/** TWO_STEP: deployed, `amount` held in escrow until `authorizationExpiry` (SPEC payment.escrow_confirmed). */
export type PaymentEscrowFunded = {
  type: 'PaymentEscrowFunded.v1';
  data: DeploymentFact &
    AnnouncedAtConfirmations & { readonly amount: string; readonly authorizationExpiry: string };
};

/**
 * The deploy's transaction of a DIRECT or TWO_STEP deployment (PaymentSettled.v1 / PaymentEscrowFunded.v1, recorded
 * from its receipt at one confirmation, where a reorg can still take it back) has the chain's confirmations
 * (CHAIN_CONFIRMATIONS, seen by the deposit worker): merchants are told the money moved (`payment.settled`) or is held
 * (`payment.escrow_confirmed`, by `method`) from this fact. `reachedConfirmationsAt` is not a change of the payment
 * (its `updated_at` stays). Since 2026-11-24; before, the deployment facts themselves produced those webhooks.
 */
export type PaymentDeploymentConfirmed = {
  type: 'PaymentDeploymentConfirmed.v1';
  data: {
    readonly deployTxHash: string;
    readonly method: PaymentMethod;
    readonly reachedConfirmationsAt: string;
  };
};

/** NONE: deployed to make an abandoned deposit recoverable; no funds moved. */
export type PaymentDepositDeployed = {
  type: 'PaymentDepositDeployed.v1';
  data: DeploymentFact;
};

/**
 * The deposit contract recorded as deployed is not on the chain any more: a reorg took the payment's funding and its
 * deploy with it, and the deploy did not land again on the new fork (reverted there for want of the lost funds, or
 * dropped). The deployment and what it forwarded or escrowed are undone; the payment stays failed
 * (deposit_lost_to_reorg) and what its deposit address holds is deployed again (NONE) and returned to the payer.
 * Since 2026-11-25 also a DIRECT or TWO_STEP deploy a reorg took back before its confirmations while the funding
 * stands (the payment not failed): undone the same way, the payment is back to `pending` with its deploy requested,
 * and deployed again with the same method (nothing was announced). Same shape: the payment's state tells the two.
 */
export type PaymentDeploymentLost = {
  type: 'PaymentDeploymentLost.v1';
  data: { readonly deployTxHash: string; readonly chain: string; readonly at: string };
};

/**
 * A payment a reorg failed (PaymentFailed.v1, deposit_lost_to_reorg) is paid on the canonical chain after all: the
 * lost transfer was mined again on the new fork and has its confirmations there, the confirmed funding covers the
 * order again, and the deposit contract its recorded DIRECT or TWO_STEP deployment made is on the new fork too (the
 * deploy landed again after the funding). The order's amount reached the settlement address (DIRECT) or is held in
 * escrow (TWO_STEP): the failure is undone and the payment is back in `phase`, `failure_reason` cleared. Merchants
 * are told with the webhook of that phase (`payment.settled` / `payment.escrow_confirmed`), after `payment.failed`:
 * the latest is authoritative (as SPEC's late `subscription_checkout.completed`).
 */
export type PaymentReinstated = {
  type: 'PaymentReinstated.v1';
  data: {
    readonly deployTxHash: string;
    readonly chain: string;
    readonly phase: 'settled' | 'escrow_confirmed';
    readonly at: string;
  };
};

/**
 * The merchant asked to recover an abandoned deposit's funds below the dust share of the order
 * (`CHECKOUT_LIMITS.dustShareBasisPoints`): only now are their senders screened and the deposit deployed NONE. Dust
 * anyone can send to a public address no longer spends the operator's screening and gas unasked.
 */
export type PaymentDustRecoveryRequested = {
  type: 'PaymentDustRecoveryRequested.v1';
  data: { readonly requestedAt: string };
};

/** Payer-owned funds sit in the deposit address (SPEC payment.recoverable). */
export type PaymentRecoverable = {
  type: 'PaymentRecoverable.v1';
  data: {
    readonly reason: RecoverableReason;
    readonly destination: string;
    /**
     * Before the deploy, `destination` is the sender of minted funds (not known to be the payer): the deploy will
     * attest the merchant's settlement address, and a notice naming it follows. Absent before the field: false.
     */
    readonly payerUnknown?: boolean;
    readonly asset: string;
    readonly amount: string;
    readonly at: string;
  };
};

/** A merchant-signed action accepted at preflight, for the relayer to submit. */
export type PaymentActionRequested = {
  type: 'PaymentCaptureRequested.v1' | 'PaymentRefundRequested.v1' | 'PaymentRescueRequested.v1';
  data: {
    readonly asset: string;
    readonly amount: string;
    /** Refund: the attested payer; rescue: the signed destination; capture: the settlement bound at deploy. */
    readonly to: string;
    readonly requestedAt: string;
  };
};

export type PaymentRecoverRequested = {
  type: 'PaymentRecoverRequested.v1';
  data: { readonly asset: string; readonly destination: string; readonly requestedAt: string };
};

/**
 * The merchant's DisputePayer signature passed preflight (POST /payments/:paymentId/dispute_payer): the relayer
 * submits `disputePayer(payer, ...)` for it. `payer` is the attested payer being disputed.
 */
export type PaymentPayerDisputeRequested = {
  type: 'PaymentPayerDisputeRequested.v1';
  data: {
    readonly payer: string;
    readonly requestedAt: string;
    /**
     * The signature's deadline (ISO, chain time): past it the relayed call can no longer land, so the request stops
     * holding a second dispute back. Absent on facts recorded before 2026-11-25: those hold nothing back.
     */
    readonly deadline?: string;
  };
};

/**
 * Our relay of the requested dispute did not land (refused at the broadcast, or mined and reverted): nothing changed
 * on chain, and a new dispute may be requested.
 */
export type PaymentPayerDisputeFailed = {
  type: 'PaymentPayerDisputeFailed.v1';
  data: { readonly txHash: string | null; readonly at: string };
};

/** Where a payer fact was read: the deposit's own log, as the indexer saw it. */
interface PayerLog {
  readonly chain: string;
  readonly txHash: string;
  readonly logIndex: number;
  /**
   * The block the log was seen in (decimal string and hash): payer logs take effect in block order, and a reorg's
   * retraction of that block undoes the fact (PaymentPayerLogRetracted.v1). Absent on facts recorded before
   * 2026-11-25 (from our own receipt or the indexer): those count in the order they were recorded, before any log
   * with a block.
   */
  readonly blockNumber?: string;
  readonly blockHash?: string;
}

/**
 * The deposit's `PayerDisputed` log: the merchant disputed the attested `payer` within its challenge period and the
 * contract cleared it. No payer is attested until the admin attests one (refund, reclaim and recover are refused).
 */
export type PaymentPayerDisputed = {
  type: 'PaymentPayerDisputed.v1';
  data: PayerLog & { readonly payer: string; readonly at: string };
};

/**
 * The deposit's `PayerAttested` log after a dispute (the admin's `attestPayer`; the deployment's own attestation is
 * part of the deployment fact): `payer` is the payer now, final at `finalAt` (chain time, a fresh challenge period).
 */
export type PaymentPayerAttested = {
  type: 'PaymentPayerAttested.v1';
  data: PayerLog & { readonly payer: string; readonly finalAt: string; readonly at: string };
};

/**
 * The block of a recorded PayerDisputed / PayerAttested log left the canonical chain (the indexer's retraction): the
 * fact no longer counts; the payer is what the remaining logs (or the deployment) say. The same log mined again in
 * another block is a new sighting, recorded again.
 */
export type PaymentPayerLogRetracted = {
  type: 'PaymentPayerLogRetracted.v1';
  data: {
    readonly chain: string;
    readonly txHash: string;
    readonly logIndex: number;
    readonly blockHash: string;
    readonly at: string;
  };
};

/** What moved funds out of a deployed deposit, one per PaymentDeposit outflow log. */
export type OutflowKind = 'captured' | 'refunded' | 'reclaimed' | 'recovered' | 'rescued';

/** On-chain fund movements out of the deposit address (from the PaymentDeposit logs). */
interface Outflow {
  readonly txHash: string;
  /** The outflow's log in the transaction (absent on facts recorded before it was kept). */
  readonly logIndex?: number;
  /**
   * The block the log was seen in (absent on facts from before it was kept, and where the sighting had none): the same
   * transaction seen in another block is the one a reorg mined again, whose logs stand for these, not beside them.
   */
  readonly blockHash?: string;
  /**
   * That block's number (absent on facts from before it was kept): the deposit worker checks our own receipt's block is
   * still the chain's at that height once it has the confirmations (a reorg the indexer never read retracts nothing).
   */
  readonly blockNumber?: string;
  readonly asset: string;
  readonly amount: string;
  readonly to: string;
  readonly at: string;
}

export type PaymentCaptured = { type: 'PaymentCaptured.v1'; data: Outflow };
export type PaymentRefunded = { type: 'PaymentRefunded.v1'; data: Outflow };
/** The payer took the escrow back after the authorization expiry (anyone may trigger `reclaim`). */
export type PaymentReclaimed = { type: 'PaymentReclaimed.v1'; data: Outflow };
export type PaymentRecovered = { type: 'PaymentRecovered.v1'; data: Outflow };
export type PaymentRescued = { type: 'PaymentRescued.v1'; data: Outflow };

/**
 * A capture's, refund's or reclaim's transaction has the chain's confirmations (the deposit worker's sighting of its
 * log, at CHAIN_CONFIRMATIONS). Our own capture and refund are recorded from the action's receipt at one confirmation,
 * where a reorg can still take them back; merchants are told the funds left (`payment.settled` /
 * `payment.refunded`) from these facts. `reachedConfirmationsAt` is not a change of the payment (its `updated_at`
 * stays).
 */
export type PaymentCaptureConfirmed = {
  type: 'PaymentCaptureConfirmed.v1';
  data: { readonly txHash: string; readonly reachedConfirmationsAt: string };
};
export type PaymentRefundConfirmed = {
  type: 'PaymentRefundConfirmed.v1';
  data: { readonly txHash: string; readonly reachedConfirmationsAt: string };
};
export type PaymentReclaimConfirmed = {
  type: 'PaymentReclaimConfirmed.v1';
  data: { readonly txHash: string; readonly reachedConfirmationsAt: string };
};

/**
 * A reorg took back the block of a capture, refund or reclaim the payment recorded (from the action's own receipt at
 * one confirmation) before its transaction had the chain's confirmations: the escrow holds the amount again, so the
 * payment can be captured or refunded again, and the same log mined again is recorded again. Nothing was announced
 * (the webhook waits for the confirmations), so no webhook either. `logIndex` as the undone fact's (absent: it had
 * none).
 */
export type PaymentOutflowRetracted = {
  type: 'PaymentOutflowRetracted.v1';
  data: {
    readonly txHash: string;
    readonly logIndex?: number;
    readonly kind: 'captured' | 'refunded' | 'reclaimed';
    readonly asset: string;
    readonly amount: string;
    readonly retractedAt: string;
  };
};

/**
 * A log of a recorded transaction seen in another block (the transaction mined again after a reorg, however deep) is
 * the outflow recorded at `recordedLogIndex` (same kind, asset and amount, not claimed by another log of that block):
 * nothing more left the deposit. Each recorded outflow stands for at most one log of a block, so two equal outflows of
 * a batch mined again are claimed by two logs, and a third equal log is a new outflow. `logIndex` and `blockHash` say
 * where the outflow now is. Not a change of the payment (its `updated_at` stays); no webhook.
 */
export type PaymentOutflowMinedAgain = {
  type: 'PaymentOutflowMinedAgain.v1';
  data: {
    readonly txHash: string;
    readonly recordedLogIndex: number;
    readonly logIndex: number;
    readonly blockHash: string;
    readonly seenAt: string;
  };
};

/**
 * A recover's (or rescue's) transaction has the chain's confirmations (the deposit worker's sighting of its log, at
 * CHAIN_CONFIRMATIONS). The recover itself is recorded from the action's receipt at one confirmation, where a reorg
 * can still take it back; merchants are told the funds left (`payment.recovered` / `payment.rescued`) from this fact.
 * `reachedConfirmationsAt` is not a change of the payment (its `updated_at` stays).
 */
export type PaymentRecoveryConfirmed = {
  type: 'PaymentRecoveryConfirmed.v1';
  data: { readonly txHash: string; readonly reachedConfirmationsAt: string };
};
export type PaymentRescueConfirmed = {
  type: 'PaymentRescueConfirmed.v1';
  data: { readonly txHash: string; readonly reachedConfirmationsAt: string };
};

/**
 * The payer's token and chain were chosen before paying (the alternate payment-request surface's configure
 * call): from then on only that asset funds the order; the others are listed as wrong_token / wrong_chain.
 */
export type PaymentAssetSelected = {
  type: 'PaymentAssetSelected.v1';
  data: { readonly asset: string; readonly chain: string; readonly selectedAt: string };
};

export type PaymentCancelled = { type: 'PaymentCancelled.v1'; data: { readonly cancelledAt: string } };

export type PaymentExpired = { type: 'PaymentExpired.v1'; data: { readonly expiredAt: string } };

export type PaymentFailed = {
  type: 'PaymentFailed.v1';
  data: {
    readonly reason: 'deposit_lost_to_reorg';
    readonly txHash: string;
    readonly chain: string;
    /** The lost log (absent on facts recorded before it was kept: every log of `txHash` on `chain`). */
    readonly logIndex?: number;
    readonly failedAt: string;
  };
};

export type PaymentSettlementDelayed = {
  type: 'PaymentSettlementDelayed.v1';
  data: { readonly reason: SettlementFailureReason | null; readonly at: string };
};

export type PaymentSettlementFailed = {
  type: 'PaymentSettlementFailed.v1';
  data: { readonly reason: SettlementFailureReason; readonly at: string };
};

/**
 * A fiat-settled payment's payout, as the settlement provider reported it (its id deduplicates redeliveries;
 * `reportedAt` is the provider's time, `receivedAt` ours). What it means follows as its own fact.
 */
export type PaymentSettlementReported = {
  type: 'PaymentSettlementReported.v1';
  data: {
    readonly reportId: string;
    readonly kind: SettlementReportKind;
    readonly reportedAt: string;
    readonly receivedAt: string;
  };
};

/** The provider paid the merchant out (SPEC names no payment event for it; the object's settlement_status shows it). */
export type PaymentSettlementCompleted = {
  type: 'PaymentSettlementCompleted.v1';
  data: { readonly at: string };
};

/**
 * The settlement provider paid the merchant out in fiat for a payment whose deposit a reorg took (deposit_lost_to_reorg):
 * paid before the reorg, or reported paid while the payment is lost. Fiat went out for crypto we no longer hold: an
 * exposure the operator recovers from the merchant's next settlements (docs/payments.md, "Fiat settlement"). Recorded
 * once per loss; a reinstatement (the deposit mined again) ends it. No webhook (SPEC names none; payment.failed told
 * the merchant); the payment object shows it as `settlement_exposure`.
 */
export type PaymentSettlementExposed = {
  type: 'PaymentSettlementExposed.v1';
  data: { readonly reason: 'deposit_lost_to_reorg'; readonly at: string };
};

export type PaymentEvent =
  | PaymentCreated
  | PaymentTransferObserved
  | PaymentTransferConfirmed
  | PaymentTransferRetracted
  | PaymentTransferReincluded
  | PaymentTransferReclassified
  | PaymentDepositConfirmed
  | PaymentPayerCleared
  | PaymentScreeningUnavailable
  | PaymentFlagged
  | PaymentSanctionedFundsHeld
  | PaymentDeployRequested
  | PaymentDeployHeld
  | PaymentSettled
  | PaymentEscrowFunded
  | PaymentDepositDeployed
  | PaymentDeploymentLost
  | PaymentReinstated
  | PaymentDustRecoveryRequested
  | PaymentRecoverable
  | PaymentActionRequested
  | PaymentRecoverRequested
  | PaymentPayerDisputeRequested
  | PaymentPayerDisputed
  | PaymentPayerAttested
  | PaymentPayerDisputeFailed
  | PaymentPayerLogRetracted
  | PaymentCaptured
  | PaymentRefunded
  | PaymentReclaimed
  | PaymentRecovered
  | PaymentRescued
  | PaymentCaptureConfirmed
  | PaymentDeploymentConfirmed
  | PaymentRefundConfirmed
  | PaymentReclaimConfirmed
  | PaymentOutflowRetracted
  | PaymentOutflowMinedAgain
  | PaymentRecoveryConfirmed
  | PaymentRescueConfirmed
  | PaymentAssetSelected
  | PaymentCancelled
  | PaymentExpired
  | PaymentFailed
  | PaymentSettlementDelayed
  | PaymentSettlementFailed
  | PaymentSettlementReported
  | PaymentSettlementCompleted
  | PaymentSettlementExposed;

export type PaymentEventType = PaymentEvent['type'];

export const PAYMENT_CATEGORY = 'payment';
export const paymentStreamId = (paymentId: string): string => `${PAYMENT_CATEGORY}-${paymentId}`;

/**
 * SPEC Events > Payment events, then ours: `payment.recovered` and `payment.rescued` (SPEC names no event for a
 * recover or rescue, whose funds leave the deposit; without them the last event a merchant saw was
 * `payment.recoverable`). Each adds `data.transfer` (docs/webhooks.md), and is sent once the transaction has the
 * chain's confirmations (CHAIN_CONFIRMATIONS).
 */
export const PAYMENT_WEBHOOK_TYPES = [
  'payment.deposit_confirmed',
  'payment.settled',
  'payment.escrow_confirmed',
  'payment.expired',
  'payment.cancelled',
  'payment.failed',
  'payment.refunded',
  'payment.settlement_delayed',
  'payment.settlement_failed',
  'payment.flagged',
  'payment.screening_pending',
  'payment.recoverable',
  'payment.recovered',
  'payment.rescued',
] as const;
export type PaymentWebhookType = (typeof PAYMENT_WEBHOOK_TYPES)[number];

/**
 * Stored event type -> the webhook it produces (null: a fact merchants are not notified of). Every SPEC payment
 * event has at least one producing fact; a capture produces `payment.settled` (funds reached the settlement
 * address, the same meaning as a DIRECT settle), a reclaim produces `payment.refunded` (the escrow went back to
 * the payer); an outflow's webhook comes from its confirmation fact (CHAIN_CONFIRMATIONS), not its record.
 */
export const PAYMENT_WEBHOOK_BY_EVENT: Readonly<Record<PaymentEventType, PaymentWebhookType | null>> = {
  'PaymentCreated.v1': null,
  'PaymentTransferObserved.v1': null,
  'PaymentTransferConfirmed.v1': null,
  'PaymentTransferRetracted.v1': null,
  'PaymentTransferReincluded.v1': null,
  'PaymentTransferReclassified.v1': null,
  'PaymentDepositConfirmed.v1': 'payment.deposit_confirmed',
  'PaymentPayerCleared.v1': null,
  'PaymentScreeningUnavailable.v1': 'payment.screening_pending',
  'PaymentFlagged.v1': 'payment.flagged',
  'PaymentSanctionedFundsHeld.v1': null,
  'PaymentDeployRequested.v1': null,
  'PaymentDeployHeld.v1': null,
  // Recorded from the deploy's receipt at one confirmation: announced once it has the chain's confirmations
  // (PaymentDeploymentConfirmed.v1), as every outflow is.
  'PaymentSettled.v1': null,
  'PaymentEscrowFunded.v1': null,
  // payment.escrow_confirmed for a TWO_STEP deployment (paymentWebhookType).
  'PaymentDeploymentConfirmed.v1': 'payment.settled',
  'PaymentDepositDeployed.v1': null,
  'PaymentDeploymentLost.v1': null,
  // payment.escrow_confirmed when it reinstates a TWO_STEP escrow (paymentWebhookType).
  'PaymentReinstated.v1': 'payment.settled',
  'PaymentDustRecoveryRequested.v1': null,
  'PaymentRecoverable.v1': 'payment.recoverable',
  'PaymentCaptureRequested.v1': null,
  'PaymentRefundRequested.v1': null,
  'PaymentRescueRequested.v1': null,
  'PaymentRecoverRequested.v1': null,
  // The merchant asked for the dispute (its answer carries the outcome); an attestation that changes the payer of
  // outstanding recoverable funds re-announces them (payment.recoverable naming the new destination).
  'PaymentPayerDisputeRequested.v1': null,
  'PaymentPayerDisputed.v1': null,
  'PaymentPayerAttested.v1': null,
  'PaymentPayerDisputeFailed.v1': null,
  'PaymentPayerLogRetracted.v1': null,
  // Every outflow is announced once its transaction has the chain's confirmations, not at the one confirmation our
  // own action records it at (a reorg can still take it back there).
  'PaymentCaptured.v1': null,
  'PaymentRefunded.v1': null,
  'PaymentReclaimed.v1': null,
  'PaymentRecovered.v1': null,
  'PaymentRescued.v1': null,
  'PaymentCaptureConfirmed.v1': 'payment.settled',
  'PaymentRefundConfirmed.v1': 'payment.refunded',
  'PaymentReclaimConfirmed.v1': 'payment.refunded',
  'PaymentOutflowRetracted.v1': null,
  'PaymentOutflowMinedAgain.v1': null,
  'PaymentRecoveryConfirmed.v1': 'payment.recovered',
  'PaymentRescueConfirmed.v1': 'payment.rescued',
  'PaymentAssetSelected.v1': null,
  'PaymentCancelled.v1': 'payment.cancelled',
  'PaymentExpired.v1': 'payment.expired',
  'PaymentFailed.v1': 'payment.failed',
  'PaymentSettlementDelayed.v1': 'payment.settlement_delayed',
  'PaymentSettlementFailed.v1': 'payment.settlement_failed',
  'PaymentSettlementReported.v1': null,
  'PaymentSettlementCompleted.v1': null,
  'PaymentSettlementExposed.v1': null,
};

/**
 * The webhook a fact produces: PAYMENT_WEBHOOK_BY_EVENT, but a reinstatement says the phase it restored and a
 * deployment's confirmation the method deployed.
 */
export const paymentWebhookType = (event: PaymentEvent): PaymentWebhookType | null =>
  legacyDeploymentWebhook(event) ??
  ((event.type === 'PaymentReinstated.v1' && event.data.phase === 'escrow_confirmed') ||
  (event.type === 'PaymentDeploymentConfirmed.v1' && event.data.method === 'TWO_STEP')
    ? 'payment.escrow_confirmed'
    : PAYMENT_WEBHOOK_BY_EVENT[event.type]);

/** A deployment fact recorded before its webhook waited for the confirmations was announced from itself. */
const legacyDeploymentWebhook = (event: PaymentEvent): PaymentWebhookType | null => {
  if (event.type === 'PaymentSettled.v1' && !event.data.announcedAtConfirmations) return 'payment.settled';
  if (event.type === 'PaymentEscrowFunded.v1' && !event.data.announcedAtConfirmations)
    return 'payment.escrow_confirmed';
  return null;
};
