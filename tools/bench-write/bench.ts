/**
 * The write path beside the database's own insert rate, in one run on one database server:
 *   DATABASE_URL=postgres://... node --max-semi-space-size=32 -r @swc-node/register tools/bench-write/bench.ts
 * (the young generation the services are deployed with: deploy/Dockerfile's NODE_OPTIONS; the header says which ran)
 *
 *   1. floor: BENCH_CLIENTS (8) pg clients doing single-row autocommit INSERTs of a jsonb row, for BENCH_SECONDS;
 *   2. the command path: HTTP `POST /subscription-checkouts` (validation, API-key auth, aggregate, event store
 *      append, projection, read-your-writes wait, response) against the gateway + subscriptions + webhook services
 *      in one process, with 8 and with 64 keep-alive connections, for BENCH_SECONDS each;
 *   3. projection lag: BENCH_RATE (500) commands per second paced open-loop for BENCH_SECONDS, and the projection's
 *      lag (stored -> projected, from the prom-client histogram) plus the HTTP latency at that rate.
 * Printed: rate, p50/p99, and the ratio to the floor. The load of every row (the floor's pg clients, the HTTP
 * clients) comes from a child process (load-client.ts), so this process is the server alone and both sides of
 * the ratio are driven the same way. BENCH_IDEMPOTENCY=1 sends an Idempotency-Key of its own with every POST (as
 * Stripe's client libraries do). Figures: docs/benchmarks.md. Without DATABASE_URL the stack runs on a
 * private PGlite (the floor is then PGlite's). Diagnostics of the command rows: the event loop's delay and the GC
 * pauses of this (server) process, and with BENCH_CPU_PROFILE=<file> a CPU profile of their timed parts only
 * (`<file>-<connections>.cpuprofile`, for Chrome DevTools or a script).
 */
import 'reflect-metadata';
import { fork } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';
import * as path from 'node:path';
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
import { num, percentile } from './common';
import type { LoadRequest, LoadResult } from './load-client';

const SECONDS = num('BENCH_SECONDS', 5);
const CLIENTS = num('BENCH_CLIENTS', 8);
const RATE = num('BENCH_RATE', 500);
/** The closed-loop rows' connection counts (`8,64`), and whether the paced row runs (`BENCH_PACED=0` skips it). */
const CONNECTIONS = (process.env['BENCH_CONNECTIONS'] || '8,64').split(',').map(Number);
const PACED = process.env['BENCH_PACED'] !== '0';
const ADMIN_TOKEN = 'bench-admin-token-0123456789-0123456789';

/**
 * Statements sent by this process (BENCH_QUERIES=1 prints them per request, by their first words): the
 * load-independent part of the cost, beside the CPU figures. Counted by the full text, which is one map lookup
 * (normalizing each statement's text on the hot path cost ~1.5% of the process's CPU); grouped when printed.
 */
const queryCounts = new Map<string, number>();
if (process.env['BENCH_QUERIES'] === '1') {
  const original = Client.prototype.query as (...args: unknown[]) => unknown;
  Client.prototype.query = function (this: Client, ...args: unknown[]) {
    const first = args[0];
    const text = typeof first === 'string' ? first : (first as { text?: string } | null)?.text;
    if (typeof text === 'string') queryCounts.set(text, (queryCounts.get(text) ?? 0) + 1);
    return original.apply(this, args);
  } as typeof Client.prototype.query;
}

/** queryCounts by the statements' first words. */
function statementsByFirstWords(): Map<string, number> {
  const grouped = new Map<string, number>();
  for (const [text, n] of queryCounts) {
    const key = text.replace(/\s+/g, ' ').trim().slice(0, 90);
    grouped.set(key, (grouped.get(key) ?? 0) + n);
  }
  return grouped;
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

/**
 * The load-client process: `row` asks it for one row and resolves with the row's figures; `atReady` runs once the
 * row's connections are warm and before its timed part starts (this process reads its CPU figures there).
 */
function loadClient() {
  const child = fork(path.join(__dirname, 'load-client.ts'), [], {
    execArgv: ['-r', '@swc-node/register'],
    stdio: 'inherit',
  });
  const row = (request: LoadRequest, atReady: () => Promise<void>): Promise<LoadResult> =>
    new Promise((resolve, reject) => {
      const done = (settle: () => void) => {
        child.off('message', onMessage);
        child.off('exit', onExit);
        settle();
      };
      const onMessage = (m: { ready?: true; ok?: boolean; result?: LoadResult; error?: string }) => {
        if (m.ready) {
          atReady().then(
            () => child.send({ go: true }),
            (error: unknown) => done(() => reject(error)),
          );
          return;
        }
        done(() => (m.ok && m.result ? resolve(m.result) : reject(new Error(m.error))));
      };
      const onExit = (code: number | null) =>
        done(() => reject(new Error(`the load client exited (${code})`)));
      child.on('message', onMessage);
      child.on('exit', onExit);
      child.send(request);
    });
  return { row, close: () => child.disconnect() };
}

/** GC pauses of this process (ms, each) while `gcPauses.on`. */
const gcPauses = { on: false, pauses: [] as number[], major: 0 };
new PerformanceObserver((list) => {
  if (!gcPauses.on) return;
  for (const entry of list.getEntries()) {
    gcPauses.pauses.push(entry.duration);
    // NODE_PERFORMANCE_GC_MAJOR (mark-sweep-compact); the rest are scavenges and incremental steps.
    if ((entry as { detail?: { kind?: number } }).detail?.kind === 2) gcPauses.major++;
  }
}).observe({ entryTypes: ['gc'] });

/**
 * The inspector's CPU profiler over one row's timed part (BENCH_CPU_PROFILE), or with BENCH_HEAP_PROFILE=1 its
 * sampling heap profiler counting every allocation, collected or not (`.heapprofile`: where the garbage comes from).
 */
function cpuProfiler(file: string | undefined) {
  if (!file) return { start: async () => undefined, stop: async (_label: string) => undefined };
  const heap = process.env['BENCH_HEAP_PROFILE'] === '1';
  const session = new Session();
  session.connect();
  const post = (method: string, params?: object) =>
    new Promise<unknown>((resolve, reject) =>
      session.post(method, params ?? {}, (error, result) => (error ? reject(error) : resolve(result))),
    );
  return {
    start: async () => {
      if (heap) {
        await post('HeapProfiler.enable');
        await post('HeapProfiler.startSampling', {
          samplingInterval: 4096,
          includeObjectsCollectedByMajorGC: true,
          includeObjectsCollectedByMinorGC: true,
        });
        return;
      }
      await post('Profiler.enable');
      await post('Profiler.setSamplingInterval', { interval: 200 });
      await post('Profiler.start');
    },
    stop: async (label: string) => {
      if (heap) {
        const { profile } = (await post('HeapProfiler.stopSampling')) as { profile: unknown };
        writeFileSync(`${file}-${label}.heapprofile`, JSON.stringify(profile));
        return;
      }
      const { profile } = (await post('Profiler.stop')) as { profile: unknown };
      writeFileSync(`${file}-${label}.cpuprofile`, JSON.stringify(profile));
    },
  };
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
  const load = loadClient();
  try {
    const res = await fetch(`${service.url}/admin/merchants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Bench Merchant', mode: 'test' }),
    });
    const key = String(((await res.json()) as Record<string, unknown>)['api_key']);
    const probe = await fetch(`${service.url}/subscription-checkouts`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ price: '1000', price_currency: 'USD' }),
    });
    if (probe.status !== 201) throw new Error('POST /subscription-checkouts does not answer 201 here');

    const dbName = new URL(database.url).pathname.slice(1);
    /** One row from the load client, with this process's and the database backends' CPU over its timed part. */
    const profiler = cpuProfiler(process.env['BENCH_CPU_PROFILE']);
    const measured = async (request: LoadRequest, settle = 0) => {
      let dbBefore: number | undefined;
      let cpu = process.cpuUsage();
      const loopDelay = monitorEventLoopDelay({ resolution: 5 });
      const profiled = request.kind === 'closed' ? String(request.connections) : undefined;
      const result = await load.row(request, async () => {
        dbBefore = await databaseCpuMs(database.url, dbName);
        queryCounts.clear();
        if (profiled) await profiler.start();
        gcPauses.pauses = [];
        gcPauses.major = 0;
        gcPauses.on = true;
        loopDelay.enable();
        cpu = process.cpuUsage();
      });
      const used = process.cpuUsage(cpu);
      loopDelay.disable();
      gcPauses.on = false;
      if (profiled) await profiler.stop(profiled);
      // Let the projection and the webhook recorder finish the row's events before the backends are read.
      if (settle > 0) await new Promise((resolve) => setTimeout(resolve, settle));
      const dbAfter = await databaseCpuMs(database.url, dbName);
      const databaseMs = dbBefore !== undefined && dbAfter !== undefined ? dbAfter - dbBefore : undefined;
      const per = (ms: number) => (ms / Math.max(1, result.count)).toFixed(3);
      const cpuNote =
        `server process ${per((used.user + used.system) / 1000)} ms (${per(used.system / 1000)} in the kernel), ` +
        `client process ${per(result.clientCpuMs)} ms` +
        (databaseMs !== undefined ? `, database backends ${per(databaseMs)} ms` : '');
      const gc = gcPauses.pauses;
      const loopNote =
        `event loop delay p50 ${(loopDelay.percentile(50) / 1e6).toFixed(1)} ms, p99 ${(loopDelay.percentile(99) / 1e6).toFixed(1)} ms, ` +
        `max ${(loopDelay.max / 1e6).toFixed(1)} ms; GC ${gc.length} pauses (${gcPauses.major} major), ${gc.reduce((a, b) => a + b, 0).toFixed(0)} ms in all, ` +
        `longest ${Math.max(0, ...gc).toFixed(1)} ms`;
      return { result, cpuNote: request.kind === 'floor' ? cpuNote : `${cpuNote}\n  ${loopNote}` };
    };

    const floorRow = await measured({ kind: 'floor', url: database.url, clients: CLIENTS, seconds: SECONDS });
    rows.push({ name: `floor: single-row INSERT jsonb, ${CLIENTS} clients`, ...floorRow.result });
    cpuNotes.push(`floor, CPU per INSERT: ${floorRow.cpuNote}`);
    for (const connections of CONNECTIONS) {
      const { result, cpuNote } = await measured(
        { kind: 'closed', base: service.url, key, connections, seconds: SECONDS },
        500,
      );
      rows.push({ name: `POST /subscription-checkouts, ${connections} connections`, ...result });
      cpuNotes.push(`${connections} connections, CPU per request: ${cpuNote}`);
      if (queryCounts.size > 0) {
        const grouped = statementsByFirstWords();
        const total = [...grouped.values()].reduce((a, b) => a + b, 0);
        cpuNotes.push(`  statements per request: ${(total / Math.max(1, result.count)).toFixed(2)}`);
        for (const [text, n] of [...grouped].sort((a, b) => b[1] - a[1]))
          cpuNotes.push(`  ${(n / Math.max(1, result.count)).toFixed(2).padStart(6)}  ${text}`);
      }
    }

    // Projection lag at a paced rate (open loop: a request every 1/RATE s whatever the answers do).
    let lag: { p50: string; p99: string; count: number } | undefined;
    if (PACED) {
      const lagBefore = await lagSnapshot();
      const { result } = await measured({
        kind: 'paced',
        base: service.url,
        key,
        rate: RATE,
        seconds: SECONDS,
      });
      rows.push({ name: `paced ${RATE}/s for ${SECONDS}s (HTTP latency)`, ...result });
      lag = lagDelta(lagBefore, await lagSnapshot());
    }

    const floorRate = rows[0] ? (rows[0].count / rows[0].ms) * 1000 : Number.NaN;
    const youngGeneration =
      [...process.execArgv, ...(process.env['NODE_OPTIONS'] ?? '').split(/\s+/)].find((a) =>
        a.startsWith('--max-semi-space-size'),
      ) ?? "V8's default young generation (not as deployed)";
    console.log(
      `\nwrite path, ${SECONDS}s per row, database ${new URL(database.url).host} (${database.kind}), server ${youngGeneration}${
        process.env['BENCH_IDEMPOTENCY'] === '1' ? ', an Idempotency-Key on every POST' : ''
      }`,
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
    load.close();
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
