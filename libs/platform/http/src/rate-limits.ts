import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import { envInt } from '@stablepay/util';

/**
 * Request limits, per process (each replica counts on its own: with N replicas behind a balancer a client gets up
 * to N times these). 0 turns a limit off.
 */
export interface RateLimits {
  /** Requests per second for one API key (every route that takes a key). */
  readonly perKeyPerSecond: number;
  /** Requests per second from one source address, with or without a key. */
  readonly perSourcePerSecond: number;
  /** Failed authentications (401) per minute from one source address; past it, the source gets 429s. */
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

const limiter = (points: number, duration: number): RateLimiterMemory | null =>
  points > 0 ? new RateLimiterMemory({ points, duration }) : null;

function refuse(reply: FastifyReply, res: RateLimiterRes, message: string): FastifyReply {
  return reply
    .status(429)
    .header('retry-after', String(Math.max(1, Math.ceil(res.msBeforeNext / 1000))))
    .header('content-type', 'application/json; charset=utf-8')
    .send({ error: { type: 'rate_limited', code: 'rate_limited', message } });
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
 * The per-key budgets a request draws on: one per distinct API key it presents, in `Authorization: Bearer` (the
 * main surface) or `x-api-key` (the payment-request surface, SPEC Authentication 5), each named by the key's hash.
 * One key spends one budget whichever header carries it; a request carrying two keys spends both.
 */
export function presentedKeyBudgets(headers: FastifyRequest['headers']): string[] {
  const authorization = headers['authorization'];
  const bearer = typeof authorization === 'string' ? /^Bearer\s+(\S+)$/i.exec(authorization)?.[1] : undefined;
  const xApiKey = typeof headers['x-api-key'] === 'string' ? headers['x-api-key'].trim() : undefined;
  const keys = new Set([bearer, xApiKey].filter((k): k is string => k !== undefined && k !== ''));
  return [...keys].map((k) => createHash('sha256').update(k).digest('base64url'));
}

/**
 * Installs the limits as Fastify hooks, before routing and authentication: a flood costs a map lookup, not a
 * database round trip. A key is counted by its hash (never kept in memory as presented), valid or not; keys that
 * fail authentication are also counted against their source's far smaller failure budget.
 */
export function installRateLimits(fastify: FastifyInstance, limits: RateLimits): void {
  const perKey = limiter(limits.perKeyPerSecond, 1);
  const perSource = limiter(limits.perSourcePerSecond, 1);
  const failures = limiter(limits.authFailuresPerMinute, 60);
  if (!perKey && !perSource && !failures) return;

  fastify.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
    if (UNLIMITED.has(request.url.split('?')[0] ?? '')) return;
    const source = request.ip;
    const sourceRefusal = await take(perSource, source);
    if (sourceRefusal)
      return refuse(reply, sourceRefusal, 'Too many requests from this address. Retry later.');
    const failed = failures ? await failures.get(source) : null;
    if (failed && failed.remainingPoints <= 0) {
      return refuse(reply, failed, 'Too many failed authentication attempts from this address. Retry later.');
    }
    for (const key of presentedKeyBudgets(request.headers)) {
      const keyRefusal = await take(perKey, key);
      if (keyRefusal) return refuse(reply, keyRefusal, 'Too many requests with this API key. Retry later.');
    }
    return undefined;
  });

  if (failures) {
    fastify.addHook('onResponse', async (request: FastifyRequest, reply: FastifyReply) => {
      if (reply.statusCode === 401) await take(failures, request.ip);
    });
  }
}
