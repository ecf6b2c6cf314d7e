import { type DeliveryPolicy, isPastDeliveryWindow, retryDelayMs } from './delivery-policy';

/**
 * The delivery state of one webhook event, as listed to the merchant:
 * - `pending`: recorded and selected, no attempt finished yet;
 * - `failed`: the last attempt failed and a scheduled retry is ahead (`next_attempt_at`);
 * - `delivered`: an attempt got a 2xx in time (SPEC rule 1); no further scheduled attempt;
 * - `abandoned`: 6 scheduled attempts failed or the event became older than 7 days (SPEC rule 2);
 * - `not_selected`: recorded but not sent, because the merchant did not select its type (SPEC rule 5) or had no
 *   webhook URL when the event was recorded or first dispatched (moments after it happened). A manual redelivery still sends it.
 */
export const DELIVERY_STATUSES = ['pending', 'delivered', 'failed', 'abandoned', 'not_selected'] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

export function isDeliveryStatus(value: string): value is DeliveryStatus {
  return (DELIVERY_STATUSES as readonly string[]).includes(value);
}

/** Why an attempt failed, or why an event is not sent; stored as `last_error` and shown to the merchant. */
export type DeliveryErrorCode =
  | 'http_status'
  | 'redirect_not_followed'
  | 'timeout'
  | 'network_error'
  | 'tls_error'
  | 'dns_error'
  | 'blocked_address'
  | 'invalid_url'
  | 'no_webhook_url'
  | 'no_webhook_secret'
  /** The service's encryption keys no longer open the merchant's secret (an operator's key change). */
  | 'webhook_secret_unreadable'
  | 'event_type_not_selected'
  | 'expired';

/** What one HTTP attempt produced, as the sender observed it. */
export type AttemptOutcome =
  | {
      readonly kind: 'response';
      readonly status: number;
      readonly durationMs: number;
      readonly bodyExcerpt: string;
    }
  | { readonly kind: 'timeout'; readonly durationMs: number }
  | {
      readonly kind: 'network_error';
      readonly code: 'network_error' | 'tls_error' | 'dns_error';
      readonly detail: string;
      readonly durationMs: number;
    }
  /** Refused before any byte left: SSRF policy (`blocked_address`, `invalid_url`) or nothing to send to. */
  | {
      readonly kind: 'refused';
      readonly code:
        | 'blocked_address'
        | 'invalid_url'
        | 'no_webhook_url'
        | 'no_webhook_secret'
        | 'webhook_secret_unreadable';
      readonly detail: string;
    };

/** SPEC rule 1: success is a 2xx status; a 3xx is a failure (redirects are not followed). */
export function isDeliverySuccess(outcome: AttemptOutcome): boolean {
  return outcome.kind === 'response' && outcome.status >= 200 && outcome.status <= 299;
}

export function failureCode(outcome: AttemptOutcome): DeliveryErrorCode | null {
  switch (outcome.kind) {
    case 'response':
      if (isDeliverySuccess(outcome)) return null;
      return outcome.status >= 300 && outcome.status <= 399 ? 'redirect_not_followed' : 'http_status';
    case 'timeout':
      return 'timeout';
    case 'network_error':
    case 'refused':
      return outcome.code;
  }
}

export interface DeliveryState {
  readonly status: DeliveryStatus;
  /** Every attempt made, scheduled and manual. */
  readonly attemptCount: number;
  /** Scheduled attempts used out of the policy's 6. */
  readonly scheduledAttempts: number;
  /** When the next scheduled attempt is due; null once delivered, abandoned or never selected. */
  readonly nextAttemptAt: Date | null;
  /** A merchant's manual redelivery request waiting to run. */
  readonly redeliveryRequestedAt: Date | null;
  readonly lastAttemptAt: Date | null;
  readonly lastResponseStatus: number | null;
  readonly lastError: DeliveryErrorCode | null;
  readonly deliveredAt: Date | null;
}

export type AttemptTrigger = 'scheduled' | 'manual';

/** A recorded event: due at once. Whether it is sent at all is decided by `applySelection`, when recorded and at first dispatch. */
export function recordedDelivery(now: Date): DeliveryState {
  return {
    status: 'pending',
    attemptCount: 0,
    scheduledAttempts: 0,
    nextAttemptAt: now,
    redeliveryRequestedAt: null,
    lastAttemptAt: null,
    lastResponseStatus: null,
    lastError: null,
    deliveredAt: null,
  };
}

/**
 * SPEC Delivery rule 5 (events to receive are selected), applied with the merchant's settings as they are when the
 * event is recorded and again when it is first dispatched (moments later): an unselected type, or no webhook URL at all, makes it
 * `not_selected` - recorded, listed, never sent on schedule. Only a pending event that was never attempted is
 * affected; once attempts began, the schedule runs its course.
 */
export function applySelection(
  state: DeliveryState,
  selection: { readonly hasEndpoint: boolean; readonly typeSelected: boolean },
): DeliveryState {
  if (state.status !== 'pending' || state.attemptCount > 0 || state.nextAttemptAt === null) return state;
  if (!selection.hasEndpoint)
    return { ...state, status: 'not_selected', nextAttemptAt: null, lastError: 'no_webhook_url' };
  if (!selection.typeSelected)
    return { ...state, status: 'not_selected', nextAttemptAt: null, lastError: 'event_type_not_selected' };
  return state;
}

/** Which attempt is due at `now`, if any. A scheduled attempt that is due also serves a waiting manual request. */
export function dueTrigger(state: DeliveryState, now: Date): AttemptTrigger | null {
  if (state.nextAttemptAt !== null && state.nextAttemptAt.getTime() <= now.getTime()) return 'scheduled';
  if (state.redeliveryRequestedAt !== null && state.redeliveryRequestedAt.getTime() <= now.getTime())
    return 'manual';
  return null;
}

/** SPEC rule 2: a scheduled attempt that comes due after the 7-day window is not made; the event is abandoned. */
export function abandonIfPastWindow(
  state: DeliveryState,
  createdAt: Date,
  now: Date,
  policy: DeliveryPolicy,
): DeliveryState | null {
  if (dueTrigger(state, now) !== 'scheduled' || !isPastDeliveryWindow(policy, createdAt, now)) return null;
  // A waiting manual request survives: the merchant asked for it explicitly.
  return { ...state, status: 'abandoned', nextAttemptAt: null, lastError: 'expired' };
}

/**
 * The state after an attempt finished (SPEC rules 1 and 2):
 * - a 2xx: `delivered`, retries stop;
 * - a failed scheduled attempt: the next one `retryDelays[n-1]` later, or `abandoned` after the 6th or when the
 *   next one would fall after the 7-day window;
 * - a failed manual redelivery changes no schedule: an event still being retried stays `failed` with its next
 *   scheduled attempt; a delivered, abandoned or unselected event keeps its status (the failure shows in
 *   `last_response_status` / `last_error`).
 */
export function afterAttempt(
  state: DeliveryState,
  attempt: {
    readonly trigger: AttemptTrigger;
    readonly outcome: AttemptOutcome;
    readonly at: Date;
    readonly eventId: string;
    readonly createdAt: Date;
  },
  policy: DeliveryPolicy,
): DeliveryState {
  const { outcome, at } = attempt;
  const recorded = {
    ...state,
    attemptCount: state.attemptCount + 1,
    lastAttemptAt: at,
    lastResponseStatus: outcome.kind === 'response' ? outcome.status : null,
    lastError: failureCode(outcome),
  };
  if (isDeliverySuccess(outcome)) {
    return {
      ...recorded,
      status: 'delivered',
      scheduledAttempts: state.scheduledAttempts + (attempt.trigger === 'scheduled' ? 1 : 0),
      nextAttemptAt: null,
      redeliveryRequestedAt: null,
      deliveredAt: at,
    };
  }
  if (attempt.trigger === 'manual') {
    return {
      ...recorded,
      status: state.nextAttemptAt !== null ? 'failed' : state.status,
      redeliveryRequestedAt: null,
    };
  }
  const scheduledAttempts = state.scheduledAttempts + 1;
  // A manual request made before this attempt started is served by it; one made during it still runs.
  const redeliveryRequestedAt =
    state.redeliveryRequestedAt !== null && state.redeliveryRequestedAt.getTime() <= at.getTime()
      ? null
      : state.redeliveryRequestedAt;
  if (scheduledAttempts >= policy.maxAttempts) {
    return {
      ...recorded,
      status: 'abandoned',
      scheduledAttempts,
      nextAttemptAt: null,
      redeliveryRequestedAt,
    };
  }
  const next = new Date(at.getTime() + retryDelayMs(policy, scheduledAttempts, attempt.eventId));
  if (isPastDeliveryWindow(policy, attempt.createdAt, next)) {
    return {
      ...recorded,
      status: 'abandoned',
      scheduledAttempts,
      nextAttemptAt: null,
      redeliveryRequestedAt,
    };
  }
  return { ...recorded, status: 'failed', scheduledAttempts, nextAttemptAt: next, redeliveryRequestedAt };
}

/**
 * Whether a manual redelivery of the event is pending or in flight: the request stays recorded from the moment it is
 * made until the attempt that serves it is written back (the claim does not clear it), so this one field bounds the
 * manual attempts of an event to one at a time, whichever process asks or delivers.
 */
export function redeliveryInProgress(state: DeliveryState): boolean {
  return state.redeliveryRequestedAt !== null;
}

/**
 * A merchant asks for one more attempt now (manual redelivery); it runs beside any schedule, never replaces it.
 * Callers refuse the request while `redeliveryInProgress` (one manual attempt per event at a time).
 */
export function requestRedelivery(state: DeliveryState, now: Date): DeliveryState {
  if (state.redeliveryRequestedAt !== null && state.redeliveryRequestedAt.getTime() <= now.getTime())
    return state;
  return { ...state, redeliveryRequestedAt: now };
}

/** When the dispatcher should next look at the event (the earlier of the scheduled and the manual attempt). */
export function dueAt(state: DeliveryState): Date | null {
  const candidates = [state.nextAttemptAt, state.redeliveryRequestedAt].filter((d): d is Date => d !== null);
  if (candidates.length === 0) return null;
  return new Date(Math.min(...candidates.map((d) => d.getTime())));
}

/**
 * Read-your-writes: the attempt due now is moved to `until` without counting as an attempt, because the read
 * model the merchant would query next does not hold the record yet.
 */
export function postponeAttempt(state: DeliveryState, trigger: AttemptTrigger, until: Date): DeliveryState {
  return trigger === 'scheduled'
    ? { ...state, nextAttemptAt: until }
    : { ...state, redeliveryRequestedAt: until };
}
