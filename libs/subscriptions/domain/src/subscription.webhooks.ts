import {
  foldSubscription,
  type SubscriptionObject,
  subscriptionObject,
  type SubscriptionState,
} from './subscription';
import type {
  RetractableFact,
  SubscriptionCanceller,
  SubscriptionChargePaidReplacedSettlement,
  SubscriptionChargeSucceededData,
  SubscriptionCreatedData,
  SubscriptionEvent,
} from './subscription.events';

/**
 * SPEC Events > Subscription events: the `data` of each subscription webhook, as pure functions of the subscription
 * object (the projection of the state as of the event) and, for charges, of the charge object of the charge ledger
 * (`subscription_charge`, built by @stablepay/ledger-domain's chargeObject; typed here by the fields the spread needs, so
 * this scope does not import the ledger's). The settlement summaries are the ledger's (settlementSummary).
 */
export interface WebhookCharge {
  readonly object: 'subscription_charge';
  readonly id: string;
  readonly subscription_id: string;
  readonly amount: string;
  readonly fee: string;
  readonly tx_hash: string | null;
  readonly block_number: string;
  readonly charged_at: string;
  /** The nonce the charge used (rule 4). */
  readonly charge_nonce: number;
  readonly status: 'succeeded' | 'failed';
  readonly failure_reason: string | null;
}

/** The deprecated charge fields spread into `data.object` (rule 5: read `data.charge`). */
export interface SpreadChargeSucceeded {
  readonly amount: string;
  readonly fee: string;
  readonly subscription_charge_id: string;
  readonly tx_hash: string | null;
  readonly block_number: string;
  readonly charged_at: string;
}
export type SpreadChargeFailed = Omit<SpreadChargeSucceeded, 'fee'> & {
  readonly failure_reason: string | null;
};

export interface ChargeWebhookData<S, C extends WebhookCharge> {
  /** The subscription plus the deprecated spread; its `charge_nonce` stays the subscription's NEXT nonce (rule 4). */
  readonly object: SubscriptionObject & S;
  readonly charge: C;
}

function requireChargeOf(
  subscription: SubscriptionObject,
  charge: WebhookCharge,
  status: WebhookCharge['status'],
) {
  if (
    charge.subscription_id.toLowerCase() !== subscription.subscription_id.toLowerCase() ||
    charge.status !== status
  )
    throw new RangeError(`a ${status} charge of subscription ${subscription.subscription_id} is required`);
}

/** subscription.created: data.object is the subscription. Also cap_updated and budget_updated. */
export const subscriptionWebhookData = (subscription: SubscriptionObject) => ({ object: subscription });

/** subscription.charge_succeeded: the subscription plus the spread; data.charge the charge (nonces differ by one). */
export function chargeSucceededWebhookData<C extends WebhookCharge>(
  subscription: SubscriptionObject,
  charge: C,
): ChargeWebhookData<SpreadChargeSucceeded, C> {
  requireChargeOf(subscription, charge, 'succeeded');
  return {
    object: {
      ...subscription,
      amount: charge.amount,
      fee: charge.fee,
      subscription_charge_id: charge.id,
      tx_hash: charge.tx_hash,
      block_number: charge.block_number,
      charged_at: charge.charged_at,
    },
    charge,
  };
}

/** subscription.charge_failed: same shape plus failure_reason, no fee on data.object; data.charge.fee is "0". */
export function chargeFailedWebhookData<C extends WebhookCharge>(
  subscription: SubscriptionObject,
  charge: C,
): ChargeWebhookData<SpreadChargeFailed, C> {
  requireChargeOf(subscription, charge, 'failed');
  return {
    object: {
      ...subscription,
      amount: charge.amount,
      subscription_charge_id: charge.id,
      tx_hash: charge.tx_hash,
      block_number: charge.block_number,
      charged_at: charge.charged_at,
      failure_reason: charge.failure_reason,
    },
    charge,
  };
}

export interface MigrationFacts {
  readonly oldSubscriber: string;
  readonly newSubscriber: string;
  readonly newSubscriberBalance: string;
  readonly newSubscriberAllowance: string;
}

/** subscription.migrated: the subscription plus the old and new wallets and the new wallet's balance and allowance. */
export const migratedWebhookData = (subscription: SubscriptionObject, m: MigrationFacts) => ({
  object: {
    ...subscription,
    old_subscriber: m.oldSubscriber,
    new_subscriber: m.newSubscriber,
    new_subscriber_balance: m.newSubscriberBalance,
    new_subscriber_allowance: m.newSubscriberAllowance,
  },
});

/** subscription.cancelled: the subscription plus cancelled_by; terminal. */
export const cancelledWebhookData = (subscription: SubscriptionObject, by: SubscriptionCanceller) => ({
  object: { ...subscription, cancelled_by: by },
});

/** subscription.flagged: data.object has id, subscription_id, object and subscriber only. */
export const flaggedWebhookData = (subscription: SubscriptionObject, subscriber: string) => ({
  object: {
    id: subscription.id,
    subscription_id: subscription.subscription_id,
    object: 'subscription' as const,
    subscriber,
  },
});

/**
 * subscription.charge_paid_replaced_settlement_address (ours): the subscription, and the charge that paid `paid_to`,
 * which is not the merchant's `settlement_address` (the chain still held the replaced one).
 */
export const replacedSettlementWebhookData = (
  subscription: SubscriptionObject,
  d: SubscriptionChargePaidReplacedSettlement['data'],
) => ({
  object: subscription,
  settlement_mismatch: {
    subscription_charge_id: d.chargeId,
    charge_nonce: d.nonce,
    tx_hash: d.txHash,
    paid_to: d.paidTo,
    settlement_address: d.settlementAddress,
  },
});

/** The webhook type that announced each retractable fact: what `subscription.reorged` names as undone. */
export const REORGED_WEBHOOK_TYPE: Readonly<Record<RetractableFact, string | null>> = {
  created: 'subscription.created',
  cancelled: 'subscription.cancelled',
  cap_updated: 'subscription.cap_updated',
  budget_updated: 'subscription.budget_updated',
  migrated: 'subscription.migrated',
  // A proposal has no webhook of its own (SPEC names none), so its retraction has none either.
  migration_proposed: null,
  migration_voided: null,
};

/**
 * subscription.reorged (ours; SPEC Events rule 1 keeps the list open): a chain reorg took out the transaction of an
 * earlier event. data.object is the subscription as it now stands (the undone fact folded out); data.reorged names
 * the event type whose fact is undone and its orphaned transaction. A re-included transaction is announced again with
 * its original event type.
 */
export const reorgedWebhookData = (subscription: SubscriptionObject, eventType: string, txHash: string) => ({
  object: subscription,
  reorged: { event_type: eventType, tx_hash: txHash },
});

const unixOf = (iso: string) => BigInt(Math.floor(Date.parse(iso) / 1000));

/** The chain time an event happened at: the subscription object of its webhook shows the window of that moment. */
export function subscriptionEventChainTime(event: SubscriptionEvent): bigint {
  switch (event.type) {
    case 'SubscriptionCreated.v1':
      return BigInt(event.data.startedAt);
    case 'SubscriptionChargeSucceeded.v1':
      return unixOf(event.data.chargedAt);
    case 'SubscriptionChargeFailed.v1':
      return unixOf(event.data.failedAt);
    case 'SubscriptionPaused.v1':
      return unixOf(event.data.pausedAt);
    case 'SubscriptionUnpaused.v1':
      return unixOf(event.data.unpausedAt);
    case 'SubscriptionCancelConfirmed.v1':
      return unixOf(event.data.confirmedAt);
    case 'SubscriptionCancelled.v1':
      return unixOf(event.data.cancelledAt);
    case 'SubscriptionCapUpdated.v1':
    case 'SubscriptionBudgetUpdated.v1':
      return unixOf(event.data.updatedAt);
    case 'SubscriptionMigrated.v1':
      return unixOf(event.data.migratedAt);
    case 'SubscriptionFlagged.v1':
      return unixOf(event.data.flaggedAt);
    case 'SubscriptionFirstChargeReported.v1':
      return unixOf(event.data.reportedAt);
    case 'SubscriptionChargeRetracted.v1':
    case 'SubscriptionFactRetracted.v1':
      return unixOf(event.data.retractedAt);
    case 'SubscriptionChargeSubmitted.v1':
      return unixOf(event.data.submittedAt);
    case 'SubscriptionMigrationProposed.v1':
      return unixOf(event.data.proposedAt);
    case 'SubscriptionMigrationVoided.v1':
      return unixOf(event.data.voidedAt);
    case 'SubscriptionChargePaidReplacedSettlement.v1':
      return unixOf(event.data.recordedAt);
  }
}

/**
 * The webhook of a subscription event that is not about a charge, from the state folded up to and including it (the
 * charge webhooks need the ledger's charge object: chargeSucceededWebhookData / chargeFailedWebhookData). Null for the
 * events that have no webhook (paused, unpaused, cancel confirmed) and for the charge events.
 */
export function subscriptionEventWebhook(
  event: SubscriptionEvent,
  stateAfter: SubscriptionState,
): { readonly type: string; readonly data: Record<string, unknown> } | null {
  const subscription = subscriptionObject(stateAfter, subscriptionEventChainTime(event));
  switch (event.type) {
    case 'SubscriptionCreated.v1':
      return { type: 'subscription.created', data: subscriptionWebhookData(subscription) };
    case 'SubscriptionCapUpdated.v1':
      return { type: 'subscription.cap_updated', data: subscriptionWebhookData(subscription) };
    case 'SubscriptionBudgetUpdated.v1':
      return { type: 'subscription.budget_updated', data: subscriptionWebhookData(subscription) };
    case 'SubscriptionMigrated.v1':
      return { type: 'subscription.migrated', data: migratedWebhookData(subscription, event.data) };
    case 'SubscriptionCancelled.v1':
      return { type: 'subscription.cancelled', data: cancelledWebhookData(subscription, event.data.by) };
    case 'SubscriptionFlagged.v1':
      return { type: 'subscription.flagged', data: flaggedWebhookData(subscription, event.data.subscriber) };
    case 'SubscriptionChargePaidReplacedSettlement.v1':
      return {
        type: 'subscription.charge_paid_replaced_settlement_address',
        data: replacedSettlementWebhookData(subscription, event.data),
      };
    case 'SubscriptionFactRetracted.v1': {
      const undone = REORGED_WEBHOOK_TYPE[event.data.fact];
      if (undone === null) return null;
      return {
        type: 'subscription.reorged',
        data: reorgedWebhookData(subscription, undone, event.data.txHash),
      };
    }
    default:
      return null;
  }
}

/** `data.first_charge` of subscription_checkout.completed as the subscription stream knows it. */
export interface StreamWebhookCharge extends WebhookCharge {
  readonly subscriber: string;
  readonly chain: string;
}

/**
 * The webhook of a non-charge event of a `subscription-<id>` stream, from the stream up to and including it (the
 * mapping of the subscriptions webhook source). Null for the events that have no webhook and for the charge events:
 * those are the charge ledger's webhooks (their `data.charge` is the ledger's row, chargeWebhookDataAsOf).
 */
export function subscriptionStreamWebhook(
  event: SubscriptionEvent,
  history: readonly SubscriptionEvent[],
): { readonly type: string; readonly data: { readonly object: object } } | null {
  const last = history.at(-1);
  if (last?.type !== event.type)
    throw new Error(`history of ${event.type} must end with that event, not ${last?.type ?? 'nothing'}`);
  // Every webhook subscriptionEventWebhook answers has data.object.
  return subscriptionEventWebhook(event, foldSubscription(history)) as {
    type: string;
    data: { object: object };
  } | null;
}

/**
 * `data` of subscription.charge_succeeded / charge_failed for the charge ledger's row `charge` (SPEC Events rules 4-5):
 * the subscription as of the charge's own fact in its stream (`charge_nonce` the next nonce, the window of that
 * moment) plus the deprecated spread, and `data.charge` exactly the ledger's object. `history` is the whole
 * subscription stream; only its prefix through the charge's fact is read, so later facts change nothing.
 */
export function chargeWebhookDataAsOf<C extends WebhookCharge>(
  history: readonly SubscriptionEvent[],
  charge: C,
): ChargeWebhookData<SpreadChargeSucceeded, C> | ChargeWebhookData<SpreadChargeFailed, C> {
  const sameTx = (a: string | null) => (a ?? '').toLowerCase() === (charge.tx_hash ?? '').toLowerCase();
  let at = -1;
  history.forEach((e, i) => {
    if (
      (e.type === 'SubscriptionChargeSucceeded.v1' ||
        e.type === 'SubscriptionChargeFailed.v1' ||
        // A charge a reorg took out is failed as of its retraction (the nonce is free again: rule 4).
        (e.type === 'SubscriptionChargeRetracted.v1' && charge.status === 'failed')) &&
      e.data.chargeId === charge.id &&
      sameTx(e.data.txHash)
    )
      at = i;
  });
  const fact = history[at];
  if (!fact) throw new RangeError(`the subscription stream holds no fact of charge ${charge.id}`);
  // The brake the charge engaged or released is decided with it (the events right after its fact, naming it): the
  // subscription of a charge that paused it is paused, the one of the charge that released the brake is not.
  let through = at;
  for (let next = history[through + 1]; next; next = history[through + 1]) {
    const brake =
      (next.type === 'SubscriptionPaused.v1' || next.type === 'SubscriptionUnpaused.v1') &&
      next.data.chargeId === charge.id;
    if (!brake) break;
    through += 1;
  }
  const subscription = subscriptionObject(
    foldSubscription(history.slice(0, through + 1)),
    subscriptionEventChainTime(fact),
  );
  return charge.status === 'succeeded'
    ? chargeSucceededWebhookData(subscription, charge)
    : chargeFailedWebhookData(subscription, charge);
}

function succeededChargeObject(
  subscription: SubscriptionObject,
  subscriber: string,
  d: SubscriptionChargeSucceededData,
): StreamWebhookCharge {
  return {
    object: 'subscription_charge',
    id: d.chargeId,
    subscription_id: subscription.subscription_id,
    subscriber,
    chain: subscription.chain,
    amount: d.amount,
    fee: d.fee,
    tx_hash: d.txHash,
    block_number: d.blockNumber,
    charged_at: d.chargedAt,
    charge_nonce: d.nonce,
    status: 'succeeded',
    failure_reason: null,
  };
}

/**
 * `subscription_checkout.reorged` (ours, like subscription.reorged): the completion announced by an earlier
 * `subscription_checkout.completed` is undone because a reorg took out its subscribe transaction; `data.object` is the
 * intent as it now stands (back in its earlier status).
 */
export const checkoutReorgedWebhookExtras = (txHash: string) => ({
  reorged: { event_type: 'subscription_checkout.completed', tx_hash: txHash },
});

/**
 * `data.subscription` and `data.first_charge` of `subscription_checkout.completed` (SPEC Events > Subscription
 * checkout events), from the chain facts the completion recorded: the subscription as of its first charge and that
 * charge (nonce 0).
 */
export function completedCheckoutWebhookExtras(
  created: SubscriptionCreatedData,
  firstCharge: SubscriptionChargeSucceededData,
): { readonly subscription: SubscriptionObject; readonly first_charge: StreamWebhookCharge } {
  const state = foldSubscription([
    { type: 'SubscriptionCreated.v1', data: created },
    { type: 'SubscriptionChargeSucceeded.v1', data: firstCharge },
  ]);
  const subscription = subscriptionObject(
    state,
    BigInt(Math.floor(Date.parse(firstCharge.chargedAt) / 1000)),
  );
  return { subscription, first_charge: succeededChargeObject(subscription, state.subscriber, firstCharge) };
}
