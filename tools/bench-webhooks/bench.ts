/**
 * Webhook delivery throughput, side by side with the physical limit of this machine:
 *   node -r @swc-node/register tools/bench-webhooks/bench.ts
 *
 * One receiver (tools/bench-webhooks/receiver.js, its own process, 204 after reading and parsing each body) and,
 * in the same run:
 *   1. a bare HTTP POST loop: keep-alive node:http, BENCH_CONCURRENCY requests in flight, no database, no signing;
 *   2. the dispatcher draining a backlog of BENCH_EVENTS due events (claim with fairness, settings, signing with the
 *      SDK, SSRF-checked send, group-committed results) - delivery alone;
 *   each of 1 and 2 after a run of the same size that is not measured (connections, JIT, query plans: a service
 *   in production is warm, and a cold dispatcher's first deliveries cost about twice the CPU each);
 *   3. the dispatcher end to end: BENCH_EVENTS domain events appended to the event store, consumed from the bus by
 *      the recorder, recorded, claimed and delivered.
 * Printed per row: deliveries per second, and p50 / p99 latency of one POST as the sender saw it; row 3 adds the
 * time from append to arrival at the receiver. The database is DATABASE_URL (a throwaway database on it) or a
 * private PGlite. BENCH_MERCHANTS merchants share the events; BENCH_PER_MERCHANT caps each one's slots; BENCH_DEBUG=1
 * prints the time spent in the claim, result-write and record statements every second. Figures: docs/benchmarks.md.
 */
import 'reflect-metadata';
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import * as http from 'node:http';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import * as inspector from 'node:inspector/promises';
import { createInterface } from 'node:readline';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { EVENT_STORE } from '@stablepay/aggregate';
import { type BusMessage, topicForCategory } from '@stablepay/event-bus';
import type { EventStore } from '@stablepay/event-store';
import {
  MERCHANTS_MIGRATIONS,
  MerchantCommands,
  MerchantsModule,
  merchantsConfigFromEnv,
} from '@stablepay/merchants-service';
import { startService } from '@stablepay/runtime';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { ManualClock } from '@stablepay/util';
import {
  recordedDelivery,
  WebhookDispatcher,
  WebhookEventStore,
  WebhookHttpSender,
  webhookDispatchService,
  webhookEventDraft,
  webhookEventId,
  type WebhookSource,
} from '@stablepay/webhook-dispatch-service';

const env = (name: string, fallback: number): number => {
  const raw = process.env[name];
  const value = raw === undefined || raw === '' ? fallback : Number(raw);
  if (!Number.isSafeInteger(value) || value <= 0) throw new Error(`${name} must be a positive integer`);
  return value;
};

const EVENTS = env('BENCH_EVENTS', 5_000);
const MERCHANTS = env('BENCH_MERCHANTS', 8);
const CONCURRENCY = env('BENCH_CONCURRENCY', 64);
const PER_MERCHANT = env('BENCH_PER_MERCHANT', 16);
const CATEGORY = 'charge';

/** Statements sent by this process per row, counted by their first words (BENCH_QUERIES=1 lists them). */
const queryCounts = new Map<string, number>();
{
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

/** CPU (user + system, ms) used so far by a process of this machine, from /proc; undefined when not readable. */
function processCpuMs(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10; // USER_HZ 100
  } catch {
    return undefined;
  }
}

/**
 * CPU (user + system, ms) used so far by the PostgreSQL backends connected to `database` (read from /proc: only
 * when the server runs on this machine, undefined otherwise).
 */
async function databaseCpuMs(url: string): Promise<number | undefined> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ pid: number }>(
      'SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()',
    );
    let total = 0;
    for (const { pid } of rows) {
      const ms = processCpuMs(pid);
      if (ms === undefined) return undefined;
      total += ms;
    }
    return total;
  } finally {
    await client.end();
  }
}

type ReceiverMessage =
  | { type: 'ready'; port: number }
  | { type: 'reached'; count: number }
  | { type: 'stats'; count: number; e2e: number[] }
  | { type: 'reset-ok' };

class Receiver {
  private constructor(
    private readonly child: ChildProcess,
    readonly port: number,
  ) {}

  static async start(): Promise<Receiver> {
    const child = fork(join(__dirname, 'receiver.js'), [], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const ready = await Receiver.next(child, 'ready');
    if (ready.type !== 'ready') throw new Error('receiver did not start');
    return new Receiver(child, ready.port);
  }

  private static next(child: ChildProcess, type: ReceiverMessage['type']): Promise<ReceiverMessage> {
    return new Promise((resolve) => {
      const listener = (m: ReceiverMessage) => {
        if (m.type !== type) return;
        child.off('message', listener);
        resolve(m);
      };
      child.on('message', listener);
    });
  }

  async reset(): Promise<void> {
    const done = Receiver.next(this.child, 'reset-ok');
    this.child.send({ type: 'reset' });
    await done;
  }

  async waitFor(count: number): Promise<void> {
    const reached = Receiver.next(this.child, 'reached');
    this.child.send({ type: 'wait', count });
    await reached;
  }

  async stats(): Promise<{ count: number; e2e: number[] }> {
    const stats = Receiver.next(this.child, 'stats');
    this.child.send({ type: 'stats' });
    const m = await stats;
    return m.type === 'stats' ? { count: m.count, e2e: m.e2e } : { count: 0, e2e: [] };
  }

  /** CPU used so far by the receiver process (ms). */
  cpuMs(): number | undefined {
    return this.child.pid === undefined ? undefined : processCpuMs(this.child.pid);
  }

  stop(): void {
    this.child.disconnect();
  }
}

const percentile = (values: readonly number[], p: number): number => {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
};

interface Row {
  readonly name: string;
  readonly count: number;
  readonly ms: number;
  readonly latencies: readonly number[];
  readonly note?: string;
  readonly cost?: Cost;
}

/** BENCH_PROFILE=dir: a CPU profile of this process for each dispatcher row alone (`<dir>/<row>.cpuprofile`). */
async function profile(name: string): Promise<() => Promise<void>> {
  const dir = process.env['BENCH_PROFILE'];
  if (!dir) return async () => undefined;
  const session = new inspector.Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.start');
  return async () => {
    const { profile: taken } = await session.post('Profiler.stop');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, `${name}.cpuprofile`), JSON.stringify(taken));
    session.disconnect();
  };
}

/** What a row cost per delivery, beside its rate: the load-independent figures. */
interface Cost {
  readonly processMs: number;
  readonly receiverMs: number | undefined;
  readonly databaseMs: number | undefined;
  readonly statements: ReadonlyMap<string, number>;
}

/** Starts measuring this process's CPU, the database backends' CPU and the statements sent. */
async function costMeter(
  url: string | undefined,
  receiver: Receiver,
  name: string,
): Promise<() => Promise<Cost>> {
  const stopProfile = await profile(name);
  const databaseBefore = url === undefined ? 0 : await databaseCpuMs(url);
  const receiverBefore = receiver.cpuMs();
  queryCounts.clear();
  const cpu = process.cpuUsage();
  return async () => {
    const used = process.cpuUsage(cpu);
    await stopProfile();
    const statements = new Map(queryCounts);
    const receiverAfter = receiver.cpuMs();
    const databaseAfter = url === undefined ? 0 : await databaseCpuMs(url);
    return {
      processMs: (used.user + used.system) / 1000,
      receiverMs:
        receiverBefore !== undefined && receiverAfter !== undefined
          ? receiverAfter - receiverBefore
          : undefined,
      databaseMs:
        databaseBefore !== undefined && databaseAfter !== undefined
          ? databaseAfter - databaseBefore
          : undefined,
      statements,
    };
  };
}

function sampleBody(i: number): Buffer {
  return Buffer.from(
    JSON.stringify({
      id: webhookEventId(`bare-${i}`, 'subscription.charge_succeeded', new Date()),
      object: 'event',
      type: 'subscription.charge_succeeded',
      created_at: new Date().toISOString(),
      data: {
        object: {
          object: 'subscription',
          id: `0x${'ab'.repeat(32)}`,
          amount: '1000000',
          fee: '1200',
          appended_at_ms: 0,
        },
        charge: { object: 'subscription_charge', id: `subc_${i}`, amount: '1000000' },
      },
    }),
  );
}

/** Row 1: the physical limit - the same receiver, the same concurrency, nothing but the HTTP exchange. */
async function bareLoop(receiver: Receiver): Promise<Row> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  const latencies: number[] = [];
  let next = 0;
  const post = (body: Buffer) =>
    new Promise<void>((resolve, reject) => {
      const req = http.request(
        {
          host: '127.0.0.1',
          port: receiver.port,
          path: '/bare',
          method: 'POST',
          agent,
          headers: { 'content-type': 'application/json', 'content-length': String(body.length) },
        },
        (res) => {
          res.resume();
          res.on('end', resolve);
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  const worker = async () => {
    for (let i = next++; i < EVENTS; i = next++) {
      const body = sampleBody(i);
      const t = performance.now();
      await post(body);
      latencies.push(performance.now() - t);
    }
  };
  await receiver.reset();
  const meter = await costMeter(undefined, receiver, 'bare');
  const start = performance.now();
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  const ms = performance.now() - start;
  const cost = await meter();
  agent.destroy();
  return {
    name: `bare HTTP POST loop (keep-alive, ${CONCURRENCY} in flight)`,
    count: EVENTS,
    ms,
    latencies,
    cost,
  };
}

/** Starts PGlite for the benchmark with the fixed server from the webhooks lib (see its header). */
async function startDatabase(): Promise<TestDatabase> {
  if (process.env['DATABASE_URL']) return createTestDatabase();
  const script = join(
    __dirname,
    '..',
    '..',
    'libs',
    'webhooks',
    'service',
    'src',
    'testing',
    'pglite-serve.mjs',
  );
  const child = spawn(process.execPath, [script, '--port', '0', '--data-dir', 'memory://'], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const stdout = child.stdout;
  if (!stdout) throw new Error('PGlite server has no stdout');
  const line = await new Promise<string>((resolve) =>
    createInterface({ input: stdout }).once('line', resolve),
  );
  const { url } = JSON.parse(line) as { url: string };
  return { url, kind: 'pglite', drop: async () => void child.kill('SIGTERM') };
}

const benchSource: WebhookSource = {
  name: 'bench',
  topic: topicForCategory(CATEGORY),
  toWebhookEvents: (message: BusMessage) => {
    const data = message.data as { chargeId: string; appendedAtMs: number };
    return [
      webhookEventDraft(message, 'subscription.charge_succeeded', {
        object: {
          object: 'subscription',
          id: `0x${'ab'.repeat(32)}`,
          amount: '1000000',
          fee: '1200',
          appended_at_ms: data.appendedAtMs,
        },
        charge: { object: 'subscription_charge', id: data.chargeId, amount: '1000000' },
      }),
    ];
  },
};

/** Waits until the dispatcher has written back every result (the receiver counts arrivals before that). */
async function settled(dispatcher: WebhookDispatcher): Promise<void> {
  while (dispatcher.inFlightCount > 0) await new Promise((resolve) => setTimeout(resolve, 5));
}

async function main(): Promise<void> {
  const receiver = await Receiver.start();
  const db = await startDatabase();
  const clock = new ManualClock(new Date());
  const merchants = merchantsConfigFromEnv(
    { WEBHOOK_SECRET_ENCRYPTION_KEY: 'cd'.repeat(32), ALLOW_LOCAL_WEBHOOKS: 'true' },
    { allowEphemeralKey: false },
  );
  const service = await startService(
    {
      databaseUrl: db.url,
      eventStore: 'postgres',
      eventBus: 'store-log',
      port: 0,
      host: '127.0.0.1',
      logLevel: 'error',
    },
    [
      { name: 'gateway', imports: [MerchantsModule.forRoot(merchants)], migrations: MERCHANTS_MIGRATIONS },
      webhookDispatchService({
        merchants,
        sources: [benchSource],
        dispatch: { concurrency: CONCURRENCY, perMerchantConcurrency: PER_MERCHANT, pollIntervalMs: 1_000 },
      }),
    ],
    { clock, service: 'bench-webhooks' },
  );
  const rows: Row[] = [];
  try {
    const commands = service.app.get(MerchantCommands);
    const merchantIds: string[] = [];
    for (let m = 0; m < MERCHANTS; m++) {
      const { row } = await commands.createMerchant({
        name: `Bench ${m}`,
        mode: 'test',
        settlementMode: 'crypto',
      });
      await commands.updateProfile(row.merchant_id, {
        webhookUrl: `http://127.0.0.1:${receiver.port}/m${m}`,
      });
      merchantIds.push(row.merchant_id);
    }
    const dispatcher = service.app.get(WebhookDispatcher);
    const store = service.app.get(WebhookEventStore);
    const eventStore = service.app.get<EventStore>(EVENT_STORE);
    // Time every POST the dispatcher makes (this process hosts no gateway routes, so it is the only sender).
    const sender = service.app.get(WebhookHttpSender);
    let sendLatencies: number[] = [];
    const send = sender.send.bind(sender);
    sender.send = async (request) => {
      const t = performance.now();
      const outcome = await send(request);
      sendLatencies.push(performance.now() - t);
      return outcome;
    };

    // BENCH_DEBUG=1: time spent in the three hot statements, printed every second (stderr).
    if (process.env['BENCH_DEBUG']) {
      const timing = {
        claimDue: { calls: 0, ms: 0, rows: 0 },
        writeResults: { calls: 0, ms: 0, rows: 0 },
        record: { calls: 0, ms: 0, rows: 0 },
      };
      const claimDue = store.claimDue.bind(store);
      store.claimDue = async (request) => {
        const t = performance.now();
        const rows = await claimDue(request);
        timing.claimDue = {
          calls: timing.claimDue.calls + 1,
          ms: timing.claimDue.ms + performance.now() - t,
          rows: timing.claimDue.rows + rows.length,
        };
        return rows;
      };
      const writeResults = store.writeResults.bind(store);
      store.writeResults = async (results) => {
        const t = performance.now();
        await writeResults(results);
        timing.writeResults = {
          calls: timing.writeResults.calls + 1,
          ms: timing.writeResults.ms + performance.now() - t,
          rows: timing.writeResults.rows + results.length,
        };
      };
      const record = store.record.bind(store);
      store.record = async (events) => {
        const t = performance.now();
        const n = await record(events);
        timing.record = {
          calls: timing.record.calls + 1,
          ms: timing.record.ms + performance.now() - t,
          rows: timing.record.rows + events.length,
        };
        return n;
      };
      // The dispatcher's occupancy, sampled every 10 ms: slots sending, claimed and waiting, held in all.
      const occupancy = { samples: 0, sending: 0, ready: 0, held: 0 };
      const inside = dispatcher as unknown as { sending: number; readyCount: number };
      setInterval(() => {
        if (dispatcher.inFlightCount === 0) return;
        occupancy.samples++;
        occupancy.sending += inside.sending;
        occupancy.ready += inside.readyCount;
        occupancy.held += dispatcher.inFlightCount;
      }, 10).unref();
      setInterval(() => {
        const n = Math.max(1, occupancy.samples);
        console.error(
          JSON.stringify({
            ...timing,
            sending: +(occupancy.sending / n).toFixed(1),
            ready: +(occupancy.ready / n).toFixed(1),
            held: +(occupancy.held / n).toFixed(1),
          }),
        );
        Object.assign(occupancy, { samples: 0, sending: 0, ready: 0, held: 0 });
      }, 1000).unref();
    }

    // Warm-up (connections, JIT), not measured.
    await bareLoop(receiver);

    rows.push(await bareLoop(receiver));

    /** EVENTS due events recorded straight into the schedule, due at the time returned (the clock releases them). */
    const recordBacklog = async (prefix: string): Promise<Date> => {
      const releaseAt = new Date(clock.now().getTime() + 60_000);
      const backlog = Array.from({ length: EVENTS }, (_, i) => {
        const merchantId = merchantIds[i % MERCHANTS] ?? '';
        const id = webhookEventId(`${prefix}-${i}`, 'subscription.charge_succeeded', clock.now());
        return {
          event: {
            id,
            merchantId,
            type: 'subscription.charge_succeeded',
            createdAt: clock.now(),
            data: {
              object: { object: 'subscription', id: `0x${'ab'.repeat(32)}`, amount: '1000000', fee: '1200' },
              charge: { object: 'subscription_charge', id: `subc_${prefix}${i}` },
            },
            origin: {
              source: 'bench',
              topic: topicForCategory(CATEGORY),
              eventId: `${prefix}-${i}`,
              streamId: `${CATEGORY}-${prefix}`,
              revision: i,
            },
          },
          state: recordedDelivery(releaseAt),
          recordedAt: clock.now(),
        };
      });
      for (let i = 0; i < backlog.length; i += 1_000) await store.record(backlog.slice(i, i + 1_000));
      return releaseAt;
    };

    // Warm-up (connections, JIT, plans), not measured, as the bare loop's: a dispatcher in service has drained many
    // deliveries before, and its first ones cost about twice as much CPU each (docs/benchmarks.md).
    await receiver.reset();
    const warmedUp = receiver.waitFor(EVENTS);
    clock.set(await recordBacklog('warm'));
    dispatcher.wake();
    await warmedUp;
    await settled(dispatcher);

    // Row 2: a backlog of due events, recorded straight into the schedule, then released by the clock at once.
    const releaseAt = await recordBacklog('backlog');
    // Statistics as a long-running database has them (autovacuum's ANALYZE would get there within a minute).
    await service.app.get(DataSource).query('ANALYZE webhook_events');
    await receiver.reset();
    sendLatencies = [];
    const backlogDone = receiver.waitFor(EVENTS);
    const backlogMeter = await costMeter(db.url, receiver, 'backlog');
    const backlogStart = performance.now();
    clock.set(releaseAt);
    dispatcher.wake();
    await backlogDone;
    const backlogMs = performance.now() - backlogStart;
    await settled(dispatcher);
    rows.push({
      name: 'dispatcher: backlog of due events',
      count: EVENTS,
      ms: backlogMs,
      latencies: sendLatencies,
      cost: await backlogMeter(),
    });

    // Row 3: end to end, from domain events appended to the event store.
    await receiver.reset();
    sendLatencies = [];
    const e2eDone = receiver.waitFor(EVENTS);
    const e2eMeter = await costMeter(db.url, receiver, 'end-to-end');
    const e2eStart = performance.now();
    const perStream = 100;
    for (let i = 0; i < EVENTS; i += perStream) {
      const merchantId = merchantIds[(i / perStream) % MERCHANTS] ?? '';
      const appendedAtMs = performance.timeOrigin + performance.now();
      await eventStore.appendToStream(
        `${CATEGORY}-bench${i}`,
        Array.from({ length: Math.min(perStream, EVENTS - i) }, (_, j) => ({
          id: randomUUID(),
          type: 'BenchChargeSucceeded.v1',
          data: { chargeId: `subc_e${i + j}`, appendedAtMs },
          metadata: { merchantId, mode: 'test' as const, occurredAt: clock.now().toISOString() },
        })),
      );
    }
    await e2eDone;
    const e2eMs = performance.now() - e2eStart;
    await settled(dispatcher);
    const e2eCost = await e2eMeter();
    const { e2e } = await receiver.stats();
    rows.push({
      name: 'dispatcher: end to end (append -> bus -> record -> deliver)',
      count: EVENTS,
      ms: e2eMs,
      latencies: sendLatencies,
      cost: e2eCost,
      note: `append -> arrival p50 ${percentile(e2e, 50).toFixed(0)} ms, p99 ${percentile(e2e, 99).toFixed(0)} ms (all ${EVENTS} appended at once)`,
    });
  } finally {
    await service.stop();
    await db.drop();
    receiver.stop();
  }

  const bare = rows[0];
  console.log(
    `\nwebhook delivery benchmark: ${EVENTS} events, ${MERCHANTS} merchants, concurrency ${CONCURRENCY} (${PER_MERCHANT} per merchant), ` +
      `receiver in a child process, database ${db.kind}, node ${process.version}\n`,
  );
  const header = `${'row'.padEnd(62)} ${'deliveries/s'.padStart(12)} ${'p50 ms'.padStart(8)} ${'p99 ms'.padStart(8)} ${'vs bare'.padStart(8)}`;
  console.log(header);
  console.log('-'.repeat(header.length));
  for (const row of rows) {
    const rate = row.count / (row.ms / 1000);
    const ratio = bare ? rate / (bare.count / (bare.ms / 1000)) : 1;
    console.log(
      `${row.name.padEnd(62)} ${rate.toFixed(0).padStart(12)} ${percentile(row.latencies, 50).toFixed(2).padStart(8)} ${percentile(row.latencies, 99).toFixed(2).padStart(8)} ${ratio.toFixed(2).padStart(8)}`,
    );
    if (row.note) console.log(`${''.padEnd(4)}${row.note}`);
  }
  for (const row of rows) {
    const cost = row.cost;
    if (!cost) continue;
    const per = (n: number) => (n / row.count).toFixed(3);
    const total = [...cost.statements.values()].reduce((a, b) => a + b, 0);
    console.log(
      `\n${row.name}, per delivery: ${per(cost.processMs)} ms of this process's CPU` +
        (cost.receiverMs !== undefined ? `, ${per(cost.receiverMs)} ms of the receiver's` : '') +
        (cost.databaseMs !== undefined ? `, ${per(cost.databaseMs)} ms of the database backends' CPU` : '') +
        `, ${per(total)} statements`,
    );
    if (process.env['BENCH_QUERIES'] === '1')
      for (const [text, n] of [...cost.statements].sort((a, b) => b[1] - a[1]))
        console.log(`  ${per(n).padStart(7)}  ${text}`);
  }
  console.log(
    '\np50/p99: one POST as its sender saw it (dispatcher rows: the HTTP exchange of each attempt).',
  );
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
