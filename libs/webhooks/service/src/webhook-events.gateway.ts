import { Inject, Injectable } from '@nestjs/common';
import { CommandClient } from '@stablepay/commands';
import {
  type RedeliverWebhookEventCommand,
  type RedeliverWebhookEventResult,
  type SendTestWebhookCommand,
  WEBHOOK_COMMANDS,
  type WebhookEventsUseCases,
} from '@stablepay/webhooks-api';
import {
  DEFAULT_DELIVERY_POLICY,
  type TestDeliveryResult,
  type WebhookEventListQuery,
  type WebhookEventView,
} from '@stablepay/webhooks-domain';
import { WebhookEventStore } from './webhook-event.store';

/**
 * A test delivery is answered after up to the SPEC response deadline (10 s) spent on the receiver, plus the
 * handler's reads of the endpoint and the secret: the gateway waits that long with room to spare, so a receiver
 * that never answers is reported as the test's `timeout` result, not a 503 from a command timeout equal to it.
 */
export const TEST_DELIVERY_WAIT_MS = DEFAULT_DELIVERY_POLICY.responseDeadlineMs + 5_000;

/**
 * The gateway's side of the webhook use cases: the event log is read here; redelivery and test deliveries are
 * sent to the webhook-dispatch service, which owns the schedule and the egress.
 */
@Injectable()
export class WebhookEventsGateway implements WebhookEventsUseCases {
  constructor(
    @Inject(WebhookEventStore) private readonly store: WebhookEventStore,
    @Inject(CommandClient) private readonly commands: CommandClient,
  ) {}

  list(query: WebhookEventListQuery) {
    return this.store.list(query);
  }

  get(merchantId: string, eventId: string) {
    return this.store.get(merchantId, eventId);
  }

  async redeliver(merchantId: string, eventId: string): Promise<WebhookEventView | null> {
    const command: RedeliverWebhookEventCommand = { merchantId, eventId };
    const { found } = await this.commands.send<RedeliverWebhookEventResult>(
      'webhook-dispatch',
      WEBHOOK_COMMANDS.redeliver,
      command,
    );
    // The owner committed the request before answering: the log already shows it.
    return found ? ((await this.store.get(merchantId, eventId))?.event ?? null) : null;
  }

  sendTest(merchantId: string): Promise<TestDeliveryResult> {
    const command: SendTestWebhookCommand = { merchantId };
    return this.commands.send<TestDeliveryResult>('webhook-dispatch', WEBHOOK_COMMANDS.sendTest, command, {
      minTimeoutMs: TEST_DELIVERY_WAIT_MS,
    });
  }
}
