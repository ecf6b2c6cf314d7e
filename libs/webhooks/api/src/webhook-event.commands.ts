import { defineCommands } from '@stablepay/commands';

/** The commands the webhook-dispatch service owns (it holds the delivery schedule and the egress). */
export const WEBHOOK_COMMANDS = defineCommands('webhook-dispatch', {
  redeliver: 'webhook-dispatch.webhook-event.redeliver',
  sendTest: 'webhook-dispatch.webhook-endpoint.send-test',
});

export interface RedeliverWebhookEventCommand {
  readonly merchantId: string;
  readonly eventId: string;
}

/** `found: false` when the merchant has no such event (the gateway answers 404). */
export interface RedeliverWebhookEventResult {
  readonly found: boolean;
}

export interface SendTestWebhookCommand {
  readonly merchantId: string;
}
