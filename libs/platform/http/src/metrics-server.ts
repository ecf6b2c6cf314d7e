import { createServer, type Server } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { register } from 'prom-client';
import { DomainError, envInt, envOptional } from '@stablepay/util';

/**
 * METRICS_PORT: when set, /metrics is served on a listener of its own on that port and the API port answers it 404,
 * so the scraper reaches it inside the cluster while the ingress, which routes to the API port only, never does.
 * Unset (the default, and the embedded run): /metrics stays on the API port.
 */
export function metricsPortFromEnv(env: Record<string, string | undefined>): number | undefined {
  return envOptional(env, 'METRICS_PORT') === undefined
    ? undefined
    : envInt(env, 'METRICS_PORT', 0, 0, 65535);
}

export interface MetricsServer {
  /** The port it listens on (the one asked for, or the one the system chose for 0). */
  readonly port: number;
  close(): Promise<void>;
}

const NOT_FOUND = JSON.stringify({
  error: { type: 'invalid_request', code: 'route_not_found', message: 'Unrecognized request URL.' },
});

/**
 * Serves prom-client's default registry (what the API port's /metrics serves) on `port`: `GET /metrics`, nothing
 * else. Plain node:http, no framework: nothing of the API (auth, rate limits, body parsing) belongs on it.
 */
export async function startMetricsServer(port: number, host: string): Promise<MetricsServer> {
  const server: Server = createServer((request, response) => {
    const path = (request.url ?? '').split('?')[0];
    if (path !== '/metrics' || (request.method !== 'GET' && request.method !== 'HEAD')) {
      response.writeHead(404, {
        'content-type': 'application/json; charset=utf-8',
        'cache-control': 'no-store',
      });
      response.end(NOT_FOUND);
      return;
    }
    register.metrics().then(
      (text) => {
        response.writeHead(200, { 'content-type': register.contentType, 'cache-control': 'no-store' });
        response.end(request.method === 'HEAD' ? undefined : text);
      },
      () => {
        response.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' });
        response.end('metrics unavailable\n');
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  return {
    port: typeof address === 'object' && address ? address.port : port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** The API port's /metrics answers 404 in the envelope, as an unknown route: it is served on METRICS_PORT instead. */
export function hideMetricsRoute(fastify: FastifyInstance): void {
  fastify.addHook('onRequest', (request, _reply, done) => {
    if (request.routeOptions.url !== '/metrics') return done();
    done(
      new DomainError({
        type: 'invalid_request',
        status: 404,
        code: 'route_not_found',
        message: 'Unrecognized request URL.',
      }),
    );
  });
}
