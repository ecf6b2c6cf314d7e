/**
 * The load of tools/bench-write/bench.ts, in a process of its own (forked by it): the floor's pg clients and the
 * HTTP clients of the command rows. Both sides of the comparison are driven from here, so the server process
 * measured by bench.ts runs only the server, and the floor pays the same client-process costs as the command
 * path. Each message asks for one row: once its connections are open and warm the process says `ready` and
 * waits for `go` (the parent reads its CPU figures in between), then answers with the row's latencies and this
 * process's CPU for the timed part.
 */
import { randomUUID } from 'node:crypto';
import * as http from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Client } from 'pg';
import { FLOOR_BODY, FLOOR_INSERT, openFloorClients } from './common';

export type LoadRequest =
  | { readonly kind: 'floor'; readonly url: string; readonly clients: number; readonly seconds: number }
  | {
      readonly kind: 'closed';
      readonly base: string;
      readonly key: string;
      readonly connections: number;
      readonly seconds: number;
    }
  | {
      readonly kind: 'paced';
      readonly base: string;
      readonly key: string;
      readonly rate: number;
      readonly seconds: number;
    };

export interface LoadResult {
  readonly count: number;
  readonly errors: number;
  readonly ms: number;
  readonly latencies: readonly number[];
  /** This (client) process's CPU during the row, ms. */
  readonly clientCpuMs: number;
  readonly clientSystemMs: number;
}

/** Tells the parent the row is warm and waits for its go. */
function ready(): Promise<void> {
  return new Promise((resolve) => {
    process.once('message', () => resolve());
    process.send?.({ ready: true });
  });
}

/** Runs `workers` loops of `once` for `seconds`, once the parent says go. */
async function closedLoop(
  workers: number,
  seconds: number,
  once: () => Promise<boolean>,
): Promise<LoadResult> {
  await ready();
  const cpu = process.cpuUsage();
  const latencies: number[] = [];
  let errors = 0;
  const start = performance.now();
  const end = start + seconds * 1000;
  await Promise.all(
    Array.from({ length: workers }, async () => {
      while (performance.now() < end) {
        const t = performance.now();
        if (await once()) latencies.push(performance.now() - t);
        else errors++;
      }
    }),
  );
  return { count: latencies.length, errors, ms: performance.now() - start, latencies, ...cpuSince(cpu) };
}

function cpuSince(cpu: NodeJS.CpuUsage): Pick<LoadResult, 'clientCpuMs' | 'clientSystemMs'> {
  const used = process.cpuUsage(cpu);
  return { clientCpuMs: (used.user + used.system) / 1000, clientSystemMs: used.system / 1000 };
}

/**
 * With BENCH_IDEMPOTENCY=1 every POST carries an Idempotency-Key of its own, as Stripe's client libraries send one
 * on every POST: the idempotency interceptor's rows are then part of each create.
 */
const KEYED = process.env['BENCH_IDEMPOTENCY'] === '1';

/** Keep-alive POST /subscription-checkouts; true when answered 201. */
export function poster(base: string, key: string, connections: number) {
  const url = new URL(base);
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
  const body = Buffer.from(JSON.stringify({ price: '1000', price_currency: 'USD' }));
  const post = (): Promise<number> =>
    new Promise((resolve, reject) => {
      const req = http.request(
        {
          host: url.hostname,
          port: url.port,
          path: '/subscription-checkouts',
          method: 'POST',
          agent,
          headers: {
            authorization: `Bearer ${key}`,
            'content-type': 'application/json',
            'content-length': String(body.length),
            ...(KEYED ? { 'idempotency-key': randomUUID() } : {}),
          },
        },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  return { post: async () => (await post()) === 201, close: () => agent.destroy() };
}

/**
 * The floor's connections stay open until the next row is asked for: the parent reads the CPU of the backends
 * serving them after the answer, and a backend that has exited can no longer be read.
 */
let floorClients: Client[] = [];

async function floorRow(request: Extract<LoadRequest, { kind: 'floor' }>) {
  const clients = await openFloorClients(request.url, request.clients);
  floorClients = clients;
  const idle = [...clients];
  return closedLoop(request.clients, request.seconds, async () => {
    // Each loop takes a client of its own for the call (as many loops as clients).
    const client = idle.pop();
    if (!client) throw new Error('more loops than clients');
    try {
      await client.query(FLOOR_INSERT, [FLOOR_BODY]);
    } finally {
      idle.push(client);
    }
    return true;
  });
}

async function closedRow(request: Extract<LoadRequest, { kind: 'closed' }>) {
  const p = poster(request.base, request.key, request.connections);
  try {
    // Warm-up: connections, JIT, the server's pools and caches.
    await Promise.all(Array.from({ length: request.connections }, () => p.post()));
    return await closedLoop(request.connections, request.seconds, p.post);
  } finally {
    p.close();
  }
}

/** Open loop: a request every 1/rate s whatever the answers do. */
async function pacedRow(request: Extract<LoadRequest, { kind: 'paced' }>) {
  const p = poster(request.base, request.key, 256);
  await ready();
  const cpu = process.cpuUsage();
  const latencies: number[] = [];
  let errors = 0;
  const total = Math.round(request.rate * request.seconds);
  const start = performance.now();
  const inflight: Promise<void>[] = [];
  for (let i = 0; i < total; i++) {
    const wait = start + (i * 1000) / request.rate - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    const t = performance.now();
    inflight.push(
      p.post().then(
        (ok) => {
          if (ok) latencies.push(performance.now() - t);
          else errors++;
        },
        () => {
          errors++;
        },
      ),
    );
  }
  await Promise.all(inflight);
  const ms = performance.now() - start;
  p.close();
  return { count: latencies.length, errors, ms, latencies, ...cpuSince(cpu) };
}

async function run(request: LoadRequest): Promise<LoadResult> {
  const previous = floorClients;
  floorClients = [];
  await Promise.all(previous.map((c) => c.end()));
  if (request.kind === 'floor') return floorRow(request);
  return request.kind === 'closed' ? closedRow(request) : pacedRow(request);
}

if (process.send) {
  // One row at a time: the parent waits for each answer before it asks for the next.
  process.on('message', (request: LoadRequest | { go: true }) => {
    if ('go' in request) return;
    run(request).then(
      (result) => process.send?.({ ok: true, result }),
      (error: unknown) => process.send?.({ ok: false, error: String((error as Error)?.stack ?? error) }),
    );
  });
  // The parent's end ends this process.
  process.on('disconnect', () => process.exit(0));
}
