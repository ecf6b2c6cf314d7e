import { Controller, Inject } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import { CLOCK } from '@stablepay/aggregate';
import { CommandHandler } from '@stablepay/commands';
import { type Clock, conflict, DomainError, invalidRequest, newId, notFound } from '@stablepay/util';
import { type SendTestWebhookCommand, WEBHOOK_COMMANDS } from '@stablepay/webhooks-api';
import {
  failureCode,
  isDeliverySuccess,
  type TestDeliveryResult,
  testDeliveryEvent,
} from '@stablepay/webhooks-domain';
import { DISPATCH_OPTIONS, type DispatchOptions } from '../../dispatch.config';
import { WebhookHttpSender } from '../../http/webhook-http-sender';
import { MerchantEndpoints } from '../../merchant-endpoints';
import { prepareDelivery } from '../../webhook-deliverer';

/**
 * Use case: POST /settings/webhook/test, in the webhook-dispatch service (it owns the egress and the secrets).
 * SPEC Events > test delivery: a `subscription.charge_succeeded` with placeholder data and `livemode: false`,
 * signed with the merchant's real secret(s) exactly like a live delivery, sent once, now, through the same egress
 * policy and deadline; the receiver's answer is reported. Not recorded in the event log.
 */
@Controller()
export class SendTestWebhookHandler {
  /** Test deliveries running now, per merchant (bounded by `testConcurrencyPerMerchant`). */
  private readonly running = new Map<string, number>();

  constructor(
    @Inject(MerchantEndpoints) private readonly endpoints: MerchantEndpoints,
    @Inject(WebhookHttpSender) private readonly sender: WebhookHttpSender,
    @Inject(DISPATCH_OPTIONS) private readonly options: DispatchOptions,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  @CommandHandler(WEBHOOK_COMMANDS.sendTest)
  async handle(@Payload() command: SendTestWebhookCommand): Promise<TestDeliveryResult> {
    const merchantId = command.merchantId;
    const running = this.running.get(merchantId) ?? 0;
    if (running >= this.options.testConcurrencyPerMerchant)
      throw conflict(
        'webhook_test_in_progress',
        `${running} test deliveries of this merchant are still waiting for the receiver; retry when they finish.`,
      );
    this.running.set(merchantId, running + 1);
    try {
      return await this.send(merchantId);
    } finally {
      const left = (this.running.get(merchantId) ?? 1) - 1;
      if (left <= 0) this.running.delete(merchantId);
      else this.running.set(merchantId, left);
    }
  }

  private async send(merchantId: string): Promise<TestDeliveryResult> {
    const endpoint = (await this.endpoints.forMerchants([merchantId])).get(merchantId);
    if (!endpoint) throw notFound('merchant', merchantId);
    const url = endpoint.url;
    if (url === null)
      throw invalidRequest(
        'No webhook URL is configured: set webhook_url with PATCH /settings first.',
        'webhook_url_missing',
        'webhook_url',
      );
    const secrets = await this.endpoints.activeSecrets(endpoint);
    if (!secrets) {
      throw new DomainError({
        type: 'api_error',
        status: 503,
        code: 'webhook_secret_unavailable',
        message: 'The webhook secret is not readable yet; retry shortly.',
      });
    }
    const now = this.clock.now();
    const event = testDeliveryEvent(newId('evt', now), now);
    const prepared = prepareDelivery(event, secrets, now, { testDelivery: true });
    const outcome = await this.sender.send({
      url,
      body: prepared.body,
      headers: prepared.headers,
      timeoutMs: this.options.policy.responseDeadlineMs,
    });
    return {
      eventId: event.id,
      type: event.type,
      url,
      delivered: isDeliverySuccess(outcome),
      responseStatus: outcome.kind === 'response' ? outcome.status : null,
      error: failureCode(outcome),
      durationMs: 'durationMs' in outcome ? Math.round(outcome.durationMs) : null,
      signedWithPreviousSecret: secrets.previous !== undefined,
    };
  }
}
