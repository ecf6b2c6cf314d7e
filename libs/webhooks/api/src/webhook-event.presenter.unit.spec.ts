import type { WebhookEventView } from '@stablepay/webhooks-domain';
import { presentAttempt, presentTestDelivery, presentWebhookEvent } from './webhook-event.presenter';

const at = new Date('2026-05-01T10:00:00.000Z');
const event: WebhookEventView = {
  id: 'evt_01jz8k3v2m6r4t9w0c5x7y1b2d',
  type: 'payment.settled',
  createdAt: at,
  data: { object: { id: 'pay_1', amount: '1000000' } },
  deliveryStatus: 'failed',
  attemptCount: 1,
  lastAttemptAt: at,
  lastResponseStatus: 500,
  lastError: 'http_status',
  nextAttemptAt: new Date(at.getTime() + 5 * 60_000),
};

describe('webhook event presentation (GET /merchants/:merchantId/webhook-events rows)', () => {
  it('shows the event and every delivery field, timestamps as ISO 8601', () => {
    expect(presentWebhookEvent(event)).toEqual({
      id: event.id,
      object: 'webhook_event',
      type: 'payment.settled',
      created_at: '2026-05-01T10:00:00.000Z',
      data: { object: { id: 'pay_1', amount: '1000000' } },
      delivery_status: 'failed',
      attempt_count: 1,
      last_attempt_at: '2026-05-01T10:00:00.000Z',
      last_response_status: 500,
      last_error: 'http_status',
      next_attempt_at: '2026-05-01T10:05:00.000Z',
    });
  });

  it('keeps unset fields as null rather than leaving them out', () => {
    const fresh = presentWebhookEvent({
      ...event,
      deliveryStatus: 'pending',
      attemptCount: 0,
      lastAttemptAt: null,
      lastResponseStatus: null,
      lastError: null,
    });
    expect(fresh).toMatchObject({ last_attempt_at: null, last_response_status: null, last_error: null });
  });

  it('presents attempts and test deliveries in snake_case', () => {
    expect(
      presentAttempt({
        attemptNumber: 2,
        trigger: 'manual',
        attemptedAt: at,
        url: 'https://h.example/x',
        responseStatus: null,
        error: 'timeout',
        durationMs: 10_000,
        responseExcerpt: null,
      }),
    ).toEqual({
      object: 'webhook_delivery_attempt',
      attempt_number: 2,
      trigger: 'manual',
      attempted_at: '2026-05-01T10:00:00.000Z',
      url: 'https://h.example/x',
      response_status: null,
      error: 'timeout',
      duration_ms: 10_000,
      response_excerpt: null,
    });
    expect(
      presentTestDelivery({
        eventId: 'evt_t',
        type: 'subscription.charge_succeeded',
        url: 'https://h.example/x',
        delivered: true,
        responseStatus: 204,
        error: null,
        durationMs: 12,
        signedWithPreviousSecret: false,
      }),
    ).toMatchObject({
      object: 'webhook_test_delivery',
      delivered: true,
      response_status: 204,
      signed_with_previous_secret: false,
    });
  });
});
