import {
  chargeObject,
  foldCharge,
  KNOWN_CHARGE_EVENTS,
  settlementSummary,
  type SubscriptionChargeObject,
} from './charge';
import { CHARGE_SETTLEMENT_WEBHOOK_TYPE_BY_EVENT, type ChargeEvent } from './charge.events';

interface StoredEvent {
  readonly type: string;
  readonly data: unknown;
}

/**
 * What the subscriptions scope contributes to the charge webhooks (typed here by what is used, so neither scope imports
 * the other; the composition roots pass it in): where a subscription's stream is, and the webhook `data` for a ledger
 * row, the subscription as of that charge plus `data.charge` = the row. Null: nothing to send (a newer release's fact).
 */
export interface SubscriptionChargeWebhookView {
  streamIdOf(subscriptionId: string): string;
  chargeWebhookData(
    subscriptionHistory: readonly StoredEvent[],
    charge: SubscriptionChargeObject,
  ): { readonly object: object; readonly charge: SubscriptionChargeObject } | null;
}

/**
 * Facts after which the row is (again) a charge webhook: its recording, the fiat backfill of a first charge, and a
 * reorg taking its transaction out (charge_failed for the same id, failure_reason charge_lost_to_reorg).
 */
const ROW_WEBHOOK_EVENTS = new Set<string>([
  'ChargeRecorded.v1',
  'ChargeFiatBackfilled.v1',
  'ChargeLostToReorg.v1',
]);

/** The facts of the subscription stream that record a charge (the topic's contract, as the ledger's consumer reads it). */
const SUBSCRIPTION_CHARGE_FACTS = new Set<string>([
  'SubscriptionChargeSucceeded.v1',
  'SubscriptionChargeFailed.v1',
]);

/**
 * Which event of the subscription stream the last ChargeRecorded.v1 of `history` records: the n-th recording of a
 * charge is the n-th charge fact with its id (a reorg's re-inclusion is a new fact and a new recording). Undefined when
 * the stream does not hold it.
 */
export function recordedChargeFactIndex(
  history: readonly StoredEvent[],
  subscriptionHistory: readonly StoredEvent[],
): number | undefined {
  const recordings = history.filter((e) => e.type === 'ChargeRecorded.v1').length;
  const chargeId = foldCharge(history).recorded?.chargeId;
  if (recordings === 0 || chargeId === undefined) return undefined;
  let seen = 0;
  for (const [i, e] of subscriptionHistory.entries()) {
    if (!SUBSCRIPTION_CHARGE_FACTS.has(e.type) || (e.data as { chargeId?: unknown }).chargeId !== chargeId)
      continue;
    seen += 1;
    if (seen === recordings) return i;
  }
  return undefined;
}

/** The subscription stream a charge webhook of this event reads besides the charge stream (none for settlement). */
export function chargeWebhookRelatedStreams(
  event: StoredEvent,
  history: readonly StoredEvent[],
  subscriptions: Pick<SubscriptionChargeWebhookView, 'streamIdOf'>,
): string[] {
  if (!ROW_WEBHOOK_EVENTS.has(event.type)) return [];
  const recorded = foldCharge(history).recorded;
  return recorded ? [subscriptions.streamIdOf(recorded.subscriptionId)] : [];
}

export interface ChargeLedgerWebhook {
  readonly type: string;
  readonly data: { readonly object: object };
  /**
   * For the webhook of a ChargeRecorded.v1: the index, in the subscription stream, of the charge fact it records. The
   * webhook's event id derives from that fact (docs/webhooks.md, "Event ids across the move to the charge ledger"):
   * it is the id the subscriptions source gave the same webhook before the ledger sent charge webhooks, so a consumer
   * group that reads the charge topic from its start records nothing a merchant already got.
   */
  readonly recordsFact?: number;
}

/**
 * The webhook of an event of a `charge-<subc_ id>` stream (SPEC Events > Subscription events, fiat field rule 6):
 * - ChargeRecorded: subscription.charge_succeeded or charge_failed, `data.charge` the ledger's object as of this event
 *   (the row GET /merchants/:merchantId/charges lists: created_at and the fiat fields included);
 * - ChargeFiatBackfilled (the subscribe call's fiat fields onto the first charge the indexer wrote): charge_succeeded
 *   again, same `subscription_charge_id`, now with the fiat fields (Events rule 6: a charge_succeeded can be sent
 *   again for a charge both paths wrote);
 * - the settlement facts: charge_settled, charge_settlement_delayed, charge_settlement_failed with the settlement
 *   summary as `data.object`.
 * `history` is the charge stream through the event; `subscriptionHistory` the whole subscription stream.
 */
export function chargeLedgerWebhook(
  event: StoredEvent,
  history: readonly StoredEvent[],
  subscriptionHistory: readonly StoredEvent[] | undefined,
  subscriptions: SubscriptionChargeWebhookView,
): ChargeLedgerWebhook | null {
  if (!KNOWN_CHARGE_EVENTS.has(event.type) || history.some((e) => !KNOWN_CHARGE_EVENTS.has(e.type)))
    return null;
  const last = history.at(-1);
  if (last?.type !== event.type)
    throw new Error(`history of ${event.type} must end with that event, not ${last?.type ?? 'nothing'}`);
  const state = foldCharge(history);
  const settlementType = CHARGE_SETTLEMENT_WEBHOOK_TYPE_BY_EVENT[event.type as ChargeEvent['type']];
  if (settlementType) return { type: settlementType, data: { object: settlementSummary(state) } };
  if (!ROW_WEBHOOK_EVENTS.has(event.type)) return null;
  const charge = chargeObject(state);
  if (!subscriptionHistory)
    throw new Error(`the charge webhook of ${charge.id} needs its subscription's stream`);
  const data = subscriptions.chargeWebhookData(subscriptionHistory, charge);
  if (!data) return null;
  const type = charge.status === 'succeeded' ? 'subscription.charge_succeeded' : 'subscription.charge_failed';
  const fact =
    event.type === 'ChargeRecorded.v1' ? recordedChargeFactIndex(history, subscriptionHistory) : undefined;
  return fact === undefined ? { type, data } : { type, data, recordsFact: fact };
}

/**
 * The ledger row as of the n-th recording of a charge (1-based; a recording is a `ChargeRecorded.v1`: the first write,
 * or the charge recorded again after a reorg marked it lost): `data.first_charge` of the `subscription_checkout.completed`
 * that rests on that recording, i.e. the row GET /merchants/:merchantId/charges listed right after it (created_at and
 * the fiat fields as written then). Null while the stream holds fewer recordings or a fact this release does not know.
 */
export function chargeRowAsOfRecording(
  history: readonly StoredEvent[],
  n: number,
): SubscriptionChargeObject | null {
  if (history.some((e) => !KNOWN_CHARGE_EVENTS.has(e.type))) return null;
  let seen = 0;
  const at = history.findIndex((e) => e.type === 'ChargeRecorded.v1' && ++seen === n);
  return at < 0 ? null : chargeObject(foldCharge(history.slice(0, at + 1)));
}
