import { CHARGE_CATEGORY, chargeLedgerWebhook, chargeWebhookRelatedStreams } from '@stablepay/ledger-domain';
import type { SubscriptionChargeWebhookView } from '@stablepay/ledger-domain';
import { CHARGE_TOPIC } from '../charges/charge-ledger.projection';

interface StoredEvent {
  readonly type: string;
  readonly data: unknown;
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
      related: ReadonlyMap<string, readonly StoredEvent[]>,
    ) => {
      const [streamId] = chargeWebhookRelatedStreams(event, history, subscriptions);
      return chargeLedgerWebhook(
        event,
        history,
        streamId === undefined ? undefined : related.get(streamId),
        subscriptions,
      );
    },
    isReadable: (event: { readonly origin: { streamId: string; revision: number } }, reads: ReadModels) =>
      chargeListedThrough(
        reads,
        event.origin.streamId.slice(CHARGE_CATEGORY.length + 1),
        event.origin.revision,
      ),
  };
}
