import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import type { FastifyInstance } from 'fastify';
import { ConfigError, DomainError, envInt, JsonLogger, type LogLevel } from '@stablepay/util';
import { API_KEY_HASHES } from './api-key';
import { ErrorEnvelopeFilter } from './error-envelope.filter';
import { ReadinessRegistry } from './health';
import { parseJsonBody } from './json-body';
import { clientErrorHandler } from './client-errors';
import {
  installContentEncodingCheck,
  installExpectationAnswer,
  installHostCheck,
  unsupportedCharset,
} from './request-headers';
import { installHttpMetrics } from './http-metrics';
import { installIdleInterceptorSkip } from './idle-interceptors';
import { installRateLimits, type RateLimits } from './rate-limits';
import { installUrlStringCheck, urlStringsOptions } from './url-strings';
import { UnknownQueryInterceptor } from './query-parameters';
import { hideMetricsRoute } from './metrics-server';
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

/**
 * How long a stopping process stays in service after its stop signal while answering /ready with 503
 * (SHUTDOWN_DELAY_MS): the time a balancer needs to notice and stop sending new requests. 0 (the default, fine for
 * `npm start` and compose) closes the listener at once; behind a Kubernetes Service give it a few seconds.
 */
export function shutdownDelayMsFromEnv(env: Record<string, string | undefined>): number {
  return envInt(env, 'SHUTDOWN_DELAY_MS', 0, 0, 600_000);
}

/** Time for the consumers and the database pools to stop once the last request was answered. */
export const STOP_MARGIN_MS = 10_000;

/**
 * The longest a stop may take before the process exits anyway: the shutdown delay, then the longest request the
 * HTTP deadline lets run, then the margin. An orchestrator's grace period (Kubernetes terminationGracePeriodSeconds)
 * must be longer, or it kills the process while requests it accepted are still running.
 */
export function stopDeadlineMs(timeouts: HttpTimeouts, shutdownDelayMs: number): number {
  return shutdownDelayMs + timeouts.requestMs + STOP_MARGIN_MS;
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
  /** False when /metrics is served on its own port (METRICS_PORT): the API port then answers it 404. */
  readonly metricsOnApiPort?: boolean;
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
 * Only JSON bodies are parsed (strictly: see parseJsonBody), in UTF-8 only; any other media type or charset is 415
 * before a handler runs. An empty text/plain body stays acceptable: the hosted pages' buttons post an empty form.
 */
function installBodyParsers(fastify: FastifyInstance, bodyLimit: number): void {
  fastify.removeAllContentTypeParsers();
  fastify.addContentTypeParser('application/json', { parseAs: 'buffer', bodyLimit }, (req, body, done) => {
    const charsetRefusal = unsupportedCharset(req.headers['content-type']);
    if (charsetRefusal) return done(charsetRefusal, undefined);
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

const CLOSING_BODY = JSON.stringify({
  error: {
    type: 'api_error',
    code: 'service_unavailable',
    message: 'This server is shutting down; nothing was done. Retry the request.',
  },
});

/**
 * Once the server closes, a request that still arrives on an open connection (keep-alive, pipelined) runs nothing
 * and gets 503 in the envelope with `Retry-After: 1` and `Connection: close`: the client's retry opens a new
 * connection, which the balancer sends to a running instance. First hook of all: such a request costs nothing.
 */
function installClosingAnswer(fastify: FastifyInstance): void {
  let closing = false;
  fastify.addHook('preClose', (done) => {
    closing = true;
    done();
  });
  fastify.addHook('onRequest', (_request, reply, done) => {
    if (!closing) return done();
    void reply
      .status(503)
      .header('retry-after', '1')
      .header('connection', 'close')
      .header('content-type', 'application/json; charset=utf-8')
      .send(CLOSING_BODY);
  });
}

/**
 * Stops serving HTTP in order: not ready from now on (readiness answers 503), still serving while `delay` runs
 * (SHUTDOWN_DELAY_MS, the time the balancers take to stop sending), then the listener closes: no new connections,
 * the closing answer to new requests on open ones, and the requests in flight finish before this resolves.
 */
export async function drainHttpApp(app: NestFastifyApplication, delay: Promise<void>): Promise<void> {
  try {
    app.get(ReadinessRegistry, { strict: false }).markStopping();
  } catch {
    // An application without the health module has no readiness to withdraw.
  }
  await delay;
  await app.getHttpAdapter().getInstance().close();
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
    // Our own closing answer (installClosingAnswer) replaces Fastify's bare 503 body.
    return503OnClosing: false,
    // Timeouts and unparsable requests end before any route: answered in the envelope too (client-errors.ts).
    clientErrorHandler,
    ...urlStringsOptions,
    ...(options.trustProxy !== undefined
      ? { trustProxy: typeof options.trustProxy === 'number' ? options.trustProxy : [...options.trustProxy] }
      : {}),
    requestTimeout: t.requestMs,
    keepAliveTimeout: t.keepAliveMs,
    connectionTimeout: t.idleMs,
    // Node checks request and header deadlines on an interval (30 s by default): a deadline is only as sharp as it.
    http: {
      // Node's own check answers a bare 400 before any hook runs: installHostCheck refuses in the envelope.
      requireHostHeader: false,
      requestTimeout: t.requestMs,
      headersTimeout: Math.min(t.headersMs, t.requestMs),
      connectionsCheckingInterval: Math.max(100, Math.min(1000, Math.floor(t.headersMs / 2))),
    },
  });
  const fastify = adapter.getInstance();
  installIdleInterceptorSkip();
  installClosingAnswer(fastify);
  installHostCheck(fastify);
  installExpectationAnswer(fastify.server);
  installBodyParsers(fastify, bodyLimit);
  installContentEncodingCheck(fastify);
  installHttpMetrics(fastify);
  fastify.decorateRequest(API_KEY_HASHES, null);
  if (options.rateLimits) installRateLimits(fastify, options.rateLimits);
  installUrlStringCheck(fastify);
  if (options.metricsOnApiPort === false) hideMetricsRoute(fastify);
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
  // Global interceptors given here run before the modules' APP_INTERCEPTORs (the Idempotency-Key interceptor).
  app.useGlobalInterceptors(new UnknownQueryInterceptor());
  return app;
}
