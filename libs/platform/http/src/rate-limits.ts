import { Logger } from '@nestjs/common';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Counter, register } from 'prom-client';
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import { envInt } from '@stablepay/util';
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
   * Failed authentications (401) per minute from one source address; past it, the source's requests that would be
   * 401 get 429 (a valid key is still served, the hosted pages are never locked).
   */
  readonly authFailuresPerMinute: number;
}

/**
 * Defaults: ceilings, not quotas. A key gets 2.5 times the write path's target throughput of one process (the
 * command benchmark's 2,000 creates/s) so neither the benchmarks nor a 64-client burst on one key ever see a 429;
 * a source gets twice that. Lower them to what a merchant should get on your capacity (Stripe allows 100/s).
 * Failed authentication is the tight one: a handful of guesses a minute per source.
 */
export const DEFAULT_RATE_LIMITS: RateLimits = {
  perKeyPerSecond: 5000,
  perSourcePerSecond: 10000,
  authFailuresPerMinute: 30,
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
  };
}

/** Probes of the orchestrator and the metrics scraper are never limited. */
const UNLIMITED = new Set(['/health', '/ready', '/metrics']);

/** The customers' hosted pages take no key: a source's failed authentications never lock them. */
const isHostedPage = (path: string): boolean => path === '/hosted' || path.startsWith('/hosted/');

const limiter = (points: number, duration: number): RateLimiterMemory | null =>
  points > 0 ? new RateLimiterMemory({ points, duration }) : null;

export type RateLimitName = 'key' | 'source' | 'auth_failures';

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
const refusalLog = new Map<RateLimitName, { last: number; suppressed: number }>();

function recordRefusal(limit: RateLimitName, source: string): void {
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

/**
 * Failed authentications per source, a fixed window counted synchronously (every non-exempt request touches it,
 * so it stays a map lookup). A request takes a point before authentication and gives it back when its answer is
 * not a 401: a concurrent burst of guesses is bounded by the budget, not by how many arrive before the first 401.
 */
class FailureBudget {
  private readonly windows = new Map<string, { used: number; resetAt: number }>();
  private nextSweep = 0;

  constructor(
    private readonly points: number,
    private readonly windowMs: number,
  ) {}

  /** Takes a point; answers the ms until the window resets when the budget was already spent, else 0. */
  take(key: string, now: number): number {
    if (now >= this.nextSweep) this.sweep(now);
    let w = this.windows.get(key);
    if (!w || now >= w.resetAt) {
      w = { used: 0, resetAt: now + this.windowMs };
      this.windows.set(key, w);
    }
    w.used++;
    return w.used > this.points ? w.resetAt - now : 0;
  }

  giveBack(key: string, now: number): void {
    const w = this.windows.get(key);
    if (w && now < w.resetAt && w.used > 0) w.used--;
  }

  private sweep(now: number): void {
    for (const [key, w] of this.windows) if (now >= w.resetAt) this.windows.delete(key);
    this.nextSweep = now + this.windowMs;
  }
}

/**
 * Per request: the source whose failure budget it holds a point of, how long that budget stays spent (0: it was
 * not), and whether the point is settled (kept by a 401, or given back).
 */
interface AuthFailureHold {
  source: string;
  lockedForMs: number;
  settled: boolean;
}
const HOLD = 'stablepayAuthFailureHold';
type HoldingRequest = FastifyRequest & { [HOLD]: AuthFailureHold | null };

/**
 * Installs the limits as Fastify hooks, before routing and authentication: a flood costs a map lookup, not a
 * database round trip. A key is counted by its hash, valid or not: what outlives a request holds hashes only.
 *
 * Failed authentication has its own, far smaller budget per source. Past it, a request from that source whose
 * answer would be 401 is answered 429 instead: the lockout touches only requests without a valid key. A valid key
 * from the same address is served under its per-key limit (a shared NAT or an unconfigured proxy must not let one
 * guesser lock every merchant out), and the hosted pages, which take no key, are never locked.
 */
export function installRateLimits(fastify: FastifyInstance, limits: RateLimits): void {
  const perKey = limiter(limits.perKeyPerSecond, 1);
  const perSource = limiter(limits.perSourcePerSecond, 1);
  const failures =
    limits.authFailuresPerMinute > 0 ? new FailureBudget(limits.authFailuresPerMinute, 60_000) : null;
  if (!perKey && !perSource && !failures) return;
  if (failures) fastify.decorateRequest(HOLD, null);

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
    if (failures && !isHostedPage(path)) {
      (request as HoldingRequest)[HOLD] = {
        source,
        lockedForMs: failures.take(source, Date.now()),
        settled: false,
      };
    }
    return undefined;
  });

  if (!failures) return;
  fastify.addHook('onSend', (request, reply, payload, done) => {
    const hold = (request as HoldingRequest)[HOLD];
    if (!hold || reply.statusCode !== 401) return done(null, payload);
    hold.settled = true;
    if (hold.lockedForMs <= 0) return done(null, payload);
    recordRefusal('auth_failures', request.ip);
    void reply
      .status(429)
      .header('retry-after', retryAfter(hold.lockedForMs))
      .header('content-type', ENVELOPE_CONTENT_TYPE);
    done(
      null,
      envelope(
        'Too many failed authentication attempts from this address. Retry later with a valid API key.',
      ),
    );
  });
  const giveBack = (request: FastifyRequest, _reply: FastifyReply, done: () => void) => {
    const hold = (request as HoldingRequest)[HOLD];
    if (hold && !hold.settled) {
      hold.settled = true;
      failures.giveBack(hold.source, Date.now());
    }
    done();
  };
  fastify.addHook('onResponse', giveBack);
  fastify.addHook('onRequestAbort', (request, done) => giveBack(request, undefined as never, done));
}
