import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import type { FastifyInstance } from 'fastify';
import { ConfigError, DomainError, envInt, JsonLogger, type LogLevel } from '@stablepay/util';
import { ErrorEnvelopeFilter } from './error-envelope.filter';
import { parseJsonBody } from './json-body';
import { installRateLimits, type RateLimits } from './rate-limits';
import { createValidationPipe } from './validation';

/** How long a client may take; a slow or idle client is cut so it cannot hold a connection slot. */
export interface HttpTimeouts {
  /** Whole request, headers and body, from the first byte (408 after). */
  readonly requestMs: number;
  /** Request headers, from the first byte (408 after); at most requestMs. */
  readonly headersMs: number;
  /** An idle keep-alive connection between requests. */
  readonly keepAliveMs: number;
  /** A connection on which nothing moves at all, whatever the state (closed without a response). */
  readonly idleMs: number;
}

export const DEFAULT_HTTP_TIMEOUTS: HttpTimeouts = {
  requestMs: 30_000,
  headersMs: 10_000,
  keepAliveMs: 5_000,
  idleMs: 60_000,
};

export function httpTimeoutsFromEnv(env: Record<string, string | undefined>): HttpTimeouts {
  const d = DEFAULT_HTTP_TIMEOUTS;
  const max = 3_600_000;
  const requestMs = envInt(env, 'HTTP_REQUEST_TIMEOUT_MS', d.requestMs, 100, max);
  return {
    requestMs,
    headersMs: envInt(env, 'HTTP_HEADERS_TIMEOUT_MS', Math.min(d.headersMs, requestMs), 100, requestMs),
    keepAliveMs: envInt(env, 'HTTP_KEEP_ALIVE_TIMEOUT_MS', d.keepAliveMs, 100, max),
    idleMs: envInt(env, 'HTTP_IDLE_TIMEOUT_MS', d.idleMs, 100, max),
  };
}

export interface HttpAppOptions {
  /** Service name in every log line. */
  readonly service: string;
  readonly logLevel?: LogLevel;
  /** Request body limit in bytes (default 1 MiB): larger bodies get 413 in the envelope. */
  readonly bodyLimit?: number;
  readonly timeouts?: HttpTimeouts;
  /** Per-key, per-source and failed-authentication limits (none when absent). */
  readonly rateLimits?: RateLimits;
  /**
   * Which proxies' X-Forwarded-For to believe for the source address (rate limits, logs): a hop count, or
   * addresses/CIDRs. Default none: the source is the peer of the socket.
   */
  readonly trustProxy?: number | readonly string[];
}

/** TRUST_PROXY: unset (trust no proxy), a hop count (`1`), or comma-separated addresses/CIDRs of the proxies. */
export function trustProxyFromEnv(env: Record<string, string | undefined>): number | string[] | undefined {
  const raw = env['TRUST_PROXY']?.trim();
  if (!raw) return undefined;
  if (/^[0-9]{1,2}$/.test(raw)) return Number(raw);
  const entries = raw.split(',').map((e) => e.trim());
  if (entries.some((e) => !/^[0-9A-Fa-f:.]+(\/[0-9]{1,3})?$/.test(e))) {
    throw new ConfigError(
      'environment variable TRUST_PROXY must be a hop count or comma-separated proxy addresses/CIDRs',
    );
  }
  return entries;
}

const unsupportedMediaType = (): DomainError =>
  new DomainError({
    type: 'invalid_request',
    status: 415,
    code: 'unsupported_media_type',
    message: 'Send the request body as application/json.',
  });

/**
 * Only JSON bodies are parsed (strictly: see parseJsonBody); any other media type is 415 before a handler runs.
 * An empty text/plain body stays acceptable: the hosted pages' buttons post an empty form.
 */
function installBodyParsers(fastify: FastifyInstance, bodyLimit: number): void {
  fastify.removeAllContentTypeParsers();
  fastify.addContentTypeParser('application/json', { parseAs: 'buffer', bodyLimit }, (_req, body, done) => {
    try {
      done(null, parseJsonBody(body as Buffer));
    } catch (error) {
      done(error as Error, undefined);
    }
  });
  fastify.addContentTypeParser('text/plain', { parseAs: 'buffer', bodyLimit }, (_req, body, done) => {
    if ((body as Buffer).length === 0) done(null, undefined);
    else done(unsupportedMediaType(), undefined);
  });
  fastify.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit }, (_req, _body, done) =>
    done(unsupportedMediaType(), undefined),
  );
}

/**
 * Every service's HTTP server: Fastify, JSON logs, the error envelope for every error (including Fastify's
 * own: malformed JSON, oversized bodies, unknown routes) and the validation pipe. Signals are the caller's:
 * `runMain` (apps) and the embedded launcher close the app on SIGTERM, which runs every shutdown hook.
 */
export async function createHttpApp(
  module: unknown,
  options: HttpAppOptions,
): Promise<NestFastifyApplication> {
  const bodyLimit = options.bodyLimit ?? 1024 * 1024;
  const t = options.timeouts ?? DEFAULT_HTTP_TIMEOUTS;
  const adapter = new FastifyAdapter({
    bodyLimit,
    return503OnClosing: true,
    ...(options.trustProxy !== undefined
      ? { trustProxy: typeof options.trustProxy === 'number' ? options.trustProxy : [...options.trustProxy] }
      : {}),
    requestTimeout: t.requestMs,
    keepAliveTimeout: t.keepAliveMs,
    connectionTimeout: t.idleMs,
    // Node checks request and header deadlines on an interval (30 s by default): a deadline is only as sharp as it.
    http: {
      requestTimeout: t.requestMs,
      headersTimeout: Math.min(t.headersMs, t.requestMs),
      connectionsCheckingInterval: Math.max(100, Math.min(1000, Math.floor(t.headersMs / 2))),
    },
  });
  const fastify = adapter.getInstance();
  installBodyParsers(fastify, bodyLimit);
  if (options.rateLimits) installRateLimits(fastify, options.rateLimits);
  // API responses are per merchant and per moment: never cached, never sniffed. Routes that set their own
  // Cache-Control (the hosted pages) keep it.
  fastify.addHook('onSend', async (_request, reply, payload) => {
    if (!reply.hasHeader('cache-control')) void reply.header('cache-control', 'no-store');
    void reply.header('x-content-type-options', 'nosniff');
    return payload;
  });
  const app = await NestFactory.create<NestFastifyApplication>(module as never, adapter, {
    logger: new JsonLogger(options.service, options.logLevel ?? 'log'),
    abortOnError: false,
    bodyParser: false,
  });
  app.useGlobalFilters(new ErrorEnvelopeFilter());
  app.useGlobalPipes(createValidationPipe());
  return app;
}
