import type { AttemptTrigger, DeliveryErrorCode, DeliveryStatus } from './delivery';
import type { WebhookEventData } from './envelope';

/** What the webhook event log and a test delivery look like to the gateway's routes (libs/webhooks/api). */

/** One row of GET /merchants/:merchantId/webhook-events: the event plus its delivery state. */
export interface WebhookEventView {
  readonly id: string;
  readonly type: string;
  readonly createdAt: Date;
  readonly data: WebhookEventData;
  readonly deliveryStatus: DeliveryStatus;
  readonly attemptCount: number;
  readonly lastAttemptAt: Date | null;
  readonly lastResponseStatus: number | null;
  readonly lastError: DeliveryErrorCode | null;
  /** The next attempt, scheduled or manual; null when none is planned. */
  readonly nextAttemptAt: Date | null;
}

export interface WebhookAttemptView {
  readonly attemptNumber: number;
  readonly trigger: AttemptTrigger;
  readonly attemptedAt: Date;
  readonly url: string | null;
  readonly responseStatus: number | null;
  readonly error: DeliveryErrorCode | null;
  readonly durationMs: number | null;
  /** The first bytes of the receiver's answer (never the whole body). */
  readonly responseExcerpt: string | null;
}

export interface WebhookEventListQuery {
  readonly merchantId: string;
  readonly limit: number;
  readonly startingAfter?: string;
  readonly endingBefore?: string;
  readonly type?: string;
  readonly deliveryStatus?: DeliveryStatus;
}

/** What POST /settings/webhook/test reports about the receiver. */
export interface TestDeliveryResult {
  readonly eventId: string;
  readonly type: string;
  readonly url: string;
  readonly delivered: boolean;
  readonly responseStatus: number | null;
  readonly error: DeliveryErrorCode | null;
  readonly durationMs: number | null;
  readonly signedWithPreviousSecret: boolean;
}
