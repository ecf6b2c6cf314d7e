import {
  type CheckoutObject,
  evolvePayment,
  initialPaymentState,
  PAYMENT_CATEGORY,
  PAYMENT_WEBHOOK_BY_EVENT,
  type PaymentEvent,
  type PaymentObject,
  type PaymentOutgoingTransfer,
  type PaymentRecovered,
  type PaymentRecoveryConfirmed,
  type PaymentRescueConfirmed,
  type PaymentRescued,
  type PaymentState,
  paymentSettlementCheckAt,
  paymentWebhookType,
  toCheckoutObject,
  toOutgoingTransfer,
  toPaymentObject,
} from '@stablepay/payments-domain';
import { topicForCategory } from '@stablepay/event-bus';
import { PAYMENTS_UPCASTERS } from '../upcasters';

interface StoredEvent {
  readonly type: string;
  readonly data: unknown;
}

export const PAYMENT_TOPIC = topicForCategory(PAYMENT_CATEGORY);

/** The event types this release knows (newest versions; older ones are read through the upcasters). */
export const KNOWN_PAYMENT_EVENTS = new Set<string>(Object.keys(PAYMENT_WEBHOOK_BY_EVENT));

/** The aggregate's state after `history` (a stream's events from its first, newest versions). */
export function foldPayment(history: readonly StoredEvent[]): PaymentState {
  let state = initialPaymentState();
  for (const event of history) {
    // A type this release does not know changes nothing here (a newer writer's fact): the object shows the rest.
    if (KNOWN_PAYMENT_EVENTS.has(event.type)) state = evolvePayment(state, event as PaymentEvent);
  }
  if (!state.created) throw new Error('a payment stream must start with its creation');
  return state;
}

/**
 * The payment and checkout objects as of the last of `history`. The read model and the webhooks both use it, so
 * a webhook's `data.object` is what the API showed right after that event, on every redelivery alike.
 */
export function paymentObjectsAsOf(history: readonly StoredEvent[]): {
  payment: PaymentObject;
  checkout: CheckoutObject;
  /** When the open fiat settlement's deadlines must next be checked (null: none open). */
  settlementCheckAt: Date | null;
  /** When the fiat settlement started, i.e. the crypto settled (null: no fiat settlement). */
  settlementStartedAt: string | null;
} {
  const state = foldPayment(history);
  return {
    payment: toPaymentObject(state),
    checkout: toCheckoutObject(state),
    settlementCheckAt: paymentSettlementCheckAt(state),
    settlementStartedAt: state.settlement?.startedAt ?? null,
  };
}

/**
 * The webhook a stored payment event becomes (SPEC Events > Payment events): its type from
 * `paymentWebhookType` (PAYMENT_WEBHOOK_BY_EVENT) and `data.object` the payment object as of that event (recoverable_reason and
 * recovery_destination included while funds are recoverable); null for facts merchants are not notified of.
 */
export function paymentWebhook(
  event: StoredEvent,
  history: readonly StoredEvent[],
): { type: string; data: { object: PaymentObject; transfer?: PaymentOutgoingTransfer } } | null {
  const type = KNOWN_PAYMENT_EVENTS.has(event.type) ? paymentWebhookType(event as PaymentEvent) : null;
  if (!type) return null;
  const last = history.at(-1);
  if (last?.type !== event.type)
    throw new Error(`history of ${event.type} must end with that event, not ${last?.type ?? 'nothing'}`);
  const state = foldPayment(history);
  const object = toPaymentObject(state);
  // The object alone cannot say what a recover or rescue moved (the deposit's outflows are not listed in it): the
  // recorded outflow the confirmation names.
  if (event.type === 'PaymentRecoveryConfirmed.v1' || event.type === 'PaymentRescueConfirmed.v1') {
    const { txHash } = (event as PaymentRecoveryConfirmed | PaymentRescueConfirmed).data;
    const moved = history.find(
      (e): e is PaymentRecovered | PaymentRescued =>
        (e.type === 'PaymentRecovered.v1' || e.type === 'PaymentRescued.v1') &&
        (e as PaymentRecovered | PaymentRescued).data.txHash === txHash,
    );
    if (!moved) throw new Error(`${event.type} of ${txHash} follows no recorded recover or rescue`);
    return { type, data: { object, transfer: toOutgoingTransfer(state, moved.data) } };
  }
  return { type, data: { object } };
}

/** The service database as a webhook source's `isReadable` gets it (typed by what is used). */
interface ReadModels {
  query(sql: string, parameters?: unknown[]): Promise<unknown[]>;
}

/** Whether GET /payments/:paymentId shows the payment as of `revision` of its stream (or later). */
export async function paymentProjectedThrough(
  reads: ReadModels,
  paymentId: string,
  revision: number,
): Promise<boolean> {
  const rows = await reads.query('SELECT 1 FROM payments WHERE id = $1 AND revision >= $2', [
    paymentId,
    revision,
  ]);
  return rows.length > 0;
}

/**
 * What the composition roots register with `domainEventSource` (apps/webhook-dispatch, the embedded launcher):
 * the mapping reads the stream up to each event, and the process's store reads old versions through our upcasters.
 * A payment webhook is not attempted before GET /payments/:paymentId shows the payment as of its event (the merchant
 * who fetches the payment on receipt sees at least what the webhook says).
 */
export const PAYMENT_WEBHOOK_SOURCE = {
  name: 'payments',
  topic: PAYMENT_TOPIC,
  map: paymentWebhook,
  withHistory: true,
  upcasters: PAYMENTS_UPCASTERS,
  isReadable: (event: { readonly origin: { streamId: string; revision: number } }, reads: ReadModels) =>
    paymentProjectedThrough(
      reads,
      event.origin.streamId.slice(PAYMENT_CATEGORY.length + 1),
      event.origin.revision,
    ),
} as const;
