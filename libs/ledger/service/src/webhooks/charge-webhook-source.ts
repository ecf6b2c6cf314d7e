import {
  CHARGE_CATEGORY,
  chargeLedgerWebhook,
  chargeRowAsOfRecording,
  chargeStreamId,
  chargeWebhookRelatedStreams,
} from '@stablepay/ledger-domain';
import type { SubscriptionChargeWebhookView } from '@stablepay/ledger-domain';
import { CHARGE_TOPIC } from '../charges/charge-ledger.projection';

interface StoredEvent {
  readonly type: string;
  readonly data: unknown;
}

/** What the recorder reads from the event store for a related stream (typed by what is used). */
interface RelatedEvent extends StoredEvent {
  readonly id?: string;
  readonly metadata?: { readonly occurredAt?: unknown };
  readonly recordedAt?: Date | string;
}

/** The id and time a webhook source gives a webhook about `event` (webhookEventDraft: occurredAt, else recordedAt). */
function idFrom(event: RelatedEvent | undefined): { id: string; occurredAt: string } | undefined {
  if (event?.id === undefined) return undefined;
  const occurredAt = event.metadata?.occurredAt;
  if (typeof occurredAt === 'string') return { id: event.id, occurredAt };
  if (event.recordedAt === undefined) return undefined;
  return { id: event.id, occurredAt: new Date(event.recordedAt).toISOString() };
}

/** The service database as a webhook source's `isReadable` gets it (typed by what is used). */
interface ReadModels {
  query(sql: string, parameters?: unknown[]): Promise<unknown[]>;
}

/**
 * Whether GET /merchants/:merchantId/charges lists the charge as of `revision` of its stream (or later): SPEC fiat
 * field rule 6, the charge webhooks are not attempted before that.
 */
export async function chargeListedThrough(
  reads: ReadModels,
  chargeId: string,
  revision: number,
): Promise<boolean> {
  const rows = await reads.query('SELECT 1 FROM subscription_charges WHERE id = $1 AND revision >= $2', [
    chargeId,
    revision,
  ]);
  return rows.length > 0;
}

/**
 * The charge ledger's webhook source (composition roots register `domainEventSource(chargeLedgerWebhookSource(
 * SUBSCRIPTION_CHARGE_WEBHOOK))`): subscription.charge_succeeded / charge_failed with the ledger's row as
 * `data.charge` and the subscription (read from its stream, the view the subscriptions scope passes) as `data.object`,
 * and the settlement webhooks with the settlement summary (chargeLedgerWebhook). An event is not attempted before the
 * ledger's read model reflects it: the row is listed (rule 6) and shows what the webhook says.
 */
export function chargeLedgerWebhookSource(subscriptions: SubscriptionChargeWebhookView) {
  return {
    name: 'charge-ledger',
    topic: CHARGE_TOPIC,
    withHistory: true,
    relatedStreams: (event: StoredEvent, history: readonly StoredEvent[]) =>
      chargeWebhookRelatedStreams(event, history, subscriptions),
    map: (
      event: StoredEvent,
      history: readonly StoredEvent[],
      related: ReadonlyMap<string, readonly RelatedEvent[]>,
    ) => {
      const [streamId] = chargeWebhookRelatedStreams(event, history, subscriptions);
      const subscriptionHistory = streamId === undefined ? undefined : related.get(streamId);
      const hook = chargeLedgerWebhook(event, history, subscriptionHistory, subscriptions);
      if (!hook) return null;
      // A recorded charge's webhook is about the subscription's charge fact: its id is the one the subscriptions
      // source gave that fact's webhook before the ledger sent them (docs/webhooks.md).
      const from =
        hook.recordsFact === undefined ? undefined : idFrom(subscriptionHistory?.[hook.recordsFact]);
      return from ? { type: hook.type, data: hook.data, idFrom: from } : { type: hook.type, data: hook.data };
    },
    isReadable: (event: { readonly origin: { streamId: string; revision: number } }, reads: ReadModels) =>
      chargeListedThrough(
        reads,
        event.origin.streamId.slice(CHARGE_CATEGORY.length + 1),
        event.origin.revision,
      ),
  };
}

/**
 * Whether GET /merchants/:merchantId/charges lists the charge as succeeded with that transaction: a
 * `subscription_checkout.completed` whose `data.first_charge` is that row is not attempted before (the same rule as the
 * charge webhooks, SPEC fiat field rule 6).
 */
export async function chargeListedSucceeded(
  reads: ReadModels,
  row: { readonly id: string; readonly tx_hash: string | null },
): Promise<boolean> {
  const rows = await reads.query(
    `SELECT 1 FROM subscription_charges WHERE id = $1 AND status = 'succeeded' AND lower(tx_hash) = lower($2)`,
    [row.id, row.tx_hash],
  );
  return rows.length > 0;
}

/**
 * What the charge ledger contributes to the subscription checkout webhooks (composition roots pass it to
 * `subscriptionCheckoutWebhookSource`, so neither scope imports the other): where a charge's stream is, its row as of
 * the n-th recording, and whether the list shows it.
 */
export const CHARGE_LEDGER_ROW_VIEW = {
  streamIdOf: chargeStreamId,
  rowAsOfRecording: chargeRowAsOfRecording,
  listed: chargeListedSucceeded,
};
