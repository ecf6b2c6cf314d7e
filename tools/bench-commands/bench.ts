/**
 * Command round trips (gateway -> owning service), side by side with the physical floor of this machine:
 *   node -r @swc-node/register tools/bench-commands/bench.ts
 *
 * In one run, with a create-command-sized JSON payload (BENCH_COMMANDS round trips each, BENCH_CONCURRENCY in
 * flight for the throughput rows):
 *   1. floor: a bare node:net socket on 127.0.0.1 echoing newline-delimited JSON (parse and stringify, no framework);
 *   2. the @nestjs/microservices TCP transport through CommandClient and a @CommandHandler (what processes,
 *      docker-compose and k8s use);
 *   3. the in-process transport (embedded mode; JSON round trip, no socket).
 * Printed per row: sequential p50 / p99 latency, and commands per second with concurrency; rows 2 and 3 add the
 * ratio to the floor. Figures: docs/benchmarks.md.
 */
import 'reflect-metadata';
import { Controller, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Payload } from '@nestjs/microservices';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { createConnection, createServer, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import {
  CommandClient,
  CommandHandler,
  CommandsModule,
  commandsConfigFromEnv,
  connectCommandServer,
  defineCommands,
  InProcessBroker,
} from '@stablepay/commands';
import { freePort } from '@stablepay/testing';

const COMMANDS = Number(process.env['BENCH_COMMANDS'] ?? 5000);
const CONCURRENCY = Number(process.env['BENCH_CONCURRENCY'] ?? 32);
const PATTERNS = defineCommands('subscriptions', { echo: 'subscriptions.bench.echo' });
const PAYLOAD = {
  merchant: { merchantId: 'mer_01jb4x9c3k7m2n5p8q1r4s6t9v', mode: 'test' },
  input: {
    price: '150000',
    price_currency: 'ARS',
    expires_in: 86400,
    metadata: { plan_name: 'Pro', crm_ref: 'c-1' },
    external_customer_id: 'cus_123',
    success_url: 'https://example.com/success',
    cancel_url: 'https://example.com/cancel',
  },
  origin: 'http://127.0.0.1:3000',
};

@Controller()
class EchoHandler {
  @CommandHandler(PATTERNS.echo)
  echo(@Payload() payload: unknown) {
    return { id: 'schk_01jb4x9c3k7m2n5p8q1r4s6t9v', revision: 0, echoed: payload !== null };
  }
}

interface Row {
  name: string;
  p50: number;
  p99: number;
  perSecond: number;
}

async function measure(name: string, send: () => Promise<unknown>): Promise<Row> {
  for (let i = 0; i < 200; i++) await send(); // warm-up
  const latencies: number[] = [];
  for (let i = 0; i < COMMANDS; i++) {
    const t = performance.now();
    await send();
    latencies.push(performance.now() - t);
  }
  latencies.sort((a, b) => a - b);
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next++ < COMMANDS) await send();
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  return {
    name,
    p50: latencies[Math.floor(latencies.length * 0.5)] ?? 0,
    p99: latencies[Math.floor(latencies.length * 0.99)] ?? 0,
    perSecond: COMMANDS / seconds,
  };
}

/** The floor: newline-delimited JSON echo over one loopback socket, answers matched by id. */
async function rawTcp(): Promise<{ send: () => Promise<unknown>; close: () => Promise<void> }> {
  const server = createServer((socket: Socket) => {
    let buffer = '';
    socket.on('data', (chunk) => {
      buffer += chunk.toString('utf8');
      let nl: number;
      while ((nl = buffer.indexOf('\n')) >= 0) {
        const request = JSON.parse(buffer.slice(0, nl)) as { id: number; data: unknown };
        buffer = buffer.slice(nl + 1);
        socket.write(JSON.stringify({ id: request.id, response: { id: 'schk_x', revision: 0 } }) + '\n');
      }
    });
  });
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  const socket = createConnection(port, '127.0.0.1');
  socket.setNoDelay(true);
  await new Promise<void>((resolve) => socket.once('connect', resolve));
  const pending = new Map<number, (value: unknown) => void>();
  let buffer = '';
  socket.on('data', (chunk) => {
    buffer += chunk.toString('utf8');
    let nl: number;
    while ((nl = buffer.indexOf('\n')) >= 0) {
      const answer = JSON.parse(buffer.slice(0, nl)) as { id: number; response: unknown };
      buffer = buffer.slice(nl + 1);
      pending.get(answer.id)?.(answer.response);
      pending.delete(answer.id);
    }
  });
  let id = 0;
  return {
    send: () =>
      new Promise((resolve) => {
        const requestId = ++id;
        pending.set(requestId, resolve);
        socket.write(JSON.stringify({ id: requestId, pattern: PATTERNS.echo, data: PAYLOAD }) + '\n');
      }),
    close: async () => {
      socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

async function nestApp(transport: 'tcp' | 'in-process'): Promise<NestFastifyApplication> {
  const port = await freePort();
  const config = commandsConfigFromEnv({
    COMMAND_TRANSPORT: transport,
    COMMANDS_HOST: '127.0.0.1',
    COMMANDS_PORT: String(port),
    SUBSCRIPTIONS_COMMANDS_ADDRESS: `127.0.0.1:${port}`,
  });
  const broker = new InProcessBroker();
  @Module({ imports: [CommandsModule.forRoot(config, broker)], controllers: [EchoHandler] })
  class Root {}
  const app = await NestFactory.create<NestFastifyApplication>(Root, new FastifyAdapter(), { logger: false });
  connectCommandServer(app, config, broker, 'subscriptions');
  await app.startAllMicroservices();
  await app.init();
  return app;
}

async function main(): Promise<void> {
  const rows: Row[] = [];
  const floor = await rawTcp();
  rows.push(await measure('floor: raw TCP JSON echo', floor.send));
  await floor.close();
  for (const transport of ['tcp', 'in-process'] as const) {
    const app = await nestApp(transport);
    const client = app.get(CommandClient);
    rows.push(
      await measure(`CommandClient over ${transport}`, () =>
        client.send('subscriptions', PATTERNS.echo, PAYLOAD),
      ),
    );
    await app.close();
  }
  const base = rows[0];
  console.log(`commands: ${COMMANDS} sequential, then ${COMMANDS} with ${CONCURRENCY} in flight`);
  for (const row of rows) {
    const ratio =
      base && row !== base ? `  (${(base.perSecond / row.perSecond).toFixed(1)}x the floor's time)` : '';
    console.log(
      `${row.name.padEnd(34)} p50 ${row.p50.toFixed(3)} ms  p99 ${row.p99.toFixed(3)} ms  ${Math.round(row.perSecond)}/s${ratio}`,
    );
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
