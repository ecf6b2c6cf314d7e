import type { FastifyInstance } from 'fastify';
import { collectDefaultMetrics, Counter, Histogram, register } from 'prom-client';

/**
 * What an SRE looks at first: request rate, errors and latency per route, and the process itself (CPU, memory,
 * event-loop lag, GC, open handles: prom-client's default metrics). Labels are the route pattern, never the raw URL
 * (ids in paths would make a series per resource), and the status class as well as the status.
 */
const requests =
  (register.getSingleMetric('stablepay_http_requests_total') as Counter<
    'method' | 'route' | 'status' | 'status_class'
  >) ??
  new Counter({
    name: 'stablepay_http_requests_total',
    help: 'HTTP requests answered, by method, route pattern and status',
    labelNames: ['method', 'route', 'status', 'status_class'] as const,
  });

const duration =
  (register.getSingleMetric('stablepay_http_request_duration_seconds') as Histogram<
    'method' | 'route' | 'status_class'
  >) ??
  new Histogram({
    name: 'stablepay_http_request_duration_seconds',
    help: 'Time from the request received to the response sent, by method and route pattern',
    labelNames: ['method', 'route', 'status_class'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  });

/** The route label of an answer Node's HTTP server wrote itself, not Fastify (see below). */
const NODE_HTTP_ROUTE = 'node_http';

/**
 * Counts an answer Node's HTTP server wrote itself, so no onResponse hook runs for it: the 417 to an unknown
 * Expect, and the 408/431/400 its parser and deadlines end a request with (client-errors.ts), whether or not
 * Fastify had begun routing it (a body that trickles past the request timeout). A slowloris
 * wave or a client sending broken requests shows in the same counter as every other answer. `method` is unknown
 * when the parser never got that far. No duration: there is no moment the request was received to measure from.
 */
export function countNodeHttpAnswer(status: number, method = 'unknown'): void {
  requests.inc({
    method,
    route: NODE_HTTP_ROUTE,
    status: String(status),
    status_class: `${Math.floor(status / 100)}xx`,
  });
}

let defaultMetricsStarted = false;

/** Counts every answered request (Fastify's own 404/413/503 too) and starts the process metrics once per process. */
export function installHttpMetrics(fastify: FastifyInstance): void {
  if (!defaultMetricsStarted) {
    defaultMetricsStarted = true;
    collectDefaultMetrics({ prefix: 'stablepay_' });
  }
  fastify.addHook('onResponse', (request, reply, done) => {
    // The matched pattern (`/subscriptions/:id/charge`); a request no route matched is one series, whatever its URL.
    const route = request.routeOptions.url ?? 'unmatched';
    const status = reply.statusCode;
    const statusClass = `${Math.floor(status / 100)}xx`;
    requests.inc({ method: request.method, route, status: String(status), status_class: statusClass });
    duration.observe({ method: request.method, route, status_class: statusClass }, reply.elapsedTime / 1000);
    done();
  });
}
