import { Controller, Inject } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import { CLOCK } from '@stablepay/aggregate';
import { CommandHandler } from '@stablepay/commands';
import { type Clock, conflict } from '@stablepay/util';
import {
  type RedeliverWebhookEventCommand,
  type RedeliverWebhookEventResult,
  WEBHOOK_COMMANDS,
} from '@stablepay/webhooks-api';
import { WebhookDispatcher } from '../../webhook-dispatcher';
import { WebhookEventStore } from '../../webhook-event.store';

/**
 * Use case: POST /merchants/:merchantId/webhook-events/:eventId/redeliver, in the webhook-dispatch service (it
 * owns the delivery schedule): one manual attempt now, beside any retry schedule (which it never resets); at most
 * one pending or in flight per event (409 `webhook_redelivery_in_progress` past it).
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
    const request = await this.store.requestRedelivery(command.merchantId, command.eventId, this.clock.now());
    if (request.kind === 'not_found') return { found: false };
    // A 409, as for test deliveries: a burst of requests must not become a burst of attempts at the receiver, and
    // a 202 answered without queueing anything would tell the merchant an attempt was made for this request.
    if (request.kind === 'in_progress')
      throw conflict(
        'webhook_redelivery_in_progress',
        'A manual redelivery of this event is already pending or in flight; its attempt will show in the event. ' +
          'Retry once it has finished.',
      );
    // The attempt is due now: the dispatcher of this process need not wait for its next poll.
    this.dispatcher.wake();
    return { found: true };
  }
}
