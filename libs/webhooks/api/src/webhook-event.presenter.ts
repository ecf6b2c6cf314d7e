import type { TestDeliveryResult, WebhookAttemptView, WebhookEventView } from '@stablepay/webhooks-domain';

const iso = (d: Date | null): string | null => (d === null ? null : new Date(d).toISOString());

/**
 * A row of GET /merchants/:merchantId/webhook-events: the event (`id`, `type`, `created_at`, `data`) plus its
 * delivery state. Every field is always present, null when unset.
 */
export function presentWebhookEvent(event: WebhookEventView) {
  return {
    id: event.id,
    object: 'webhook_event' as const,
    type: event.type,
    created_at: new Date(event.createdAt).toISOString(),
    data: event.data,
    delivery_status: event.deliveryStatus,
    attempt_count: event.attemptCount,
    last_attempt_at: iso(event.lastAttemptAt),
    last_response_status: event.lastResponseStatus,
    last_error: event.lastError,
    next_attempt_at: iso(event.nextAttemptAt),
  };
}

export function presentAttempt(attempt: WebhookAttemptView) {
  return {
    object: 'webhook_delivery_attempt' as const,
    attempt_number: attempt.attemptNumber,
    trigger: attempt.trigger,
    attempted_at: new Date(attempt.attemptedAt).toISOString(),
    url: attempt.url,
    response_status: attempt.responseStatus,
    error: attempt.error,
    duration_ms: attempt.durationMs,
    response_excerpt: attempt.responseExcerpt,
  };
}

export function presentTestDelivery(result: TestDeliveryResult) {
  return {
    object: 'webhook_test_delivery' as const,
    event_id: result.eventId,
    type: result.type,
    url: result.url,
    delivered: result.delivered,
    response_status: result.responseStatus,
    error: result.error,
    duration_ms: result.durationMs,
    signed_with_previous_secret: result.signedWithPreviousSecret,
  };
}
