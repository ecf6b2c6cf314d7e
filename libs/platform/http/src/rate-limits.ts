import { Logger } from '@nestjs/common';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Counter, register } from 'prom-client';
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import { DomainError, envInt } from '@stablepay/util';
import { presentedApiKeys, presentedKeyHash } from './api-key';

/**
 * Request limits, per process (each replica counts on its own: with N replicas behind a balancer a client gets up
 * to N times these). 0 turns a limit off.
 */
export interface RateLimits {
  /** Requests per second for one API key (every route that takes a key). */
  readonly perKeyPerSecond: number;
  /** Requests per second from one source address, with or without a key. */
  readonly perSourcePerSecond: number;
  /**
   * Failed authentications (401) per minute from one source address. Past it the source looks no key up: a key that
   * has not authenticated recently (from anywhere) gets 429 before its lookup, and so does any request that would be
   * 401. A key that authenticated in the last RECENT_KEY_MS is still served, and the hosted pages are never locked.
   */
  readonly authFailuresPerMinute: number;
  /**
   * Key lookups under way at once for one source address, of keys that have not authenticated recently; past it,
   * 429 before the lookup. It bounds what a concurrent burst of guesses costs the database before the failure
   * budget is spent, so it sits well above a client's first burst on a new key.
   */
  readonly unauthenticatedInFlightPerSource: number;
}

/**
 * Defaults: ceilings, not quotas. A key gets 2.5 times the write path's target throughput of one process (the
 * command benchmark's 2,000 creates/s) so neither the benchmarks nor a 64-client burst on one key ever see a 429;
 * a source gets twice that. Lower them to what a merchant should get on your capacity (Stripe allows 100/s).
 * Failed authentication is the tight one: a handful of guesses a minute per source. Lookups of keys not yet
 * authenticated: twice a 64-client first burst on one key.
 */
export const DEFAULT_RATE_LIMITS: RateLimits = {
  perKeyPerSecond: 5000,
  perSourcePerSecond: 10000,
  authFailuresPerMinute: 30,
  unauthenticatedInFlightPerSource: 128,
};

export function rateLimitsFromEnv(env: Record<string, string | undefined>): RateLimits {
  const max = 1_000_000;
  return {
    perKeyPerSecond: envInt(
      env,
      'RATE_LIMIT_PER_KEY_PER_SECOND',
      DEFAULT_RATE_LIMITS.perKeyPerSecond,
      0,
      max,
    ),
    perSourcePerSecond: envInt(
      env,
      'RATE_LIMIT_PER_SOURCE_PER_SECOND',
      DEFAULT_RATE_LIMITS.perSourcePerSecond,
      0,
      max,
    ),
    authFailuresPerMinute: envInt(
      env,
      'RATE_LIMIT_AUTH_FAILURES_PER_MINUTE',
      DEFAULT_RATE_LIMITS.authFailuresPerMinute,
      0,
      max,
    ),
    unauthenticatedInFlightPerSource: envInt(
      env,
      'RATE_LIMIT_UNAUTHENTICATED_IN_FLIGHT_PER_SOURCE',
      DEFAULT_RATE_LIMITS.unauthenticatedInFlightPerSource,
      0,
      max,
    ),
  };
}

/** Probes of the orchestrator and the metrics scraper are never limited. */
const UNLIMITED = new Set(['/health', '/ready', '/metrics']);

/** The customers' hosted pages take no key: a source's failed authentications never lock them. */
const isHostedPage = (path: string): boolean => path === '/hosted' || path.startsWith('/hosted/');

const limiter = (points: number, duration: number): RateLimiterMemory | null =>
  points > 0 ? new RateLimiterMemory({ points, duration }) : null;

export type RateLimitName = 'key' | 'source' | 'auth_failures' | 'unauthenticated_in_flight';

const rateLimited = ((): Counter<'limit'> => {
  const name = 'stablepay_http_rate_limited_total';
  // Get-or-create: tests and the embedded run host several applications on prom-client's one default registry.
  return (
    (register.getSingleMetric(name) as Counter<'limit'> | undefined) ??
    new Counter({ name, help: 'Requests answered 429, per limit that refused them.', labelNames: ['limit'] })
  );
})();

/**
 * One warn line per limit per LOG_EVERY_MS at most, with the count since the previous line: a flood of refusals
 * must not turn into a flood of log lines (the log would become the cheaper way to hurt the service).
 */
const LOG_EVERY_MS = 10_000;
const logger = new Logger('rate-limits');
const refusalLog = new Map<string, { last: number; suppressed: number }>();

/** `limit` is a RateLimitName or the name of an `InFlightLimit` (the metric's label). */
function recordRefusal(limit: string, source: string): void {
  rateLimited.inc({ limit });
  const now = Date.now();
  const entry = refusalLog.get(limit);
  if (entry && now - entry.last < LOG_EVERY_MS) {
    entry.suppressed++;
    return;
  }
  logger.warn({
    msg: 'rate limited',
    limit,
    source,
    refused_since_last_line: (entry?.suppressed ?? 0) + 1,
  });
  refusalLog.set(limit, { last: now, suppressed: 0 });
}

const ENVELOPE_CONTENT_TYPE = 'application/json; charset=utf-8';
const envelope = (message: string): string =>
  JSON.stringify({ error: { type: 'rate_limited', code: 'rate_limited', message } });
const retryAfter = (msBeforeNext: number): string => String(Math.max(1, Math.ceil(msBeforeNext / 1000)));

function refuse(
  reply: FastifyReply,
  res: RateLimiterRes,
  limit: RateLimitName,
  message: string,
): FastifyReply {
  recordRefusal(limit, reply.request.ip);
  return reply
    .status(429)
    .header('retry-after', retryAfter(res.msBeforeNext))
    .header('content-type', ENVELOPE_CONTENT_TYPE)
    .send(envelope(message));
}

/** Consumes one point; returns the refusal when the budget is spent (other errors propagate). */
async function take(l: RateLimiterMemory | null, key: string): Promise<RateLimiterRes | null> {
  if (!l) return null;
  try {
    await l.consume(key);
    return null;
  } catch (error) {
    if (error instanceof RateLimiterRes) return error;
    throw error;
  }
}

/**
 * The per-key budgets a request draws on: one per distinct API key it presents (`presentedApiKeys`), each named by
 * the key's hash, computed once per request (`presentedKeyHash`: the guard reuses it). One key spends one budget
 * whichever header carries it; a request carrying two keys spends both.
 */
export function presentedKeyBudgets(request: Pick<FastifyRequest, 'headers'>): string[] {
  return presentedApiKeys(request.headers).map((key) => presentedKeyHash(request, key));
}

/**
 * The budget a source address draws on. An IPv6 client usually holds a whole /64 (one customer's prefix), and
 * rotating addresses within it costs nothing: it is keyed by its /64, as an IPv4 client is by its address.
 * IPv4-mapped IPv6 (`::ffff:192.0.2.1`, a dual-stack socket) is the IPv4 address.
 */
export function sourceBudget(ip: string): string {
  if (!ip.includes(':')) return ip;
  const address = ip.split('%')[0]?.toLowerCase() ?? '';
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(address);
  if (mapped?.[1]) return mapped[1];
  const [head = '', tail] = address.split('::');
  const headGroups = head === '' ? [] : head.split(':');
  const tailGroups = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups =
    tail === undefined
      ? headGroups
      : [...headGroups, ...Array<string>(8 - headGroups.length - tailGroups.length).fill('0'), ...tailGroups];
  return `${groups
    .slice(0, 4)
    .map((g) => (g.includes('.') ? g : (parseInt(g, 16) || 0).toString(16)))
    .join(':')}::/64`;
}

/** How long a key that authenticated stays exempt from its source's lockout and in-flight bound. */
const RECENT_KEY_MS = 10 * 60_000;
/** Keys remembered at most (only keys that authenticated get in, so this is a safety net, not a working limit). */
const RECENT_KEYS_MAX = 100_000;

/**
 * Hashes of keys that authenticated in the last RECENT_KEY_MS, from any source. A Map kept in the order of last
 * authentication, which is also the order of expiry: the oldest entries are at the front.
 */
class RecentKeys {
  private readonly expiresAt = new Map<string, number>();

  has(hash: string, now: number): boolean {
    const expires = this.expiresAt.get(hash);
    return expires !== undefined && expires > now;
  }

  add(hash: string, now: number): void {
    this.expiresAt.delete(hash);
    this.expiresAt.set(hash, now + RECENT_KEY_MS);
    for (const [oldest, expires] of this.expiresAt) {
      if (expires > now && this.expiresAt.size <= RECENT_KEYS_MAX) break;
      this.expiresAt.delete(oldest);
    }
  }
}

type Admission =
  | { readonly held: boolean }
  | { readonly refused: 'auth_failures' | 'unauthenticated_in_flight'; readonly retryAfterMs: number };

/**
 * Failed authentication per source, as two separate things. Kept failures: requests that really ended 401, counted
 * when they are answered (rate-limiter-flexible, a fixed minute); nothing is ever given back, so no point can land
 * in a window other than the one it was counted in. Lookups in flight: key lookups under way for keys that have not
 * authenticated recently, a plain count taken just before the lookup and returned the moment it answers, so a valid
 * request holds nothing while its handler runs and a slow lookup holds nothing of any window.
 *
 * This is rate-limiter-flexible's login-protection pattern (read the failures before checking a credential, count
 * one only on a failure) with two changes: a key that authenticated recently is let through, and the lookups of a
 * concurrent burst are bounded before any of them has failed.
 */
class AuthFailureGate {
  private readonly kept: RateLimiterMemory;
  private readonly inFlight = new Map<string, number>();
  private readonly recent = new RecentKeys();

  constructor(
    private readonly budget: number,
    private readonly inFlightLimit: number,
  ) {
    this.kept = new RateLimiterMemory({ points: budget, duration: 60 });
  }

  /**
   * Before a key lookup: refused when the source may not look this key up now; else admitted, holding one in-flight
   * point until `settle` unless the key authenticated recently.
   */
  async admit(source: string, keyHash: string): Promise<Admission> {
    if (this.recent.has(keyHash, Date.now())) return { held: false };
    const kept = await this.kept.get(source);
    if (kept && kept.consumedPoints >= this.budget)
      return { refused: 'auth_failures', retryAfterMs: kept.msBeforeNext };
    const inFlight = this.inFlight.get(source) ?? 0;
    if (this.inFlightLimit > 0 && inFlight >= this.inFlightLimit)
      return { refused: 'unauthenticated_in_flight', retryAfterMs: 1000 };
    this.inFlight.set(source, inFlight + 1);
    return { held: true };
  }

  /** After the lookup answered: returns the in-flight point it held, remembers the key if it authenticated. */
  settle(source: string, keyHash: string, held: boolean, authenticated: boolean): void {
    if (authenticated) this.recent.add(keyHash, Date.now());
    if (!held) return;
    const left = (this.inFlight.get(source) ?? 1) - 1;
    if (left > 0) this.inFlight.set(source, left);
    else this.inFlight.delete(source);
  }

  /** A request ended 401: counts it; answers the refusal when the source's budget was already spent. */
  keep(source: string): Promise<RateLimiterRes | null> {
    return take(this.kept, source);
  }
}

const GATE = 'stablepayAuthFailureGate';
type GatedRequest = FastifyRequest & { [GATE]: AuthFailureGate | null };

const LOCKED_MESSAGE =
  'Too many failed authentication attempts from this address. Retry later with a valid API key.';
const IN_FLIGHT_MESSAGE = 'Too many requests awaiting authentication from this address. Retry later.';

/**
 * Called by the API-key guards right before they look a key up (`keyHash` is `presentedKeyHash`). Resolves to the
 * function to call once the lookup has answered, with whether the key authenticated. Throws 429 `rate_limited`
 * (Retry-After set on the reply) instead when the source may not look this key up now: it is locked out by its
 * failed authentications and the key has not authenticated recently, or too many of its lookups are under way.
 * Without rate limits (or on a path they do not cover) it admits everything.
 */
export async function admitKeyLookup(
  request: FastifyRequest,
  reply: FastifyReply,
  keyHash: string,
): Promise<(authenticated: boolean) => void> {
  const gate = (request as GatedRequest)[GATE];
  if (!gate) return () => undefined;
  const source = sourceBudget(request.ip);
  const admission = await gate.admit(source, keyHash);
  if ('refused' in admission) {
    recordRefusal(admission.refused, request.ip);
    void reply.header('retry-after', retryAfter(admission.retryAfterMs));
    throw new DomainError({
      type: 'rate_limited',
      status: 429,
      code: 'rate_limited',
      message: admission.refused === 'auth_failures' ? LOCKED_MESSAGE : IN_FLIGHT_MESSAGE,
    });
  }
  let settled = false;
  return (authenticated) => {
    if (settled) return;
    settled = true;
    gate.settle(source, keyHash, admission.held, authenticated);
  };
}

/**
 * At most `limit` units of some work in flight at once per key (a source address, an intent id, ...): the points of a
 * rate-limiter-flexible limiter without a window (duration 0), consumed when the work starts and rewarded when it
 * ends, so a slot is held exactly as long as its work runs. A refused attempt's point is given back at once. Per
 * process, as every limit here. 0 turns it off.
 */
export class InFlightLimit {
  private readonly slots: RateLimiterMemory | null;

  constructor(
    /** The metric label and log name of refusals (`stablepay_http_rate_limited_total{limit}`). */
    readonly name: string,
    readonly limit: number,
  ) {
    this.slots = limit > 0 ? new RateLimiterMemory({ points: limit, duration: 0 }) : null;
  }

  /** Takes a slot for `key`; false (nothing held) when all are taken. */
  async enter(key: string): Promise<boolean> {
    if (!this.slots) return true;
    const refusal = await take(this.slots, key);
    if (!refusal) return true;
    await this.slots.reward(key, 1);
    return false;
  }

  /** Gives the slot back; a key with nothing held left is forgotten (no window ever expires it). */
  async leave(key: string): Promise<void> {
    if (!this.slots) return;
    const left = await this.slots.reward(key, 1);
    if (left.consumedPoints <= 0) await this.slots.delete(key);
  }
}

/**
 * Starts one unit of work that counts against each of `bounds` (its limit and the key it counts under), or throws
 * 429 `rate_limited` with `Retry-After` set on the reply (and holds nothing) when any of them is full. Resolves to
 * the function to call once the work has ended, however it ended.
 */
export async function admitInFlight(
  request: FastifyRequest,
  reply: FastifyReply,
  bounds: ReadonlyArray<{ readonly limit: InFlightLimit; readonly key: string; readonly message: string }>,
  retryAfterMs: number,
): Promise<() => Promise<void>> {
  const held: Array<{ readonly limit: InFlightLimit; readonly key: string }> = [];
  const release = async () => {
    for (const h of held.splice(0)) await h.limit.leave(h.key);
  };
  for (const bound of bounds) {
    if (await bound.limit.enter(bound.key)) {
      held.push(bound);
      continue;
    }
    await release();
    recordRefusal(bound.limit.name, request.ip);
    void reply.header('retry-after', retryAfter(retryAfterMs));
    throw new DomainError({
      type: 'rate_limited',
      status: 429,
      code: 'rate_limited',
      message: bound.message,
    });
  }
  return release;
}

/**
 * Installs the limits as Fastify hooks, before routing and authentication: a flood costs a map lookup, not a
 * database round trip. A key is counted by its hash, valid or not: what outlives a request holds hashes only.
 *
 * Failed authentication has its own, far smaller budget per source (`AuthFailureGate`). Past it, the source's key
 * lookups are refused with 429 before they happen unless the key authenticated recently, and any of its answers
 * that would be 401 (no key, a malformed one) is 429 instead. A key in use is served from the same address (a
 * shared NAT or an unconfigured proxy must not let one guesser lock every merchant out), and the hosted pages,
 * which take no key, are never locked.
 */
export function installRateLimits(fastify: FastifyInstance, limits: RateLimits): void {
  const perKey = limiter(limits.perKeyPerSecond, 1);
  const perSource = limiter(limits.perSourcePerSecond, 1);
  const gate =
    limits.authFailuresPerMinute > 0
      ? new AuthFailureGate(limits.authFailuresPerMinute, limits.unauthenticatedInFlightPerSource)
      : null;
  if (!perKey && !perSource && !gate) return;
  if (gate) fastify.decorateRequest(GATE, null);

  fastify.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
    const path = request.url.split('?')[0] ?? '';
    if (UNLIMITED.has(path)) return;
    const source = sourceBudget(request.ip);
    const sourceRefusal = await take(perSource, source);
    if (sourceRefusal)
      return refuse(reply, sourceRefusal, 'source', 'Too many requests from this address. Retry later.');
    if (perKey) {
      for (const key of presentedKeyBudgets(request)) {
        const keyRefusal = await take(perKey, key);
        if (keyRefusal)
          return refuse(reply, keyRefusal, 'key', 'Too many requests with this API key. Retry later.');
      }
    }
    if (gate && !isHostedPage(path)) (request as GatedRequest)[GATE] = gate;
    return undefined;
  });

  if (!gate) return;
  fastify.addHook('onSend', async (request, reply, payload) => {
    if (reply.statusCode !== 401 || !(request as GatedRequest)[GATE]) return payload;
    const spent = await gate.keep(sourceBudget(request.ip));
    if (!spent) return payload;
    recordRefusal('auth_failures', request.ip);
    void reply
      .status(429)
      .header('retry-after', retryAfter(spent.msBeforeNext))
      .header('content-type', ENVELOPE_CONTENT_TYPE);
    return envelope(LOCKED_MESSAGE);
  });
}
