/**
 * The write path beside the database's own insert rate, in one run on one database server:
 *   DATABASE_URL=postgres://... node -r @swc-node/register tools/bench-write/bench.ts
 *
 *   1. floor: BENCH_CLIENTS (8) pg clients doing single-row autocommit INSERTs of a jsonb row, for BENCH_SECONDS;
 *   2. the command path: HTTP `POST /subscription-checkouts` (validation, API-key auth, aggregate, event store
 *      append, projection, read-your-writes wait, response) against the gateway + subscriptions + webhook services
 *      in one process, with 8 and with 64 keep-alive connections, for BENCH_SECONDS each;
 *   3. projection lag: BENCH_RATE (500) commands per second paced open-loop for BENCH_SECONDS, and the projection's
 *      lag (stored -> projected, from the prom-client histogram) plus the HTTP latency at that rate.
 * Printed: rate, p50/p99, and the ratio to the floor. Figures: docs/benchmarks.md. Without DATABASE_URL the stack
 * runs on a private PGlite (the floor is then PGlite's).
 */
import 'reflect-metadata';
import * as http from 'node:http';
import { performance } from 'node:perf_hooks';
import { readFileSync } from 'node:fs';
import { Client } from 'pg';
import { register } from 'prom-client';
import { topicForCategory } from '@stablepay/event-bus';
import { gatewayService } from '@stablepay/gateway-service';
import { merchantsConfigFromEnv } from '@stablepay/merchants-service';
import { platformConfigFromEnv, startService } from '@stablepay/runtime';
import {
  subscriptionCheckoutWebhook,
  subscriptionsConfigFromEnv,
  subscriptionsService,
} from '@stablepay/subscriptions-service';
import { createTestDatabase } from '@stablepay/testing';
import {
  domainEventSource,
  dispatchOptionsFromEnv,
  webhookDispatchService,
} from '@stablepay/webhook-dispatch-service';
import { FLOOR_BODY, FLOOR_INSERT, num, openFloorClients, percentile } from './common';

const SECONDS = num('BENCH_SECONDS', 5);
const CLIENTS = num('BENCH_CLIENTS', 8);
const RATE = num('BENCH_RATE', 500);
/** The closed-loop rows' connection counts (`8,64`), and whether the paced row runs (`BENCH_PACED=0` skips it). */
const CONNECTIONS = (process.env['BENCH_CONNECTIONS'] || '8,64').split(',').map(Number);
const PACED = process.env['BENCH_PACED'] !== '0';
const ADMIN_TOKEN = 'bench-admin-token-0123456789';

/**
 * Statements sent by this process, counted by their first words (BENCH_QUERIES=1 prints them per request): the
 * load-independent part of the cost, beside the CPU figures.
 */
const queryCounts = new Map<string, number>();
if (process.env['BENCH_QUERIES'] === '1') {
  const original = Client.prototype.query as (...args: unknown[]) => unknown;
  Client.prototype.query = function (this: Client, ...args: unknown[]) {
    const first = args[0];
    const text = typeof first === 'string' ? first : (first as { text?: string } | null)?.text;
    if (typeof text === 'string') {
      const key = text.replace(/\s+/g, ' ').trim().slice(0, 90);
      queryCounts.set(key, (queryCounts.get(key) ?? 0) + 1);
    }
    return original.apply(this, args);
  } as typeof Client.prototype.query;
}

/**
 * CPU (user + system, ms) used so far by the PostgreSQL backends serving `database` (read from /proc, so only when
 * the server runs on this machine; undefined otherwise). The pools keep their connections, so the backends of a
 * row are the same before and after it.
 */
async function databaseCpuMs(url: string, database: string): Promise<number | undefined> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ pid: number }>(
      'SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
      [database],
    );
    const tick = 10; // ms per clock tick (USER_HZ 100 on Linux)
    let total = 0;
    for (const { pid } of rows) {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
        const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        total += (Number(fields[11]) + Number(fields[12])) * tick;
      } catch {
        return undefined;
      }
    }
    return total;
  } finally {
    await client.end();
  }
}

interface Row {
  readonly name: string;
  readonly count: number;
  readonly errors: number;
  readonly ms: number;
  readonly latencies: readonly number[];
}

/** Runs `workers` loops of `once` until the time is up. */
async function closedLoop(workers: number, once: () => Promise<boolean>): Promise<Omit<Row, 'name'>> {
  const latencies: number[] = [];
  let errors = 0;
  const start = performance.now();
  const end = start + SECONDS * 1000;
  await Promise.all(
    Array.from({ length: workers }, async () => {
      while (performance.now() < end) {
        const t = performance.now();
        if (await once()) latencies.push(performance.now() - t);
        else errors++;
      }
    }),
  );
  return { count: latencies.length, errors, ms: performance.now() - start, latencies };
}

async function floor(url: string): Promise<Row & { databaseMs: number | undefined }> {
  const dbName = new URL(url).pathname.slice(1);
  const clients = await openFloorClients(url, CLIENTS);
  const idle = [...clients];
  const dbBefore = await databaseCpuMs(url, dbName);
  const result = await closedLoop(CLIENTS, async () => {
    // Each loop takes a client of its own for the call (CLIENTS loops, CLIENTS clients).
    const client = idle.pop();
    if (!client) throw new Error('more loops than clients');
    try {
      await client.query(FLOOR_INSERT, [FLOOR_BODY]);
    } finally {
      idle.push(client);
    }
    return true;
  });
  const dbAfter = await databaseCpuMs(url, dbName);
  await Promise.all(clients.map((c) => c.end()));
  const databaseMs = dbBefore !== undefined && dbAfter !== undefined ? dbAfter - dbBefore : undefined;
  return { name: `floor: single-row INSERT jsonb, ${CLIENTS} clients`, ...result, databaseMs };
}

function poster(base: string, key: string, connections: number) {
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

async function main(): Promise<void> {
  const database = await createTestDatabase();
  const env: Record<string, string | undefined> = {
    ...process.env,
    DATABASE_URL: database.url,
    PORT: '0',
    ADMIN_TOKEN,
    LOG_LEVEL: 'error',
    SANDBOX_RATES: 'USD/USDC=1,USD/USDT=1',
    // Every service in this one process, as npm start composes them: commands stay in-process.
    COMMAND_TRANSPORT: 'in-process',
  };
  const platform = platformConfigFromEnv(env, { port: 0 });
  const merchants = merchantsConfigFromEnv(
    { ALLOW_LOCAL_WEBHOOKS: 'true', ...env },
    { allowEphemeralKey: true },
  );
  const service = await startService({ ...platform, host: '127.0.0.1' }, [
    gatewayService(merchants),
    subscriptionsService(subscriptionsConfigFromEnv(env, { localChains: [] })),
    webhookDispatchService({
      merchants,
      sources: [
        domainEventSource({
          name: 'subscription-checkouts',
          topic: topicForCategory('subscriptionCheckout'),
          // No charge ledger here: only created checkouts are mapped (a completion would show its facts' charge).
          map: (event, history) => subscriptionCheckoutWebhook(event, history),
        }),
      ],
      dispatch: dispatchOptionsFromEnv(env),
    }),
  ]);
  const rows: Row[] = [];
  const cpuNotes: string[] = [];
  try {
    const res = await fetch(`${service.url}/admin/merchants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Bench Merchant', mode: 'test' }),
    });
    const key = String(((await res.json()) as Record<string, unknown>)['api_key']);
    const probe = poster(service.url, key, 1);
    if (!(await probe.post())) throw new Error('POST /subscription-checkouts does not answer 201 here');
    probe.close();

    const dbName = new URL(database.url).pathname.slice(1);
    const floorCpu = process.cpuUsage();
    const floorRow = await floor(database.url);
    const floorUsed = process.cpuUsage(floorCpu);
    rows.push(floorRow);
    cpuNotes.push(
      `floor: ${((floorUsed.user + floorUsed.system) / 1000 / floorRow.count).toFixed(3)} ms of this process's CPU per INSERT` +
        (floorRow.databaseMs !== undefined
          ? `, ${(floorRow.databaseMs / floorRow.count).toFixed(3)} ms of the database backends' CPU`
          : ''),
    );
    for (const connections of CONNECTIONS) {
      const p = poster(service.url, key, connections);
      // Warm-up: JIT, pools, caches.
      await Promise.all(Array.from({ length: connections }, () => p.post()));
      const dbBefore = await databaseCpuMs(database.url, dbName);
      queryCounts.clear();
      const cpu = process.cpuUsage();
      const result = await closedLoop(connections, p.post);
      const used = process.cpuUsage(cpu);
      // Let the projection and the webhook recorder finish this row's events before the backends are read.
      await new Promise((resolve) => setTimeout(resolve, 500));
      const dbAfter = await databaseCpuMs(database.url, dbName);
      p.close();
      rows.push({ name: `POST /subscription-checkouts, ${connections} connections`, ...result });
      const per = (ms: number) => (ms / Math.max(1, result.count)).toFixed(2);
      cpuNotes.push(
        `${connections} connections: ${per((used.user + used.system) / 1000)} ms of this process's CPU per request (${per(used.system / 1000)} of it in the kernel; client and server share it)` +
          (dbBefore !== undefined && dbAfter !== undefined
            ? `, ${per(dbAfter - dbBefore)} ms of the database backends' CPU`
            : ''),
      );
      if (queryCounts.size > 0) {
        const total = [...queryCounts.values()].reduce((a, b) => a + b, 0);
        cpuNotes.push(`  statements per request: ${(total / Math.max(1, result.count)).toFixed(2)}`);
        for (const [text, n] of [...queryCounts].sort((a, b) => b[1] - a[1]))
          cpuNotes.push(`  ${(n / Math.max(1, result.count)).toFixed(2).padStart(6)}  ${text}`);
      }
    }

    // Projection lag at a paced rate (open loop: a request every 1/RATE s whatever the answers do).
    let lag: { p50: string; p99: string; count: number } | undefined;
    if (PACED) {
      const lagBefore = await lagSnapshot();
      const p = poster(service.url, key, 256);
      const latencies: number[] = [];
      let errors = 0;
      const total = Math.round(RATE * SECONDS);
      const start = performance.now();
      const inflight: Promise<void>[] = [];
      for (let i = 0; i < total; i++) {
        const due = start + (i * 1000) / RATE;
        const wait = due - performance.now();
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
        const t = performance.now();
        inflight.push(
          p.post().then((ok) => {
            if (ok) latencies.push(performance.now() - t);
            else errors++;
          }),
        );
      }
      await Promise.all(inflight);
      const ms = performance.now() - start;
      p.close();
      rows.push({
        name: `paced ${RATE}/s for ${SECONDS}s (HTTP latency)`,
        count: latencies.length,
        errors,
        ms,
        latencies,
      });
      lag = lagDelta(lagBefore, await lagSnapshot());
    }

    const floorRate = rows[0] ? (rows[0].count / rows[0].ms) * 1000 : Number.NaN;
    console.log(
      `\nwrite path, ${SECONDS}s per row, database ${new URL(database.url).host} (${database.kind})`,
    );
    console.log(
      'row'.padEnd(52),
      'ops/s'.padStart(8),
      'ratio'.padStart(7),
      'p50 ms'.padStart(8),
      'p99 ms'.padStart(8),
      'errors'.padStart(7),
    );
    for (const row of rows) {
      const rate = (row.count / row.ms) * 1000;
      console.log(
        row.name.padEnd(52),
        rate.toFixed(0).padStart(8),
        (rate / floorRate).toFixed(3).padStart(7),
        percentile(row.latencies, 50).toFixed(1).padStart(8),
        percentile(row.latencies, 99).toFixed(1).padStart(8),
        String(row.errors).padStart(7),
      );
    }
    for (const note of cpuNotes) console.log(note);
    if (lag)
      console.log(
        `projection lag at ${RATE}/s (subscription checkouts, stored -> projected): p50 <= ${lag.p50} ms, p99 <= ${lag.p99} ms over ${lag.count} events`,
      );
  } finally {
    await service.stop();
    if (process.env['BENCH_KEEP_DATABASE'] === '1') console.log(`database kept: ${database.url}`);
    else await database.drop();
  }
}

type Buckets = Map<number, number>;

/** The cumulative buckets of the subscription checkout projection's lag histogram. */
async function lagSnapshot(): Promise<Buckets> {
  const metric = await register.getSingleMetric('stablepay_projection_lag_seconds')?.get();
  const buckets: Buckets = new Map();
  for (const v of metric?.values ?? []) {
    if (v.labels['projection'] !== 'subscriptions.subscription-checkout-projection') continue;
    if ((v as { metricName?: string }).metricName !== 'stablepay_projection_lag_seconds_bucket') continue;
    const le = v.labels['le'];
    buckets.set(le === '+Inf' ? Infinity : Number(le), v.value);
  }
  return buckets;
}

/** Percentile upper bounds (bucket edges, ms) of the events observed between two snapshots. */
function lagDelta(before: Buckets, after: Buckets): { p50: string; p99: string; count: number } {
  const edges = [...after.keys()].sort((a, b) => a - b);
  const counts = edges.map((le) => (after.get(le) ?? 0) - (before.get(le) ?? 0));
  const total = counts[counts.length - 1] ?? 0;
  const at = (q: number): string => {
    const i = counts.findIndex((c) => c >= q * total);
    const le = edges[i] ?? Infinity;
    return le === Infinity ? 'inf' : String(le * 1000);
  };
  return { p50: at(0.5), p99: at(0.99), count: total };
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
