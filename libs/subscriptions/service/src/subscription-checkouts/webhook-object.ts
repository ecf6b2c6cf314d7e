import {
  checkoutReorgedWebhookExtras,
  completedCheckoutWebhookExtras,
  foldSubscriptionCheckout,
  type SubscriptionCheckoutCompleted,
  type SubscriptionCheckoutCompletionRetracted,
  SUBSCRIPTION_CHECKOUT_CATEGORY,
  type SubscriptionCheckoutEvent,
  type SubscriptionCheckoutObject,
  subscriptionCheckoutObject,
  WEBHOOK_TYPE_BY_EVENT,
} from '@stablepay/subscriptions-domain';
import { topicForCategory } from '@stablepay/event-bus';
import type { SubscriptionCheckoutRow } from './subscription-checkout.reader';
import { SUBSCRIPTIONS_UPCASTERS } from '../upcasters';

interface StoredEvent {
  readonly type: string;
  readonly data: unknown;
}

/** The service database as a webhook source's `isReadable` gets it (typed by what is used). */
interface ReadModels {
  query(sql: string, parameters?: unknown[]): Promise<unknown[]>;
}

/** A ledger row as far as the checkout webhooks read it (the charge ledger's `subscription_charge` object). */
interface LedgerRow {
  readonly id: string;
  readonly tx_hash: string | null;
}

/**
 * What the charge ledger contributes to `subscription_checkout.completed` (typed here by what is used, so neither scope
 * imports the other; the composition roots pass the ledger's CHARGE_LEDGER_ROW_VIEW): the first charge's stream, its
 * row as of the n-th recording (null while not written), and whether GET /merchants/:merchantId/charges lists it.
 */
export interface LedgerChargeRowView {
  streamIdOf(chargeId: string): string;
  rowAsOfRecording(chargeHistory: readonly StoredEvent[], n: number): LedgerRow | null;
  listed(reads: ReadModels, row: LedgerRow): Promise<boolean>;
}

/**
 * The subscription checkout object as of the last of `history` (a stream's events from its first up to one
 * event, newest versions): the projection of the state they fold to. The read model and the webhooks both use
 * it, so a webhook's `data.object` is what the API showed right after that event, on every redelivery alike.
 */
export function subscriptionCheckoutObjectAsOf(history: readonly StoredEvent[]): SubscriptionCheckoutObject {
  const { checkout } = foldSubscriptionCheckout(history as readonly SubscriptionCheckoutEvent[]);
  if (!checkout) throw new Error('a subscription checkout stream must start with its creation');
  return subscriptionCheckoutObject(checkout);
}

/**
 * The object of a read-model row (the projection stored subscriptionCheckoutObjectAsOf its revision): every field
 * of the subscription checkout object, metadata echoed, without `subscription_options` (and without the branding
 * colors, which only API responses echo): exactly what a webhook of that revision shows as `data.object`.
 */
export function subscriptionCheckoutWebhookObject(
  row: Pick<SubscriptionCheckoutRow, 'object'>,
): SubscriptionCheckoutObject {
  const o = row.object;
  return {
    object: 'subscription_checkout',
    id: o.id,
    status: o.status,
    onchain_id: o.onchain_id,
    business_name: o.business_name,
    subscriber: o.subscriber,
    external_customer_id: o.external_customer_id,
    price: o.price,
    price_currency: o.price_currency,
    period_duration: o.period_duration,
    cap: o.cap,
    budget: o.budget,
    checkout_url: o.checkout_url,
    success_url: o.success_url,
    cancel_url: o.cancel_url,
    return_url: o.return_url,
    metadata: { ...o.metadata },
    supported_chains: [...o.supported_chains],
    expires_at: o.expires_at,
    created_at: o.created_at,
    updated_at: o.updated_at,
    completed_at: o.completed_at,
    cancelled_at: o.cancelled_at,
    expired_at: o.expired_at,
    cancellation_reason: o.cancellation_reason,
  };
}

/**
 * The webhook a stored subscription checkout event becomes (SPEC Events > Subscription checkout events): its type
 * (`subscription_checkout.created`, ...) and `data.object` as of that event (every field of the object, metadata
 * echoed, no `subscription_options`); null for event types that are not delivered. `history` is the stream up to
 * and including `event`. `completed` also carries `data.subscription` and `data.first_charge`: the charge ledger's row
 * (`firstChargeRow`, SPEC Events: the subscription charge, as GET /merchants/:merchantId/charges lists it); a caller
 * without the ledger (the write benchmark) passes none and gets the charge as the subscription facts show it.
 */
export function subscriptionCheckoutWebhook(
  event: StoredEvent,
  history: readonly StoredEvent[],
  firstChargeRow?: object,
): { type: string; data: { object: SubscriptionCheckoutObject } & Record<string, unknown> } | null {
  const type = (WEBHOOK_TYPE_BY_EVENT as Record<string, string | undefined>)[event.type];
  if (type === undefined) return null;
  const last = history.at(-1);
  if (last?.type !== event.type)
    throw new Error(`history of ${event.type} must end with that event, not ${last?.type ?? 'nothing'}`);
  const object = subscriptionCheckoutObjectAsOf(history);
  if (event.type === 'SubscriptionCheckoutCompletionRetracted.v1') {
    const d = event.data as SubscriptionCheckoutCompletionRetracted['data'];
    return { type, data: { object, ...checkoutReorgedWebhookExtras(d.txHash) } };
  }
  if (event.type === 'SubscriptionCheckoutCompleted.v3') {
    // The subscription and its first charge as the completion recorded them (absent on v2 completions).
    const d = event.data as SubscriptionCheckoutCompleted['data'];
    if (d.subscription && d.firstCharge) {
      const extras = completedCheckoutWebhookExtras(d.subscription, d.firstCharge);
      return {
        type,
        data: {
          object,
          subscription: extras.subscription,
          first_charge: firstChargeRow ?? extras.first_charge,
        },
      };
    }
  }
  return { type, data: { object } };
}

/**
 * The completion's first charge: its charge stream, and which recording of it the completion rests on (the n-th
 * completion in the intent's history rests on the n-th recording: a reorg undoes a completion and its recording
 * together, and the re-included transaction brings both back). Null for events without one.
 */
function firstChargeOf(
  event: StoredEvent,
  history: readonly StoredEvent[],
): { chargeId: string; recording: number } | null {
  if (event.type !== 'SubscriptionCheckoutCompleted.v3') return null;
  const d = event.data as SubscriptionCheckoutCompleted['data'];
  if (!d.subscription || !d.firstCharge) return null;
  const recording = history.filter((e) => e.type === 'SubscriptionCheckoutCompleted.v3').length;
  return { chargeId: d.firstCharge.chargeId, recording };
}

/**
 * What the composition roots register with `domainEventSource` (apps/webhook-dispatch, the embedded launcher), given
 * the charge ledger's row view: the mapping reads the stream up to each event (the process's store reads v1 events
 * through our upcasters); a completion also reads its first charge's ledger stream, is recorded only once the ledger
 * has written that charge (`relatedReady`: the ledger records it after the completion is decided, so until then the
 * message is retried), and is not attempted before the charges list shows the row (`isReadable`, SPEC fiat field rule 6).
 */
export function subscriptionCheckoutWebhookSource(ledger: LedgerChargeRowView) {
  const firstChargeRow = (
    event: StoredEvent,
    history: readonly StoredEvent[],
    related: ReadonlyMap<string, readonly StoredEvent[]>,
  ) => {
    const first = firstChargeOf(event, history);
    if (!first) return undefined;
    return ledger.rowAsOfRecording(related.get(ledger.streamIdOf(first.chargeId)) ?? [], first.recording);
  };
  return {
    name: 'subscription-checkouts',
    topic: topicForCategory(SUBSCRIPTION_CHECKOUT_CATEGORY),
    withHistory: true,
    upcasters: SUBSCRIPTIONS_UPCASTERS,
    relatedStreams: (event: StoredEvent, history: readonly StoredEvent[]) => {
      const first = firstChargeOf(event, history);
      return first ? [ledger.streamIdOf(first.chargeId)] : [];
    },
    relatedReady: (
      event: StoredEvent,
      history: readonly StoredEvent[],
      related: ReadonlyMap<string, readonly StoredEvent[]>,
    ) => firstChargeRow(event, history, related) !== null,
    map: (
      event: StoredEvent,
      history: readonly StoredEvent[],
      related: ReadonlyMap<string, readonly StoredEvent[]>,
    ) => {
      // Null only when the recorder gave up waiting for the ledger (RELATED_WAIT_LIMIT_MS): the first charge as the
      // completion recorded it, without the ledger's created_at and fiat fields, rather than no webhook at all.
      const row = firstChargeRow(event, history, related);
      return subscriptionCheckoutWebhook(event, history, row ?? undefined);
    },
    isReadable: async (event: { readonly data: object }, reads: ReadModels): Promise<boolean> => {
      const row = (event.data as { readonly first_charge?: LedgerRow }).first_charge;
      return row === undefined || (await ledger.listed(reads, row));
    },
  };
}
