import {
  CUSTOMER_CATEGORY,
  CUSTOMER_WEBHOOK_BY_EVENT,
  PAYOUT_CATEGORY,
  PAYOUT_WEBHOOK_BY_EVENT,
} from '@stablepay/payouts-domain';
import { CUSTOMER_TOPIC, objectAsOf, PAYOUT_TOPIC } from './read-model/objects';

interface StoredEvent {
  readonly type: string;
  readonly data: unknown;
}

/** The service database as a webhook source's `isReadable` gets it (typed by what is used). */
interface ReadModels {
  query(sql: string, parameters?: unknown[]): Promise<unknown[]>;
}

function source(
  category: string,
  topic: string,
  table: string,
  byEvent: Readonly<Record<string, string | null>>,
) {
  return {
    name: `payouts.${category}`,
    topic,
    withHistory: true,
    /** SPEC Payout events: `data.object` is the customer or payout as of the event (the same object GET shows then). */
    map: (event: StoredEvent, history: readonly StoredEvent[]) => {
      const type = byEvent[event.type];
      if (!type) return null;
      return { type, data: { object: objectAsOf(category, history) } };
    },
    /** Not attempted before GET shows the object as of the event (read-your-writes for the merchant who fetches it). */
    isReadable: async (
      event: { readonly origin: { streamId: string; revision: number } },
      reads: ReadModels,
    ): Promise<boolean> => {
      const rows = await reads.query(`SELECT 1 FROM ${table} WHERE id = $1 AND revision >= $2`, [
        event.origin.streamId.slice(category.length + 1),
        event.origin.revision,
      ]);
      return rows.length > 0;
    },
  } as const;
}

/**
 * What the composition roots register with `domainEventSource` (apps/webhook-dispatch, the embedded launcher):
 * customer.activated / action_required / kyc_failed and payout.deposit_detected / forwarded / completed / failed /
 * refunded (SPEC Payout events (beta)).
 */
export const CUSTOMER_WEBHOOK_SOURCE = source(
  CUSTOMER_CATEGORY,
  CUSTOMER_TOPIC,
  'payout_customers',
  CUSTOMER_WEBHOOK_BY_EVENT,
);
export const PAYOUT_WEBHOOK_SOURCE = source(
  PAYOUT_CATEGORY,
  PAYOUT_TOPIC,
  'payouts',
  PAYOUT_WEBHOOK_BY_EVENT,
);
