import { Body, Controller, HttpCode, Inject, Post } from '@nestjs/common';
import { type AuthenticatedMerchant, CurrentMerchant, requireNoParameters } from '@stablepay/http';
import { presentTestDelivery } from './webhook-event.presenter';
import { WEBHOOK_EVENTS, type WebhookEventsUseCases } from './webhook-events.port';

/**
 * SPEC Settings: POST /settings/webhook/test sends a test delivery (a `subscription.charge_succeeded` with
 * placeholder data and `livemode: false`, signed with the real secret) and reports the receiver's answer. The
 * request succeeds (200) whatever the receiver said; `delivered` and `response_status` tell.
 */
@Controller('settings/webhook/test')
export class WebhookTestController {
  constructor(@Inject(WEBHOOK_EVENTS) private readonly useCases: WebhookEventsUseCases) {}

  @Post()
  @HttpCode(200)
  async send(@CurrentMerchant() merchant: AuthenticatedMerchant, @Body() body: unknown) {
    requireNoParameters(body);
    return presentTestDelivery(await this.useCases.sendTest(merchant.merchantId));
  }
}
