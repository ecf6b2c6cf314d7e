/**
 * Projection lag at a target command rate, beside the floor, in one run on one database server:
 *   DATABASE_URL=postgres://... node -r @swc-node/register tools/bench-write/projection-lag.ts
 *
 *   1. floor: single-row autocommit INSERTs of a jsonb row paced at BENCH_RATE per second (open loop) on
 *      BENCH_CLIENTS connections: the latency of making one row durable and visible on this machine right now;
 *   2. the projection: BENCH_RATE create commands per second (open loop) for BENCH_SECONDS, each decided and
 *      appended by the subscriptions service's own command code (SubscriptionCheckoutCommands.create: no HTTP, no
 *      read-your-writes wait), and the time from each append's commit (its promise resolving) until the subscription
 *      checkout projection has committed that row (the projection's commit announcement, which read-your-writes
 *      waits on; no timeout), p50/p99. Also printed: the command latency, the achieved append rate and the rate of rows
 *      projected.
 * At the end every appended id is checked to be in `subscription_checkouts`. Without DATABASE_URL the stack runs on
 * a private PGlite (the floor is then PGlite's). Knobs: BENCH_RATE (500), BENCH_SECONDS (5), BENCH_CLIENTS (8).
 * Figures: docs/benchmarks.md.
 */
import 'reflect-metadata';
import { performance } from 'node:perf_hooks';
import { Client } from 'pg';
import { platformConfigFromEnv, startService } from '@stablepay/runtime';
import {
  SubscriptionCheckoutChanges,
  SubscriptionCheckoutCommands,
  subscriptionsConfigFromEnv,
  subscriptionsService,
} from '@stablepay/subscriptions-service';
import { createTestDatabase } from '@stablepay/testing';
import { FLOOR_BODY, FLOOR_INSERT, num, openFloorClients, percentile } from './common';

const RATE = num('BENCH_RATE', 500);
const SECONDS = num('BENCH_SECONDS', 5);
const CLIENTS = num('BENCH_CLIENTS', 8);

/** Calls `once` RATE times a second for SECONDS whatever the answers do; resolves when every call settled. */
async function paced(once: (i: number) => Promise<void>): Promise<{ ms: number; errors: number }> {
  const total = Math.round(RATE * SECONDS);
  const start = performance.now();
  const calls: Promise<void>[] = [];
  let errors = 0;
  for (let i = 0; i < total; i++) {
    const wait = start + (i * 1000) / RATE - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    calls.push(
      once(i).catch((error: unknown) => {
        if (errors++ === 0) console.error(error);
      }),
    );
  }
  await Promise.all(calls);
  return { ms: performance.now() - start, errors };
}

async function floor(url: string): Promise<{ latencies: number[]; ms: number; errors: number }> {
  const clients = await openFloorClients(url, CLIENTS);
  const idle = [...clients];
  const waiting: Array<(c: Client) => void> = [];
  const take = (): Promise<Client> => {
    const c = idle.pop();
    return c ? Promise.resolve(c) : new Promise((resolve) => waiting.push(resolve));
  };
  const give = (c: Client): void => {
    const next = waiting.shift();
    if (next) next(c);
    else idle.push(c);
  };
  const latencies: number[] = [];
  const run = await paced(async () => {
    const t = performance.now();
    const client = await take();
    try {
      await client.query(FLOOR_INSERT, [FLOOR_BODY]);
    } finally {
      give(client);
    }
    latencies.push(performance.now() - t);
  });
  await Promise.all(clients.map((c) => c.end()));
  return { latencies, ...run };
}

async function main(): Promise<void> {
  const database = await createTestDatabase();
  const env: Record<string, string | undefined> = {
    ...process.env,
    DATABASE_URL: database.url,
    PORT: '0',
    LOG_LEVEL: 'error',
    SANDBOX_RATES: 'USD/USDC=1,USD/USDT=1',
  };
  const service = await startService({ ...platformConfigFromEnv(env, { port: 0 }), host: '127.0.0.1' }, [
    subscriptionsService(subscriptionsConfigFromEnv(env, { localChains: [] })),
  ]);
  try {
    const commands = service.app.get(SubscriptionCheckoutCommands);
    const changes = service.app.get(SubscriptionCheckoutChanges);
    /** Resolves when the projection has committed the row of `id` at `revision` (no timeout: lag is measured). */
    const projected = (id: string, revision: number): Promise<void> =>
      new Promise((resolve) => {
        const seen = (r: number): void => {
          if (r < revision) return;
          changes.off(id, seen);
          resolve();
        };
        changes.on(id, seen);
        const known = changes.latest(id);
        if (known && known.revision >= revision) seen(known.revision);
      });
    const owner = { merchantId: 'mer_bench', mode: 'test' as const };
    const details = {
      businessName: 'Bench Merchant',
      hostedUrl: 'http://127.0.0.1/hosted',
      context: {
        availableChains: [{ caip2: 'eip155:8453', tokenSymbols: ['USDC'] }],
        quotedTokenSymbols: ['USDC'],
        settlement: { mode: 'crypto' as const },
      },
    };
    const input = { price: '1000', price_currency: 'USD' };
    // Warm-up: JIT, pools, prepared statements.
    for (let i = 0; i < 20; i++) {
      const { id, revision } = await commands.create(owner, input, details);
      await projected(id, revision);
    }

    const floorRow = await floor(database.url);

    const commandMs: number[] = [];
    const lagMs: number[] = [];
    const ids: string[] = [];
    let projectedFirst = Infinity;
    let projectedLast = 0;
    const cpu = process.cpuUsage();
    const run = await paced(async () => {
      const t = performance.now();
      const { id, revision } = await commands.create(owner, input, details);
      const appended = performance.now();
      ids.push(id);
      commandMs.push(appended - t);
      await projected(id, revision);
      const visible = performance.now();
      lagMs.push(visible - appended);
      projectedFirst = Math.min(projectedFirst, visible);
      projectedLast = Math.max(projectedLast, visible);
    });
    const used = process.cpuUsage(cpu);

    const check = new Client({ connectionString: database.url });
    await check.connect();
    const { rows } = await check.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM subscription_checkouts WHERE id = ANY($1::text[])',
      [ids],
    );
    await check.end();
    const stored = rows[0]?.n ?? 0;

    const f = (v: number) => v.toFixed(1).padStart(8);
    console.log(
      `\nprojection lag, ${RATE}/s target for ${SECONDS}s, database ${new URL(database.url).host} (${database.kind})`,
    );
    console.log('row'.padEnd(58), 'rate/s'.padStart(8), 'p50 ms'.padStart(8), 'p99 ms'.padStart(8), 'errors');
    console.log(
      `floor: paced single-row INSERT, ${CLIENTS} clients`.padEnd(58),
      ((floorRow.latencies.length / floorRow.ms) * 1000).toFixed(0).padStart(8),
      f(percentile(floorRow.latencies, 50)),
      f(percentile(floorRow.latencies, 99)),
      floorRow.errors,
    );
    console.log(
      'create command: decide + append (commit)'.padEnd(58),
      ((commandMs.length / run.ms) * 1000).toFixed(0).padStart(8),
      f(percentile(commandMs, 50)),
      f(percentile(commandMs, 99)),
      run.errors,
    );
    const projectedRate =
      lagMs.length > 1 ? ((lagMs.length - 1) / (projectedLast - projectedFirst)) * 1000 : Number.NaN;
    console.log(
      'projection lag: append committed -> row committed'.padEnd(58),
      projectedRate.toFixed(0).padStart(8),
      f(percentile(lagMs, 50)),
      f(percentile(lagMs, 99)),
      '',
    );
    console.log(
      `achieved: ${((commandMs.length / run.ms) * 1000).toFixed(0)} appends/s of ${RATE}/s asked; ${stored} of ${ids.length} rows stored; ` +
        `lag p99 / floor p99 = ${(percentile(lagMs, 99) / percentile(floorRow.latencies, 99)).toFixed(2)}; ` +
        `${((used.user + used.system) / 1000 / Math.max(1, ids.length)).toFixed(2)} ms of this process's CPU per command`,
    );
    if (stored !== ids.length)
      throw new Error(`only ${stored} of ${ids.length} appended rows were projected`);
  } finally {
    await service.stop();
    await database.drop();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
