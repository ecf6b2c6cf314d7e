import { Body, Controller, Get, HttpCode, Inject, Param, Post, Query } from '@nestjs/common';
import {
  assertOwnMerchant,
  type AuthenticatedMerchant,
  CurrentMerchant,
  listEnvelope,
  PAGINATION_PARAMETERS,
  parseListQuery,
  QueryParameters,
  requireNoParameters,
} from '@stablepay/http';
import { notFound, validationError } from '@stablepay/util';
import {
  DELIVERY_STATUSES,
  type DeliveryStatus,
  isDeliveryStatus,
  isWebhookEventType,
} from '@stablepay/webhooks-domain';
import { presentAttempt, presentWebhookEvent } from './webhook-event.presenter';
import { WEBHOOK_EVENTS, type WebhookEventsUseCases } from './webhook-events.port';

const LIST_PARAMETERS = [...PAGINATION_PARAMETERS, 'type', 'delivery_status'];

function oneString(query: Record<string, unknown>, name: string): string | undefined {
  const v = query[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'string' || v.length === 0)
    throw validationError(name, `${name} must be given once, as a non-empty string.`);
  return v;
}

/** SPEC Endpoints > Webhook events: the merchant's event log, one event with its attempts, manual redelivery. */
@Controller('merchants/:merchantId/webhook-events')
export class WebhookEventsController {
  constructor(@Inject(WEBHOOK_EVENTS) private readonly log: WebhookEventsUseCases) {}

  /** SPEC Pagination (newest first, limit, starting_after / ending_before) with `type` and `delivery_status` filters. */
  @Get()
  @QueryParameters(LIST_PARAMETERS)
  async list(
    @CurrentMerchant() merchant: AuthenticatedMerchant,
    @Param('merchantId') merchantId: string,
    @Query() query: Record<string, unknown>,
  ) {
    assertOwnMerchant(merchant, merchantId);
    const page = parseListQuery(query);
    const type = oneString(query, 'type');
    if (type !== undefined && !isWebhookEventType(type))
      throw validationError('type', `type must be a webhook event type, got '${type}'.`);
    const status = oneString(query, 'delivery_status');
    let deliveryStatus: DeliveryStatus | undefined;
    if (status !== undefined) {
      if (!isDeliveryStatus(status))
        throw validationError(
          'delivery_status',
          `delivery_status must be one of ${DELIVERY_STATUSES.join(', ')}.`,
        );
      deliveryStatus = status;
    }
    const result = await this.log.list({
      merchantId,
      limit: page.limit,
      ...(page.startingAfter !== undefined ? { startingAfter: page.startingAfter } : {}),
      ...(page.endingBefore !== undefined ? { endingBefore: page.endingBefore } : {}),
      ...(type !== undefined ? { type } : {}),
      ...(deliveryStatus !== undefined ? { deliveryStatus } : {}),
    });
    return listEnvelope(result.rows.map(presentWebhookEvent), result.hasMore);
  }

  @Get(':eventId')
  async get(
    @CurrentMerchant() merchant: AuthenticatedMerchant,
    @Param('merchantId') merchantId: string,
    @Param('eventId') eventId: string,
  ) {
    assertOwnMerchant(merchant, merchantId);
    const found = await this.log.get(merchantId, eventId);
    if (!found) throw notFound('webhook event', eventId);
    return { ...presentWebhookEvent(found.event), attempts: found.attempts.map(presentAttempt) };
  }

  /**
   * Manual redelivery: one more attempt now, signed afresh, beside any retry schedule (which it never resets).
   * Answers 202 with the event; its `next_attempt_at` shows when the attempt is due.
   */
  @Post(':eventId/redeliver')
  @HttpCode(202)
  async redeliver(
    @CurrentMerchant() merchant: AuthenticatedMerchant,
    @Param('merchantId') merchantId: string,
    @Param('eventId') eventId: string,
    @Body() body: unknown,
  ) {
    requireNoParameters(body);
    assertOwnMerchant(merchant, merchantId);
    const event = await this.log.redeliver(merchantId, eventId);
    if (!event) throw notFound('webhook event', eventId);
    return presentWebhookEvent(event);
  }
}
