/**
 * Events of the `subscription-<0x id>` stream (its topic, `subscriptions.subscription.v1`, is registered when it is wired).
 *
 * Events record facts: what the chain confirmed (or what our charge attempt met) and the decisions the service took
 * from them (the paused brake), with the minimum data that rebuilds the aggregate. Amounts are integer strings in the
 * token's smallest unit, chain instants are unix seconds (strings) of block time, service instants ISO strings. The
 * subscription object of the API and of webhooks is a projection of the state (subscriptionObject), never stored
 * here. A changed shape becomes a new version plus an upcaster.
 */

/** SPEC States > Subscription. `cancelling`: a cancel transaction confirmed that the indexer has not yet ingested. */
export type SubscriptionStatus = 'active' | 'cancelling' | 'cancelled';

/** SubscriptionCancelled.cancelledBy on chain (Canceller in @stablepay/contracts). */
export type SubscriptionCanceller = 'merchant' | 'subscriber';

/** Which write path recorded a charge (SPEC fiat field rule 5): the charge or subscribe call, or the indexer. */
export type ChargeWritePath = 'api' | 'indexer';

/**
 * The subscribe transaction confirmed: `SubscriptionCreated(subscriptionId, subscriber, token, cap, budget,
 * periodDuration, startedAt)` plus what the completed subscription checkout says about the plan.
 */
export interface SubscriptionCreatedData {
  readonly subscriptionId: string;
  readonly checkoutId: string | null;
  readonly subscriber: string;
  readonly externalCustomerId: string | null;
  readonly chain: string;
  readonly asset: string;
  readonly tokenSymbol: string;
  readonly tokenDecimals: number;
  readonly cap: string;
  readonly budget: string;
  /** The plan price: fiat minor units when priceCurrency is set, else token smallest units (SPEC). */
  readonly price: string;
  readonly priceCurrency: string | null;
  readonly periodDuration: number;
  /** The immutable on-chain start (block time, unix seconds): every window is anchored here (cap and budget rule 3). */
  readonly startedAt: string;
  readonly txHash: string;
  readonly createdAt: string;
}

/** A `SubscriptionCharged` log as a receipt or the indexer reports it: the nonce it consumed and the window state after it. */
export interface ChargeObservation {
  readonly nonce: number;
  readonly amount: string;
  /** Network fee in token smallest units (SPEC `fee`). */
  readonly fee: string;
  readonly txHash: string;
  readonly blockNumber: string;
  /** Block time, ISO. */
  readonly chargedAt: string;
  readonly windowIndex: string;
  readonly windowSpent: string;
  readonly quoteHash: string;
  /**
   * Where the charge call read this log: its receipt's block and the log's place in it (for a charge found landed by
   * someone else, by the charge call or a merchant cancel, where the node's log query placed it). The receipt check
   * (SubscriptionReceiptChecks) watches that block until the indexer has read it. Absent on the indexer's and the
   * subscribe call's charges, on a landed charge whose node gave no block hash (and on those recorded before
   * 2026-11-24 17:50), and on every charge recorded before 2026-11-24 (the call then kept a row of its own before the
   * fact): readers take it as optional.
   */
  readonly receipt?: ChargeReceipt;
}

/** A SubscriptionCharged log as a receipt placed it: the emitting manager, the block's hash, the log's index in it. */
export interface ChargeReceipt {
  readonly manager: string;
  readonly blockHash: string;
  readonly logIndex: number;
}

export interface SubscriptionChargeSucceededData extends ChargeObservation {
  readonly chargeId: string;
  readonly writtenBy: ChargeWritePath;
  /**
   * True when our own transaction reverted NonceAlreadyUsed and this is the log of whoever submitted the merchant's
   * signature first: the charge succeeded, it is not a failure and it does not pause.
   */
  readonly landedByAnotherSubmitter: boolean;
  /**
   * The fiat amount (minor units of the plan's currency) the charge's quote converted: an ad-hoc `fiat_amount`
   * (metered usage, add-ons) or the plan price. What a fiat-settled business is paid out for this charge. Absent when
   * no quote in the plan's currency was redeemed (the indexer's and the subscribe call's charges, token-priced plans)
   * and on every charge recorded before 2026-11-24 21:30: readers then take the plan price.
   */
  readonly quotedFiatAmount?: string;
}

/** Where a failed attempt stopped: the contract simulation (never broadcast) or the mined receipt. */
export type ChargeFailureStage = 'simulation' | 'receipt';

export interface SubscriptionChargeFailedData {
  readonly chargeId: string;
  /** The nonce the attempt carried; not consumed (a reverted charge leaves the next nonce where it was). */
  readonly nonce: number;
  readonly amount: string;
  /** Null when rejected at simulation (never broadcast). */
  readonly txHash: string | null;
  readonly failureReason: string;
  readonly stage: ChargeFailureStage;
  /** API submission time, ISO. */
  readonly failedAt: string;
}

export type SubscriptionCreated = { type: 'SubscriptionCreated.v1'; data: SubscriptionCreatedData };
export type SubscriptionChargeSucceeded = {
  type: 'SubscriptionChargeSucceeded.v1';
  data: SubscriptionChargeSucceededData;
};
export type SubscriptionChargeFailed = {
  type: 'SubscriptionChargeFailed.v1';
  data: SubscriptionChargeFailedData;
};
/**
 * Our charge transaction was broadcast and its receipt did not arrive in time (the relayer gave up waiting): the nonce
 * is pending with that transaction. A retry waits for this transaction instead of sending another; the receipt, or the
 * indexer's SubscriptionCharged log, settles it (docs/subscriptions.md, Charge receipt timeout).
 */
export type SubscriptionChargeSubmitted = {
  type: 'SubscriptionChargeSubmitted.v1';
  data: { nonce: number; amount: string; quoteHash: string; txHash: string; submittedAt: string };
};
/** The dunning brake engaged (SPEC States > Subscription, paused table), because of the failed charge named. */
export type SubscriptionPaused = {
  type: 'SubscriptionPaused.v1';
  data: { chargeId: string; failureReason: string; pausedAt: string };
};
/** The brake released by the successful charge named. */
export type SubscriptionUnpaused = {
  type: 'SubscriptionUnpaused.v1';
  data: { chargeId: string; unpausedAt: string };
};
/** A cancel transaction was submitted and confirmed (active -> cancelling). */
export type SubscriptionCancelConfirmed = {
  type: 'SubscriptionCancelConfirmed.v1';
  data: { by: SubscriptionCanceller; txHash: string; confirmedAt: string };
};
/** The indexer ingested `SubscriptionCancelled` (-> cancelled, terminal). */
export type SubscriptionCancelled = {
  type: 'SubscriptionCancelled.v1';
  data: { by: SubscriptionCanceller; txHash: string; cancelledAt: string };
};
export type SubscriptionCapUpdated = {
  type: 'SubscriptionCapUpdated.v1';
  data: { oldCap: string; newCap: string; txHash: string; updatedAt: string };
};
export type SubscriptionBudgetUpdated = {
  type: 'SubscriptionBudgetUpdated.v1';
  data: {
    oldBudget: string;
    newBudget: string;
    windowIndex: string;
    windowSpent: string;
    txHash: string;
    updatedAt: string;
  };
};
/** `SubscriptionMigrated`: balance and allowance of the new wallet as the contract read them in that block. */
export type SubscriptionMigrated = {
  type: 'SubscriptionMigrated.v1';
  data: {
    oldSubscriber: string;
    newSubscriber: string;
    newSubscriberBalance: string;
    newSubscriberAllowance: string;
    txHash: string;
    migratedAt: string;
  };
};
/**
 * The subscribe call reported the first charge (nonce 0) after the indexer had recorded it: the charge itself is
 * recorded once (by the indexer), and this fact is what lets the charge ledger backfill the first charge's fiat
 * fields (SPEC fiat field rule 3). Never emitted when the subscribe call recorded the charge first.
 */
export type SubscriptionFirstChargeReported = {
  type: 'SubscriptionFirstChargeReported.v1';
  data: { chargeId: string; txHash: string; reportedAt: string };
};
/**
 * A reorg orphaned the block of a recorded charge (the indexer retracted its SubscriptionCharged observation): the
 * charge is undone here (its nonce is free again, the window spend falls back) and the ledger marks its row
 * `charge_lost_to_reorg` (docs/subscriptions.md, Reorgs). The same log re-included later is recorded again.
 */
export type SubscriptionChargeRetracted = {
  type: 'SubscriptionChargeRetracted.v1';
  data: { chargeId: string; nonce: number; txHash: string; retractedAt: string };
};
/** The non-charge chain facts a reorg can undo, by the webhook type that announced each. */
export type RetractableFact =
  | 'created'
  | 'cancelled'
  | 'cap_updated'
  | 'budget_updated'
  | 'migrated'
  | 'migration_proposed'
  | 'migration_voided';
/**
 * A reorg orphaned the block of a recorded non-charge fact (creation, cancellation, cap or budget update, migration):
 * the state folds as if it never happened; the same log re-included later is recorded again.
 */
export type SubscriptionFactRetracted = {
  type: 'SubscriptionFactRetracted.v1';
  data: { fact: RetractableFact; txHash: string; retractedAt: string };
};
/**
 * `MigrationProposed`: the subscriber proposed moving the subscription to `proposedSubscriber` (the zero address
 * withdraws a proposal). Nothing changes until the new wallet accepts (SubscriptionMigrated).
 */
export type SubscriptionMigrationProposed = {
  type: 'SubscriptionMigrationProposed.v1';
  data: { proposedSubscriber: string; txHash: string; proposedAt: string };
};
/**
 * `MigrationVoided`: a cap or budget change voided the pending proposal (the new wallet must see the terms again), or a
 * cancel ended it.
 */
export type SubscriptionMigrationVoided = {
  type: 'SubscriptionMigrationVoided.v1';
  data: { proposedSubscriber: string; txHash: string; voidedAt: string };
};
/**
 * A recorded charge paid another address than the settlement address of the merchant's settings: the chain's registry
 * still held the one the merchant replaced (POST /settings gave a new one, its MerchantChange had not landed on that
 * chain), e.g. a subscribe authorized before the change and sent after it. The charge stands (on-chain truth); this
 * is how the merchant learns where that money went (webhook `subscription.charge_paid_replaced_settlement_address`).
 * `settlementAddress` is the settings' address when the service recorded the charge.
 */
export type SubscriptionChargePaidReplacedSettlement = {
  type: 'SubscriptionChargePaidReplacedSettlement.v1';
  data: {
    chargeId: string;
    nonce: number;
    txHash: string;
    paidTo: string;
    settlementAddress: string;
    recordedAt: string;
  };
};
/** Compliance screening matched the subscriber. */
export type SubscriptionFlagged = {
  type: 'SubscriptionFlagged.v1';
  data: { subscriber: string; flaggedAt: string };
};

export type SubscriptionEvent =
  | SubscriptionCreated
  | SubscriptionChargeSucceeded
  | SubscriptionChargeFailed
  | SubscriptionPaused
  | SubscriptionUnpaused
  | SubscriptionCancelConfirmed
  | SubscriptionCancelled
  | SubscriptionCapUpdated
  | SubscriptionBudgetUpdated
  | SubscriptionMigrated
  | SubscriptionFlagged
  | SubscriptionFirstChargeReported
  | SubscriptionChargeRetracted
  | SubscriptionFactRetracted
  | SubscriptionChargeSubmitted
  | SubscriptionMigrationProposed
  | SubscriptionMigrationVoided
  | SubscriptionChargePaidReplacedSettlement;

/** Every stored type of the stream this release knows (projections and the webhook source skip later ones). */
export const SUBSCRIPTION_STORED_EVENT_TYPES: readonly SubscriptionEvent['type'][] = [
  'SubscriptionCreated.v1',
  'SubscriptionChargeSucceeded.v1',
  'SubscriptionChargeFailed.v1',
  'SubscriptionPaused.v1',
  'SubscriptionUnpaused.v1',
  'SubscriptionCancelConfirmed.v1',
  'SubscriptionCancelled.v1',
  'SubscriptionCapUpdated.v1',
  'SubscriptionBudgetUpdated.v1',
  'SubscriptionMigrated.v1',
  'SubscriptionFlagged.v1',
  'SubscriptionFirstChargeReported.v1',
  'SubscriptionChargeRetracted.v1',
  'SubscriptionFactRetracted.v1',
  'SubscriptionChargeSubmitted.v1',
  'SubscriptionMigrationProposed.v1',
  'SubscriptionMigrationVoided.v1',
  'SubscriptionChargePaidReplacedSettlement.v1',
];

export const SUBSCRIPTION_CATEGORY = 'subscription';
export const subscriptionStreamId = (id: string): string => `${SUBSCRIPTION_CATEGORY}-${id}`;

/**
 * Stored event type -> webhook event type (SPEC Events > Subscription events). Paused, unpaused and the cancel
 * confirmation have no webhook: SPEC names none (the brake shows in `paused` of the next subscription object).
 */
export const SUBSCRIPTION_WEBHOOK_TYPE_BY_EVENT: Readonly<
  Partial<Record<SubscriptionEvent['type'], string>>
> = {
  'SubscriptionCreated.v1': 'subscription.created',
  'SubscriptionChargeSucceeded.v1': 'subscription.charge_succeeded',
  'SubscriptionChargeFailed.v1': 'subscription.charge_failed',
  'SubscriptionCapUpdated.v1': 'subscription.cap_updated',
  'SubscriptionBudgetUpdated.v1': 'subscription.budget_updated',
  'SubscriptionMigrated.v1': 'subscription.migrated',
  'SubscriptionCancelled.v1': 'subscription.cancelled',
  'SubscriptionFlagged.v1': 'subscription.flagged',
  // A retracted charge is a failed charge (failure_reason charge_lost_to_reorg) for a merchant who upserts charges by id.
  'SubscriptionChargeRetracted.v1': 'subscription.charge_failed',
  'SubscriptionFactRetracted.v1': 'subscription.reorged',
  'SubscriptionChargePaidReplacedSettlement.v1': 'subscription.charge_paid_replaced_settlement_address',
};
