import { topicForCategory } from '@stablepay/event-bus';
import {
  chargeWebhookDataAsOf,
  SUBSCRIPTION_CATEGORY,
  SUBSCRIPTION_STORED_EVENT_TYPES,
  type SubscriptionEvent,
  subscriptionStreamId,
  subscriptionStreamWebhook,
  type WebhookCharge,
} from '@stablepay/subscriptions-domain';

interface StoredEvent {
  readonly type: string;
  readonly data: unknown;
}

const KNOWN = new Set<string>(SUBSCRIPTION_STORED_EVENT_TYPES);

/**
 * What the composition roots register with `domainEventSource` (apps/webhook-dispatch, the embedded launcher): every
 * `subscription.*` webhook of SPEC Events rules 1-6 except the charge and settlement ones (the charge ledger's
 * source, whose `data.charge` is the ledger's row), each with the subscription as of its event (the stream up to it).
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

/**
 * The subscription side of the charge ledger's charge webhooks (composition roots pass it to the ledger's source,
 * docs/architecture.md "Charge ledger"): which stream holds a subscription, and `data` for a ledger row, with the
 * subscription as of that charge's fact. Null when the stream holds a fact this release does not know.
 */
export const SUBSCRIPTION_CHARGE_WEBHOOK = {
  streamIdOf: subscriptionStreamId,
  chargeWebhookData: <C extends WebhookCharge>(history: readonly StoredEvent[], charge: C) =>
    history.some((e) => !KNOWN.has(e.type))
      ? null
      : chargeWebhookDataAsOf(history as readonly SubscriptionEvent[], charge),
};
