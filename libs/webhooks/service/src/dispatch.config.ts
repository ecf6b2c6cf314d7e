import { DEFAULT_DELIVERY_POLICY, type DeliveryPolicy } from '@stablepay/webhooks-domain';
import { envInt } from '@stablepay/util';

/** How the dispatcher runs; every field has a production default, tests shrink the timings. */
export interface DispatchOptions {
  /** SPEC delivery policy: 6 attempts, 5/15/30/60/60 minutes, 7 days, 10-second deadline. */
  readonly policy: DeliveryPolicy;
  /** Deliveries in flight at once in this process, all merchants together. */
  readonly concurrency: number;
  /** Deliveries in flight at once for one merchant: a slow endpoint holds at most this many slots. */
  readonly perMerchantConcurrency: number;
  /**
   * Test deliveries (POST /settings/webhook/test) in flight at once for one merchant in this process: each holds a
   * connection and its name's resolution up to the response deadline outside the dispatcher's slots, so this
   * bounds what one merchant's hanging receiver or silent DNS holds; past it, 409 `webhook_test_in_progress`.
   */
  readonly testConcurrencyPerMerchant: number;
  /** How often due work is looked for when nothing wakes the dispatcher earlier (new events, finished attempts). */
  readonly pollIntervalMs: number;
  /** A claimed event is leased for this long (by the injected clock); an expired lease is claimable again. */
  readonly leaseMs: number;
  /** Longest wait (real time) for a source's read model before an attempt is postponed. */
  readonly readModelWaitMs: number;
  /** How far (by the clock) an attempt is postponed when the read model still lags. */
  readonly readModelRetryMs: number;
  /** Response bytes read at most; the rest is dropped with the connection. */
  readonly maxResponseBytes: number;
  /** Response bytes kept with an attempt for the merchant to see. */
  readonly responseExcerptBytes: number;
}

export const DEFAULT_DISPATCH_OPTIONS: DispatchOptions = {
  policy: DEFAULT_DELIVERY_POLICY,
  concurrency: 128,
  perMerchantConcurrency: 16,
  testConcurrencyPerMerchant: 2,
  pollIntervalMs: 1000,
  leaseMs: 2 * 60_000,
  readModelWaitMs: 5_000,
  readModelRetryMs: 15_000,
  maxResponseBytes: 16 * 1024,
  responseExcerptBytes: 512,
};

export const DISPATCH_OPTIONS = Symbol('WEBHOOK_DISPATCH_OPTIONS');

export type DispatchOverrides = Partial<Omit<DispatchOptions, 'policy'>> & {
  readonly policy?: Partial<DeliveryPolicy>;
};

export function dispatchOptions(overrides: DispatchOverrides = {}): DispatchOptions {
  const { policy, ...rest } = overrides;
  const options: DispatchOptions = {
    ...DEFAULT_DISPATCH_OPTIONS,
    ...rest,
    policy: { ...DEFAULT_DELIVERY_POLICY, ...policy },
  };
  if (options.perMerchantConcurrency > options.concurrency)
    throw new Error('perMerchantConcurrency must not exceed concurrency');
  if (options.leaseMs <= options.policy.responseDeadlineMs + options.readModelWaitMs) {
    throw new Error('leaseMs must exceed the response deadline plus the read-model wait');
  }
  return options;
}

/**
 * WEBHOOK_CONCURRENCY, WEBHOOK_CONCURRENCY_PER_MERCHANT, WEBHOOK_TEST_CONCURRENCY_PER_MERCHANT,
 * WEBHOOK_POLL_INTERVAL_MS; validated at start.
 */
export function dispatchOptionsFromEnv(env: Record<string, string | undefined>): DispatchOptions {
  const concurrency = envInt(env, 'WEBHOOK_CONCURRENCY', DEFAULT_DISPATCH_OPTIONS.concurrency, 1, 10_000);
  const perMerchantConcurrency = envInt(
    env,
    'WEBHOOK_CONCURRENCY_PER_MERCHANT',
    Math.min(DEFAULT_DISPATCH_OPTIONS.perMerchantConcurrency, concurrency),
    1,
    concurrency,
  );
  const pollIntervalMs = envInt(
    env,
    'WEBHOOK_POLL_INTERVAL_MS',
    DEFAULT_DISPATCH_OPTIONS.pollIntervalMs,
    10,
    60_000,
  );
  const testConcurrencyPerMerchant = envInt(
    env,
    'WEBHOOK_TEST_CONCURRENCY_PER_MERCHANT',
    DEFAULT_DISPATCH_OPTIONS.testConcurrencyPerMerchant,
    1,
    1_000,
  );
  return dispatchOptions({ concurrency, perMerchantConcurrency, testConcurrencyPerMerchant, pollIntervalMs });
}
