import type {
  TestDeliveryResult,
  WebhookAttemptView,
  WebhookEventListQuery,
  WebhookEventView,
} from '@stablepay/webhooks-domain';

/**
 * The inbound port of the webhooks scope that the gateway's controllers call. Implemented in
 * @stablepay/webhook-dispatch-service by WebhookEventsGateway: reads from the event log in the gateway,
 * redelivery and test deliveries sent to the webhook-dispatch service (their owner).
 */
export interface WebhookEventsUseCases {
  list(
    query: WebhookEventListQuery,
  ): Promise<{ readonly rows: readonly WebhookEventView[]; readonly hasMore: boolean }>;
  get(
    merchantId: string,
    eventId: string,
  ): Promise<{ readonly event: WebhookEventView; readonly attempts: readonly WebhookAttemptView[] } | null>;
  /** Queues one manual attempt now; null when the merchant has no such event. */
  redeliver(merchantId: string, eventId: string): Promise<WebhookEventView | null>;
  /** Sends the placeholder event to the merchant's webhook URL now; throws a DomainError when none is set. */
  sendTest(merchantId: string): Promise<TestDeliveryResult>;
}

export const WEBHOOK_EVENTS = Symbol('WEBHOOK_EVENTS');
