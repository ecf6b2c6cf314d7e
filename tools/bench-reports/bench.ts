/**
 * The payments CSV export over HTTP beside the database's own read of the same rows, in one run on one server:
 *   flock /tmp/bench.lock env DATABASE_URL=postgres://... node -r @swc-node/register tools/bench-reports/bench.ts
 * (without DATABASE_URL on a private PGlite, where the export reads keyset batches instead of a cursor).
 *
 * Seeds BENCH_ROWS (100,000) rows of the `payments` read model for one merchant (direct inserts: the export reads
 * nothing else), then, BENCH_RUNS (3) times each, best kept:
 *   1. floor: the same rows read through a server-side cursor (pg-query-stream, 1,000 rows per fetch) by a client
 *      of this process (pg-copy-streams, for COPY ... TO STDOUT, is not installed);
 *   2. export: GET /reports/payments/export from the gateway in this process, the body read to its end.
 * Printed: rows/s of each, the ratio, MB/s of the CSV, and the peak heap growth during an export; with
 * `node --expose-gc` measured after full collections (the rates are then slowed): constant memory means it does not
 * grow with BENCH_ROWS. Figures: docs/benchmarks.md, "CSV exports".
 */
import 'reflect-metadata';
import { Client } from 'pg';
import QueryStream from 'pg-query-stream';
import { gatewayService } from '@stablepay/gateway-service';
import { merchantsConfigFromEnv } from '@stablepay/merchants-service';
import { platformConfigFromEnv, startService } from '@stablepay/runtime';
import { createTestDatabase } from '@stablepay/testing';

const num = (name: string, fallback: number): number => {
  const raw = process.env[name];
  return raw ? Number(raw) : fallback;
};
const ROWS = num('BENCH_ROWS', 100_000);
const RUNS = num('BENCH_RUNS', 3);
const ADMIN_TOKEN = 'bench-admin-token-0123456789-0123456789';
const USDC = 'eip155:8453/erc20:0x833589fcd6edb6e08f4c7c32d4f71b54bda02913';

/** A settled payment's object as the projection writes it (every column of the export filled). */
const SEED = `INSERT INTO payments (id, checkout_id, merchant_id, mode, status, method, deposit_address, detected_chain,
    created_at, expires_at, updated_at, object, revision)
  SELECT 'pay_' || lpad(i::text, 26, '0'), 'chk_' || lpad(i::text, 26, '0'), $1, 'test', 'settled', 'DIRECT',
    '0x' || lpad(to_hex(i), 40, '0'), 'eip155:8453', now(), now() + interval '1 day', now(),
    jsonb_build_object('id', 'pay_' || lpad(i::text, 26, '0'), 'object', 'payment',
      'checkout_id', 'chk_' || lpad(i::text, 26, '0'), 'status', 'settled', 'method', 'DIRECT',
      'amount', '12500000', 'amount_paid', '12500000', 'currency', 'USD', 'detected_asset', $2::text,
      'detected_token_symbol', 'USDC', 'detected_chain', 'eip155:8453', 'token_amount', '12500000',
      'token_amount_decimal', '12.5', 'on_chain_id', '0x' || lpad(to_hex(i), 64, '0'),
      'deposit_address', '0x' || lpad(to_hex(i), 40, '0'), 'deploy_tx_hash', '0x' || lpad(to_hex(i), 64, 'e'),
      'deploy_hold_reason', null, 'payer_addresses', jsonb_build_array('0x' || lpad(to_hex(i), 40, 'a')),
      'transactions', jsonb_build_array(jsonb_build_object('tx_hash', '0x' || lpad(to_hex(i), 64, 'f'),
        'log_index', 0, 'from', '0x' || lpad(to_hex(i), 40, 'a'), 'amount', '12500000', 'asset', $2::text,
        'token_symbol', 'USDC', 'chain', 'eip155:8453', 'block_number', '123456', 'is_funding', true,
        'non_funding_reason', null, 'confirmed', true)),
      'non_funding_transactions_count', 0, 'amount_captured', '0', 'amount_refunded', '0',
      'authorization_expires_at', null, 'expires_at', '2026-11-25T00:00:00.000Z',
      'metadata', jsonb_build_object('order_id', 'order-' || i, 'customer', 'Customer ' || i),
      'settlement_status', null, 'created_at', '2026-11-24T00:00:00.000Z', 'updated_at', '2026-11-24T00:00:00.000Z'),
    1
  FROM generate_series($3::int, $4::int) AS i`;

async function timed<T>(work: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const start = process.hrtime.bigint();
  const value = await work();
  return { ms: Number(process.hrtime.bigint() - start) / 1e6, value };
}

async function floor(url: string, merchantId: string): Promise<number> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    const stream = client.query(
      new QueryStream(
        "SELECT seq, object FROM payments WHERE merchant_id = $1 AND mode = 'test' ORDER BY seq ASC",
        [merchantId],
        { batchSize: 1000, highWaterMark: 1000 },
      ),
    );
    let rows = 0;
    for await (const _row of stream) rows++;
    return rows;
  } finally {
    await client.end();
  }
}

async function exportOnce(
  url: string,
  key: string,
): Promise<{ rows: number; bytes: number; peakHeap: number }> {
  // With --expose-gc the heap is measured after a full collection: what is held, not garbage not yet collected.
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  const base = process.memoryUsage().heapUsed;
  let peak = base;
  const sampler = setInterval(
    () => {
      gc?.();
      peak = Math.max(peak, process.memoryUsage().heapUsed);
    },
    gc ? 250 : 20,
  );
  try {
    const res = await fetch(`${url}/reports/payments/export`, {
      headers: { authorization: `Bearer ${key}` },
    });
    if (res.status !== 200 || !res.body) throw new Error(`export answered ${res.status}`);
    let bytes = 0;
    let lines = 0;
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      bytes += chunk.length;
      for (const byte of chunk) if (byte === 10) lines++;
    }
    return { rows: lines - 1, bytes, peakHeap: peak - base };
  } finally {
    clearInterval(sampler);
  }
}

async function main(): Promise<void> {
  const database = await createTestDatabase();
  const env: Record<string, string | undefined> = {
    ...process.env,
    DATABASE_URL: database.url,
    PORT: '0',
    ADMIN_TOKEN,
    LOG_LEVEL: 'error',
  };
  const platform = platformConfigFromEnv(env, { port: 0 });
  const merchants = merchantsConfigFromEnv(env, { allowEphemeralKey: true });
  const service = await startService({ ...platform, host: '127.0.0.1' }, [gatewayService(merchants)]);
  try {
    const res = await fetch(`${service.url}/admin/merchants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Bench Merchant', mode: 'test' }),
    });
    const created = (await res.json()) as { id: string; api_key: string };
    const seeder = new Client({ connectionString: database.url });
    await seeder.connect();
    const seeded = await timed(async () => {
      for (let from = 1; from <= ROWS; from += 20_000)
        await seeder.query(SEED, [created.id, USDC, from, Math.min(ROWS, from + 19_999)]);
      await seeder.query('ANALYZE payments');
    });
    await seeder.end();
    console.log(`database: ${database.kind}; ${ROWS} payments seeded in ${(seeded.ms / 1000).toFixed(1)} s`);

    let bestFloor = Infinity;
    let bestExport = Infinity;
    let bytes = 0;
    let peakHeap = 0;
    for (let run = 1; run <= RUNS; run++) {
      const f = await timed(() => floor(database.url, created.id));
      if (f.value !== ROWS) throw new Error(`floor read ${f.value} rows`);
      const e = await timed(() => exportOnce(service.url, created.api_key));
      if (e.value.rows !== ROWS) throw new Error(`export wrote ${e.value.rows} rows`);
      bestFloor = Math.min(bestFloor, f.ms);
      bestExport = Math.min(bestExport, e.ms);
      bytes = e.value.bytes;
      peakHeap = Math.max(peakHeap, e.value.peakHeap);
      console.log(
        `run ${run}: floor ${Math.round(ROWS / (f.ms / 1000))} rows/s, export ${Math.round(ROWS / (e.ms / 1000))} rows/s`,
      );
    }
    const floorRate = ROWS / (bestFloor / 1000);
    const exportRate = ROWS / (bestExport / 1000);
    console.log('');
    console.log('| path | rows/s | time | |');
    console.log('| --- | ---: | ---: | --- |');
    console.log(
      `| floor: cursor read of the same rows (pg-query-stream) | ${Math.round(floorRate)} | ${(bestFloor / 1000).toFixed(2)} s | |`,
    );
    console.log(
      `| GET /reports/payments/export (HTTP, CSV) | ${Math.round(exportRate)} | ${(bestExport / 1000).toFixed(2)} s | ${(bytes / 1e6).toFixed(1)} MB, ${(bytes / 1e6 / (bestExport / 1000)).toFixed(1)} MB/s |`,
    );
    console.log(`| ratio export / floor | ${(exportRate / floorRate).toFixed(2)} | | |`);
    console.log(
      `peak heap growth during an export (this process, server and client; ${
        (globalThis as { gc?: unknown }).gc
          ? 'after full collections: what is held'
          : 'garbage included, run with --expose-gc for what is held (the rates are then slowed)'
      }): ${(peakHeap / 1e6).toFixed(1)} MB`,
    );
  } finally {
    await service.stop();
    await database.drop();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
