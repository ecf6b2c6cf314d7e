import 'reflect-metadata';
import { CHARGE_LEDGER_ROW_VIEW, chargeLedgerWebhookSource } from '@stablepay/charge-ledger-service';
import { merchantsConfigFromEnv } from '@stablepay/merchants-service';
import {
  dispatchOptionsFromEnv,
  domainEventSource,
  webhookDispatchService,
  type WebhookSource,
} from '@stablepay/webhook-dispatch-service';
import {
  subscriptionCheckoutWebhookSource,
  SUBSCRIPTION_CHARGE_WEBHOOK,
  SUBSCRIPTION_WEBHOOK_SOURCE,
} from '@stablepay/subscriptions-service';
import { PAYMENT_WEBHOOK_SOURCE } from '@stablepay/payments-service';
import { CUSTOMER_WEBHOOK_SOURCE, PAYOUT_WEBHOOK_SOURCE } from '@stablepay/payouts-service';
import { platformConfigFromEnv, runMain, startService } from '@stablepay/runtime';

/**
 * The webhook source registry of this deployable: each scope's mapping from its domain events to merchant webhook
 * events. Add a scope's source here (and in tools/embedded/embedded.ts) when it starts emitting events.
 */
const sources: WebhookSource[] = [
  domainEventSource(subscriptionCheckoutWebhookSource(CHARGE_LEDGER_ROW_VIEW)),
  domainEventSource(SUBSCRIPTION_WEBHOOK_SOURCE),
  domainEventSource(PAYMENT_WEBHOOK_SOURCE),
  domainEventSource(chargeLedgerWebhookSource(SUBSCRIPTION_CHARGE_WEBHOOK)),
  domainEventSource(CUSTOMER_WEBHOOK_SOURCE),
  domainEventSource(PAYOUT_WEBHOOK_SOURCE),
];

runMain('webhook-dispatch', () =>
  startService(
    platformConfigFromEnv(process.env),
    [
      webhookDispatchService({
        merchants: merchantsConfigFromEnv(process.env, { allowEphemeralKey: false }),
        dispatch: dispatchOptionsFromEnv(process.env),
        sources,
      }),
    ],
    { service: 'webhook-dispatch' },
  ),
);
