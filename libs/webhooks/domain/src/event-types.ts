/**
 * SPEC Events: the catalogue of public webhook event types. The merchant's selection (PATCH /settings
 * `webhook_event_types`) and every draft a source produces are checked against it.
 */
export const PAYMENT_EVENT_TYPES = [
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
  // Ours: a recover or a rescue moved funds out of the deposit (SPEC names no event for it; docs/webhooks.md).
  'payment.recovered',
  'payment.rescued',
] as const;

export const SUBSCRIPTION_CHECKOUT_EVENT_TYPES = [
  'subscription_checkout.created',
  'subscription_checkout.completed',
  'subscription_checkout.cancelled',
  'subscription_checkout.expired',
  // Ours, like subscription.reorged: a reorg took out the subscribe transaction of a completion (docs/webhooks.md).
  'subscription_checkout.reorged',
] as const;

export const SUBSCRIPTION_EVENT_TYPES = [
  'subscription.created',
  'subscription.charge_succeeded',
  'subscription.charge_failed',
  'subscription.charge_settled',
  'subscription.charge_settlement_delayed',
  'subscription.charge_settlement_failed',
  'subscription.cap_updated',
  'subscription.budget_updated',
  'subscription.migrated',
  'subscription.cancelled',
  'subscription.flagged',
  // Ours (SPEC Events rule 1: the list is open): a reorg undid the fact of an earlier event (docs/webhooks.md).
  'subscription.reorged',
  // Ours: a charge paid the settlement address the merchant replaced, which the chain still held (docs/webhooks.md).
  'subscription.charge_paid_replaced_settlement_address',
] as const;

/** Payout events (beta). */
export const PAYOUT_EVENT_TYPES = [
  'customer.activated',
  'customer.action_required',
  'customer.kyc_failed',
  'payout.deposit_detected',
  'payout.forwarded',
  'payout.completed',
  'payout.failed',
  'payout.refunded',
] as const;

export const WEBHOOK_EVENT_TYPES = [
  ...PAYMENT_EVENT_TYPES,
  ...SUBSCRIPTION_CHECKOUT_EVENT_TYPES,
  ...SUBSCRIPTION_EVENT_TYPES,
  ...PAYOUT_EVENT_TYPES,
] as const;

export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

const KNOWN: ReadonlySet<string> = new Set(WEBHOOK_EVENT_TYPES);

export function isWebhookEventType(value: string): value is WebhookEventType {
  return KNOWN.has(value);
}

/** SPEC Events > test delivery: `POST /settings/webhook/test` sends this type. */
export const TEST_DELIVERY_EVENT_TYPE: WebhookEventType = 'subscription.charge_succeeded';

/**
 * SPEC Delivery rule 5 (events to receive are selected): `null` selects every type; a list selects exactly those.
 * An empty list selects nothing (every event is recorded as `not_selected`).
 */
export function isEventTypeSelected(selection: readonly string[] | null, type: string): boolean {
  return selection === null || selection.includes(type);
}
