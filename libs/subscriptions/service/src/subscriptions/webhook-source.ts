import { topicForCategory } from '@stablepay/event-bus';
import {
  SUBSCRIPTION_CATEGORY,
  type SubscriptionEvent,
  subscriptionStreamWebhook,
} from '@stablepay/subscriptions-domain';

interface StoredEvent {
  readonly type: string;
  readonly data: unknown;
}

const KNOWN = new Set<string>([
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
]);

/**
 * What the composition roots register with `domainEventSource` (apps/webhook-dispatch, the embedded launcher): every
 * `subscription.*` webhook of SPEC Events rules 1-6 except the settlement ones (the ledger's source), each with the
 * subscription as of its event (the stream up to it). The charge webhooks' `isReadable` (the ledger row listed
 * first, SPEC fiat rule 6) is the composition root's to add (docs/architecture.md, Charge ledger).
 */
export const SUBSCRIPTION_WEBHOOK_SOURCE = {
  name: 'subscriptions',
  topic: topicForCategory(SUBSCRIPTION_CATEGORY),
  map: (event: StoredEvent, history: readonly StoredEvent[]) => {
    // A type this release does not know (a later version) has no webhook here.
    if (!KNOWN.has(event.type) || history.some((e) => !KNOWN.has(e.type))) return null;
    return subscriptionStreamWebhook(event as SubscriptionEvent, history as readonly SubscriptionEvent[]);
  },
  withHistory: true,
} as const;
