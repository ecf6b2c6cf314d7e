import { DAY, MINUTE } from '@stablepay/util';
import {
  abandonIfPastWindow,
  afterAttempt,
  applySelection,
  type AttemptOutcome,
  type AttemptTrigger,
  type DeliveryState,
  dueAt,
  dueTrigger,
  failureCode,
  isDeliverySuccess,
  postponeAttempt,
  recordedDelivery,
  redeliveryInProgress,
  requestRedelivery,
} from './delivery';
import {
  DEFAULT_DELIVERY_POLICY,
  type DeliveryPolicy,
  isPastDeliveryWindow,
  retryDelayMs,
} from './delivery-policy';

const exact: DeliveryPolicy = { ...DEFAULT_DELIVERY_POLICY, jitterRatio: 0 };
const t0 = new Date('2026-03-01T00:00:00.000Z');
const at = (ms: number) => new Date(t0.getTime() + ms);
const eventId = 'evt_0000000000aaaaaaaaaaaaaaaa';

const ok: AttemptOutcome = { kind: 'response', status: 204, durationMs: 3, bodyExcerpt: '' };
const serverError: AttemptOutcome = { kind: 'response', status: 500, durationMs: 3, bodyExcerpt: 'boom' };
const redirect: AttemptOutcome = { kind: 'response', status: 302, durationMs: 3, bodyExcerpt: '' };
const timeout: AttemptOutcome = { kind: 'timeout', durationMs: 10_000 };
const reset: AttemptOutcome = {
  kind: 'network_error',
  code: 'network_error',
  detail: 'ECONNRESET',
  durationMs: 1,
};

/** given a recorded event, when attempts happen (trigger, outcome, at), then the state. */
function given(state: DeliveryState = recordedDelivery(t0), policy = exact) {
  const apply = (s: DeliveryState, steps: ReadonlyArray<[AttemptTrigger, AttemptOutcome, Date]>) =>
    steps.reduce(
      (acc, [trigger, outcome, when]) =>
        afterAttempt(acc, { trigger, outcome, at: when, eventId, createdAt: t0 }, policy),
      s,
    );
  return { when: (...steps: Array<[AttemptTrigger, AttemptOutcome, Date]>) => apply(state, steps) };
}

describe('SPEC Delivery rule 1: success is a 2xx within the deadline', () => {
  it.each([200, 201, 202, 204, 299])('%i is a success', (status) => {
    expect(isDeliverySuccess({ kind: 'response', status, durationMs: 1, bodyExcerpt: '' })).toBe(true);
  });

  it.each([100, 199, 300, 301, 302, 304, 307, 308, 400, 404, 410, 429, 500, 503])(
    '%i is a failure',
    (status) => {
      expect(isDeliverySuccess({ kind: 'response', status, durationMs: 1, bodyExcerpt: '' })).toBe(false);
    },
  );

  it('a timeout, a network error and a refused address are failures, each with its own code', () => {
    expect(failureCode(timeout)).toBe('timeout');
    expect(failureCode(reset)).toBe('network_error');
    expect(failureCode({ kind: 'refused', code: 'blocked_address', detail: '10.0.0.1' })).toBe(
      'blocked_address',
    );
    expect(failureCode(redirect)).toBe('redirect_not_followed');
    expect(failureCode(serverError)).toBe('http_status');
    expect(failureCode(ok)).toBeNull();
  });
});

describe('recording an event and SPEC Delivery rule 5: selection', () => {
  const selected = { hasEndpoint: true, typeSelected: true };

  it('a recorded event is pending and due at once; a selected one stays so', () => {
    const s = applySelection(recordedDelivery(t0), selected);
    expect(s).toMatchObject({ status: 'pending', nextAttemptAt: t0, attemptCount: 0 });
    expect(dueTrigger(s, t0)).toBe('scheduled');
  });

  it('an unselected type becomes not_selected and is never due', () => {
    const s = applySelection(recordedDelivery(t0), { hasEndpoint: true, typeSelected: false });
    expect(s).toMatchObject({
      status: 'not_selected',
      nextAttemptAt: null,
      lastError: 'event_type_not_selected',
    });
    expect(dueTrigger(s, at(30 * DAY))).toBeNull();
  });

  it('without a webhook URL the event becomes not_selected (no_webhook_url)', () => {
    expect(applySelection(recordedDelivery(t0), { hasEndpoint: false, typeSelected: true })).toMatchObject({
      status: 'not_selected',
      lastError: 'no_webhook_url',
    });
  });

  it('does not touch an event whose attempts have begun, nor a manual redelivery of an unselected one', () => {
    const failing = given().when(['scheduled', serverError, t0]);
    expect(applySelection(failing, { hasEndpoint: false, typeSelected: false })).toBe(failing);
    const unselected = applySelection(recordedDelivery(t0), { hasEndpoint: true, typeSelected: false });
    const requested = requestRedelivery(unselected, at(MINUTE));
    expect(applySelection(requested, { hasEndpoint: true, typeSelected: false })).toBe(requested);
    expect(dueTrigger(requested, at(MINUTE))).toBe('manual');
  });
});

describe('SPEC Delivery rule 2: the retry schedule', () => {
  it('retries after 5, 15, 30, 60, 60 minutes and abandons after the 6th failed attempt', () => {
    let s = given().when();
    let now = t0;
    const gaps: number[] = [];
    for (let attempt = 1; attempt <= 6; attempt++) {
      expect(dueTrigger(s, now)).toBe('scheduled');
      s = afterAttempt(
        s,
        { trigger: 'scheduled', outcome: serverError, at: now, eventId, createdAt: t0 },
        exact,
      );
      expect(s.attemptCount).toBe(attempt);
      if (s.nextAttemptAt) {
        gaps.push(s.nextAttemptAt.getTime() - now.getTime());
        // Not due a millisecond early.
        expect(dueTrigger(s, new Date(s.nextAttemptAt.getTime() - 1))).toBeNull();
        now = s.nextAttemptAt;
      }
    }
    expect(gaps).toEqual([5, 15, 30, 60, 60].map((m) => m * MINUTE));
    expect(s).toMatchObject({
      status: 'abandoned',
      attemptCount: 6,
      scheduledAttempts: 6,
      nextAttemptAt: null,
      lastResponseStatus: 500,
    });
  });

  it('a failed attempt with retries left is failed with its next attempt', () => {
    expect(given().when(['scheduled', timeout, t0])).toMatchObject({
      status: 'failed',
      attemptCount: 1,
      nextAttemptAt: at(5 * MINUTE),
      lastError: 'timeout',
      lastResponseStatus: null,
    });
  });

  it('stops on the first 2xx', () => {
    const s = given().when(['scheduled', serverError, t0], ['scheduled', ok, at(5 * MINUTE)]);
    expect(s).toMatchObject({
      status: 'delivered',
      attemptCount: 2,
      nextAttemptAt: null,
      deliveredAt: at(5 * MINUTE),
      lastResponseStatus: 204,
    });
    expect(dueTrigger(s, at(DAY))).toBeNull();
  });

  it('a 3xx is a failure and is retried', () => {
    expect(given().when(['scheduled', redirect, t0])).toMatchObject({
      status: 'failed',
      lastError: 'redirect_not_followed',
      lastResponseStatus: 302,
    });
  });

  it('abandons instead of scheduling an attempt that would fall after 7 days', () => {
    const late = at(7 * DAY - 2 * MINUTE);
    expect(given().when(['scheduled', serverError, late])).toMatchObject({
      status: 'abandoned',
      nextAttemptAt: null,
    });
  });

  it('abandons a due event older than 7 days without attempting it (dispatcher was down)', () => {
    const s = given().when(['scheduled', serverError, t0]);
    expect(abandonIfPastWindow(s, t0, at(6 * DAY), exact)).toBeNull();
    expect(abandonIfPastWindow(s, t0, at(7 * DAY), exact)).toMatchObject({
      status: 'abandoned',
      nextAttemptAt: null,
      lastError: 'expired',
      attemptCount: 1,
    });
    expect(isPastDeliveryWindow(exact, t0, at(7 * DAY - 1))).toBe(false);
  });

  it('"about": jitter stretches a gap by at most the ratio, the same way every time for one event', () => {
    const jittered: DeliveryPolicy = { ...exact, jitterRatio: 0.1 };
    for (let n = 1; n <= 5; n++) {
      const base = exact.retryDelaysMs[n - 1] ?? 0;
      const d = retryDelayMs(jittered, n, eventId);
      expect(d).toBeGreaterThanOrEqual(base);
      expect(d).toBeLessThanOrEqual(base * 1.1);
      expect(retryDelayMs(jittered, n, eventId)).toBe(d);
    }
    // Later gaps stay near 60 minutes.
    expect(retryDelayMs(exact, 9, eventId)).toBe(60 * MINUTE);
  });
});

describe('manual redelivery', () => {
  it('is due at once and served by one attempt; success marks the event delivered', () => {
    const abandoned = given().when(
      ['scheduled', serverError, t0],
      ['scheduled', serverError, at(5 * MINUTE)],
      ['scheduled', serverError, at(20 * MINUTE)],
      ['scheduled', serverError, at(50 * MINUTE)],
      ['scheduled', serverError, at(110 * MINUTE)],
      ['scheduled', serverError, at(170 * MINUTE)],
    );
    expect(abandoned.status).toBe('abandoned');
    const requested = requestRedelivery(abandoned, at(DAY));
    expect(dueTrigger(requested, at(DAY))).toBe('manual');
    expect(dueAt(requested)).toEqual(at(DAY));
    const done = afterAttempt(
      requested,
      { trigger: 'manual', outcome: ok, at: at(DAY), eventId, createdAt: t0 },
      exact,
    );
    expect(done).toMatchObject({ status: 'delivered', attemptCount: 7, redeliveryRequestedAt: null });
  });

  it('a failed manual attempt changes no schedule and no terminal status', () => {
    const failing = given().when(['scheduled', serverError, t0]);
    const manual = afterAttempt(
      requestRedelivery(failing, at(MINUTE)),
      { trigger: 'manual', outcome: reset, at: at(MINUTE), eventId, createdAt: t0 },
      exact,
    );
    expect(manual).toMatchObject({
      status: 'failed',
      attemptCount: 2,
      scheduledAttempts: 1,
      nextAttemptAt: at(5 * MINUTE),
      redeliveryRequestedAt: null,
      lastError: 'network_error',
    });

    const delivered = given().when(['scheduled', ok, t0]);
    const resent = afterAttempt(
      requestRedelivery(delivered, at(DAY)),
      { trigger: 'manual', outcome: serverError, at: at(DAY), eventId, createdAt: t0 },
      exact,
    );
    expect(resent).toMatchObject({ status: 'delivered', attemptCount: 2, lastResponseStatus: 500 });
  });

  it('sends an event that was not selected when the merchant asks', () => {
    const unselected = applySelection(recordedDelivery(t0), { hasEndpoint: true, typeSelected: false });
    const s = afterAttempt(
      requestRedelivery(unselected, at(MINUTE)),
      { trigger: 'manual', outcome: ok, at: at(MINUTE), eventId, createdAt: t0 },
      exact,
    );
    expect(s.status).toBe('delivered');
  });

  it('a scheduled attempt due at the same time serves the manual request too', () => {
    const failing = given().when(['scheduled', serverError, t0]);
    const requested = requestRedelivery(failing, at(MINUTE));
    expect(dueTrigger(requested, at(5 * MINUTE))).toBe('scheduled');
    const s = afterAttempt(
      requested,
      { trigger: 'scheduled', outcome: serverError, at: at(5 * MINUTE), eventId, createdAt: t0 },
      exact,
    );
    expect(s).toMatchObject({ redeliveryRequestedAt: null, scheduledAttempts: 2 });
  });
});

describe('one manual redelivery at a time', () => {
  it('is in progress from the request until the attempt serving it is written back, then free again', () => {
    const delivered = given().when(['scheduled', ok, t0]);
    expect(redeliveryInProgress(delivered)).toBe(false);
    const requested = requestRedelivery(delivered, at(MINUTE));
    expect(redeliveryInProgress(requested)).toBe(true);
    const served = afterAttempt(
      requested,
      { trigger: 'manual', outcome: serverError, at: at(MINUTE), eventId, createdAt: t0 },
      exact,
    );
    expect(redeliveryInProgress(served)).toBe(false);
  });

  it('stays in progress while postponed for read-your-writes', () => {
    const postponed = postponeAttempt(requestRedelivery(recordedDelivery(t0), t0), 'manual', at(15_000));
    expect(redeliveryInProgress(postponed)).toBe(true);
  });
});

describe('read-your-writes postponement', () => {
  it('moves the due attempt without counting it', () => {
    const s = recordedDelivery(t0);
    const later = postponeAttempt(s, 'scheduled', at(15_000));
    expect(later).toMatchObject({ status: 'pending', attemptCount: 0, nextAttemptAt: at(15_000) });
    expect(dueTrigger(later, t0)).toBeNull();
    const manual = postponeAttempt(requestRedelivery(later, t0), 'manual', at(20_000));
    expect(manual.redeliveryRequestedAt).toEqual(at(20_000));
  });
});
