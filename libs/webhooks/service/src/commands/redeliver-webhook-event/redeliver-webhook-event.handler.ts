import { Controller, Inject } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import { CLOCK } from '@stablepay/aggregate';
import { CommandHandler } from '@stablepay/commands';
import type { Clock } from '@stablepay/util';
import {
  type RedeliverWebhookEventCommand,
  type RedeliverWebhookEventResult,
  WEBHOOK_COMMANDS,
} from '@stablepay/webhooks-api';
import { WebhookDispatcher } from '../../webhook-dispatcher';
import { WebhookEventStore } from '../../webhook-event.store';

/**
 * Use case: POST /merchants/:merchantId/webhook-events/:eventId/redeliver, in the webhook-dispatch service (it
 * owns the delivery schedule): one manual attempt now, beside any retry schedule (which it never resets).
 */
@Controller()
export class RedeliverWebhookEventHandler {
  constructor(
    @Inject(WebhookEventStore) private readonly store: WebhookEventStore,
    @Inject(WebhookDispatcher) private readonly dispatcher: WebhookDispatcher,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  @CommandHandler(WEBHOOK_COMMANDS.redeliver)
  async handle(@Payload() command: RedeliverWebhookEventCommand): Promise<RedeliverWebhookEventResult> {
    const event = await this.store.requestRedelivery(command.merchantId, command.eventId, this.clock.now());
    // The attempt is due now: the dispatcher of this process need not wait for its next poll.
    if (event) this.dispatcher.wake();
    return { found: event !== null };
  }
}
