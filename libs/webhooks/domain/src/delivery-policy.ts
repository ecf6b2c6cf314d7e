import { createHash } from 'node:crypto';
import { DAY, MINUTE, SECOND } from '@stablepay/util';

/**
 * SPEC Delivery, retries, rotation (rules 1 and 2) and Limits, as numbers:
 * - a delivery succeeds only on a 2xx within 10 seconds (`responseDeadlineMs`);
 * - attempt 1, then up to 5 retries (6 attempts in total) about 5, 15, 30, 60 and 60 minutes apart;
 * - abandoned after 6 attempts or once the event is older than 7 days.
 */
export interface DeliveryPolicy {
  readonly maxAttempts: number;
  /** Gap after the n-th failed scheduled attempt is `retryDelaysMs[n - 1]` (the last one repeats). */
  readonly retryDelaysMs: readonly number[];
  readonly maxEventAgeMs: number;
  readonly responseDeadlineMs: number;
  /**
   * "About": each gap is stretched by up to this fraction (0.1 = +10%), deterministically per event and attempt,
   * so a merchant's backlog after an outage does not come back as one burst. 0 gives exact gaps.
   */
  readonly jitterRatio: number;
}

export const WEBHOOK_MAX_ATTEMPTS = 6;
export const WEBHOOK_RETRY_DELAYS_MS: readonly number[] = [
  5 * MINUTE,
  15 * MINUTE,
  30 * MINUTE,
  60 * MINUTE,
  60 * MINUTE,
];
export const WEBHOOK_MAX_EVENT_AGE_MS = 7 * DAY;
export const WEBHOOK_RESPONSE_DEADLINE_MS = 10 * SECOND;

export const DEFAULT_DELIVERY_POLICY: DeliveryPolicy = {
  maxAttempts: WEBHOOK_MAX_ATTEMPTS,
  retryDelaysMs: WEBHOOK_RETRY_DELAYS_MS,
  maxEventAgeMs: WEBHOOK_MAX_EVENT_AGE_MS,
  responseDeadlineMs: WEBHOOK_RESPONSE_DEADLINE_MS,
  jitterRatio: 0.1,
};

/** A deterministic fraction in [0, 1) for one event and attempt: two dispatchers compute the same gap. */
function jitterFraction(eventId: string, failedAttempts: number): number {
  const digest = createHash('sha256').update(`${eventId}\u0000${failedAttempts}`).digest();
  return digest.readUInt32BE(0) / 0x1_0000_0000;
}

/** SPEC rule 2: the wait after the `failedAttempts`-th scheduled attempt failed (1-based). */
export function retryDelayMs(policy: DeliveryPolicy, failedAttempts: number, eventId: string): number {
  if (!Number.isInteger(failedAttempts) || failedAttempts < 1)
    throw new RangeError('failedAttempts must be a positive integer');
  const delays = policy.retryDelaysMs;
  const base = delays[Math.min(failedAttempts, delays.length) - 1];
  if (base === undefined) throw new RangeError('the delivery policy has no retry delays');
  return Math.round(base * (1 + policy.jitterRatio * jitterFraction(eventId, failedAttempts)));
}

/** SPEC rule 2: an event older than 7 days is not attempted on schedule any more. */
export function isPastDeliveryWindow(policy: DeliveryPolicy, createdAt: Date, at: Date): boolean {
  return at.getTime() - createdAt.getTime() >= policy.maxEventAgeMs;
}
