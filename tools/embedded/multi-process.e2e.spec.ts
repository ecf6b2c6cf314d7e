import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from 'pg';
import { verifyWebhook } from '@stablepay/merchant-sdk';
import { createTestDatabase, freePort, type TestDatabase } from '@stablepay/testing';
import { cleanEnv, type SpawnedProcess, spawnNode } from './process-harness';

/**
 * The distributed shape on one machine: every app is its own process started from its apps/<name>/src/main.ts
 * (as its container starts it, not the embedded launcher), against one PostgreSQL, with the store-log bus (or
 * Kafka with the relay where KAFKA_BROKERS is set; EventStoreDB where ESDB_URL is set) and commands over the TCP
 * transport. A command goes through the gateway to the service that owns the aggregate; its events reach the
 * projection (read back through the gateway) and the merchant's endpoint as signed webhooks. Services are killed
 * with SIGKILL mid-flow and restarted: nothing is lost, nothing is doubled.
 */
const databaseUrl = process.env['DATABASE_URL'];
const kafkaBrokers = process.env['KAFKA_BROKERS'];
const esdbUrl = process.env['ESDB_URL'];

if (!databaseUrl) {
  console.log(
    'multi-process e2e skipped: DATABASE_URL is not set (it needs one PostgreSQL for every process)',
  );
}
if (!kafkaBrokers) console.log('multi-process e2e runs on the store-log bus: KAFKA_BROKERS is not set');
if (!esdbUrl) console.log('multi-process e2e runs on the PostgreSQL event store: ESDB_URL is not set');

const SERVICES = [
  'gateway',
  'subscriptions',
  'webhook-dispatch',
  ...(kafkaBrokers ? ['relay'] : []),
] as const;
type Service = (typeof SERVICES)[number];
const READY_MS = 120_000; // two shared cores, several processes compiling TypeScript on start

async function eventually(check: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** The merchant's endpoint: records every delivery (raw body and headers) and answers 200. */
function startReceiver() {
  const received: Array<{ body: string; headers: IncomingHttpHeaders }> = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ body: Buffer.concat(chunks).toString('utf8'), headers: req.headers });
      res.writeHead(200).end('ok');
    });
  });
  const listening = new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    received,
    url: async () => {
      await listening;
      return `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
    },
    waitFor: async (count: number, timeoutMs: number) => {
      const deadline = Date.now() + timeoutMs;
      while (received.length < count) {
        if (Date.now() > deadline) throw new Error(`received ${received.length} of ${count} webhooks`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    },
    stop: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

(databaseUrl ? describe : describe.skip)('the services as separate processes', () => {
  let db: TestDatabase;
  const receiver = startReceiver();
  const procs = new Map<Service, SpawnedProcess>();
  const env: Record<string, string> = {};
  let gatewayUrl = '';
  let apiKey = '';
  let secret = '';

  const start = async (service: Service): Promise<void> => {
    const port = service === 'gateway' ? env['GATEWAY_PORT'] : String(await freePort());
    const proc = spawnNode(
      ['-r', '@swc-node/register', `apps/${service}/src/main.ts`],
      cleanEnv({
        ...env,
        PORT: port,
        ...(service === 'subscriptions' ? { COMMANDS_PORT: env['SUBSCRIPTIONS_COMMANDS_PORT'] } : {}),
        ...(service === 'webhook-dispatch' ? { COMMANDS_PORT: env['WEBHOOK_DISPATCH_COMMANDS_PORT'] } : {}),
      }),
    );
    procs.set(service, proc);
    await proc.waitForLine((l) => l.includes(`"msg":"${service} listening"`), READY_MS);
  };

  const kill9 = async (service: Service): Promise<void> => {
    await procs.get(service)?.stop('SIGKILL');
    procs.delete(service);
  };

  const api = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${gatewayUrl}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${apiKey}`,
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };

  const query = async <T>(sql: string, params: unknown[] = []): Promise<T[]> => {
    const client = new Client({ connectionString: db.url });
    await client.connect();
    try {
      return (await client.query(sql, params)).rows as T[];
    } finally {
      await client.end();
    }
  };

  const webhooks = () =>
    receiver.received.map((r) => {
      const event = JSON.parse(r.body) as { id: string; type: string; data: { object: { id: string } } };
      return { id: event.id, body: r.body, headers: r.headers, event };
    });

  beforeAll(async () => {
    db = await createTestDatabase();
    const [gatewayPort, subscriptionsCommands, dispatchCommands] = await Promise.all([
      freePort(),
      freePort(),
      freePort(),
    ]);
    Object.assign(env, {
      DATABASE_URL: db.url,
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      GATEWAY_PORT: String(gatewayPort),
      EVENT_STORE: esdbUrl ? 'esdb' : 'postgres',
      ...(esdbUrl ? { ESDB_URL: esdbUrl } : {}),
      EVENT_BUS: kafkaBrokers ? 'kafka' : 'store-log',
      ...(kafkaBrokers ? { KAFKA_BROKERS: kafkaBrokers } : {}),
      COMMAND_TRANSPORT: 'tcp',
      COMMANDS_HOST: '127.0.0.1',
      SUBSCRIPTIONS_COMMANDS_PORT: String(subscriptionsCommands),
      WEBHOOK_DISPATCH_COMMANDS_PORT: String(dispatchCommands),
      SUBSCRIPTIONS_COMMANDS_ADDRESS: `127.0.0.1:${subscriptionsCommands}`,
      WEBHOOK_DISPATCH_COMMANDS_ADDRESS: `127.0.0.1:${dispatchCommands}`,
      COMMAND_TIMEOUT_MS: '20000',
      WEBHOOK_SECRET_ENCRYPTION_KEY: 'ab'.repeat(32),
      ALLOW_LOCAL_WEBHOOKS: 'true',
      WEBHOOK_POLL_INTERVAL_MS: '200',
      ADMIN_TOKEN: 'admin-token-for-the-multi-process-test',
    });
    gatewayUrl = `http://127.0.0.1:${gatewayPort}`;
    // The gateway first: it runs the migrations of the scopes it reads (one database for all).
    await start('gateway');
    await Promise.all(SERVICES.filter((s) => s !== 'gateway').map((s) => start(s)));

    const merchant = await fetch(`${gatewayUrl}/admin/merchants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${env['ADMIN_TOKEN']}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Multi Process', mode: 'test' }),
    });
    expect(merchant.status).toBe(201);
    apiKey = String(((await merchant.json()) as Record<string, unknown>)['api_key']);
    const settings = await api('PATCH', '/settings', { webhook_url: await receiver.url() });
    expect(settings.status).toBe(200);
    secret = String(settings.body['webhook_secret']);
  }, 4 * READY_MS);

  afterAll(async () => {
    await Promise.all([...procs.values()].map((p) => p.stop('SIGTERM')));
    await receiver.stop();
    await db?.drop();
  }, 60_000);

  const createCheckout = () =>
    api('POST', '/subscription-checkouts', { price: '150000', price_currency: 'ARS', expires_in: 86400 });

  it(
    'sends commands to the owner, projects and delivers its events, and survives SIGKILL of any service',
    async () => {
      // 1. A command through the gateway to the subscriptions service; read back through the gateway.
      const a = await createCheckout();
      expect(a.status).toBe(201);
      const aId = String(a.body['id']);
      expect((await api('GET', `/subscription-checkouts/${aId}`)).body).toMatchObject({
        id: aId,
        status: 'pending',
      });

      // 2. A domain error decided in the owner crosses the transport unchanged (same envelope as embedded).
      expect((await api('PATCH', `/subscription-checkouts/${aId}/cancel`)).status).toBe(200);
      const again = await api('PATCH', `/subscription-checkouts/${aId}/cancel`);
      expect(again.status).toBe(409);
      expect(again.body).toEqual({
        error: expect.objectContaining({
          type: 'invalid_request',
          code: 'subscription_checkout_not_pending',
        }),
      });

      // 3. webhook-dispatch dies mid-flow (its two deliveries so far recorded as delivered, so a re-send would be a
      // bug, not at-least-once): the events it has not seen yet wait in the store.
      await receiver.waitFor(2, 60_000);
      await eventually(
        async () =>
          (
            await query<{ n: string }>(
              "SELECT count(*) AS n FROM webhook_events WHERE delivery_status = 'delivered'",
            )
          )[0]?.n === '2',
      );
      await kill9('webhook-dispatch');
      const b = await createCheckout();
      expect(b.status).toBe(201);
      const bId = String(b.body['id']);

      // 4. The owner dies: commands are refused (503, nothing appended); reads still work in the gateway.
      await kill9('subscriptions');
      const refused = await createCheckout();
      expect(refused.status).toBe(503);
      expect(refused.body).toEqual({ error: expect.objectContaining({ code: 'service_unavailable' }) });
      expect((await api('GET', `/subscription-checkouts/${bId}`)).status).toBe(200);

      // 5. Both come back; the projection and the recorder resume from their checkpoints.
      await start('subscriptions');
      const c = await createCheckout();
      expect(c.status).toBe(201);
      const cId = String(c.body['id']);
      await start('webhook-dispatch');

      // Four domain events: a created, a cancelled, b created, c created; each delivered once, signed.
      await receiver.waitFor(4, 120_000);
      await new Promise((resolve) => setTimeout(resolve, 2_000)); // room for a duplicate to show up, if any
      const delivered = webhooks();
      expect(delivered.map((w) => `${w.event.data.object.id} ${w.event.type}`).sort()).toEqual(
        [
          `${aId} subscription_checkout.created`,
          `${aId} subscription_checkout.cancelled`,
          `${bId} subscription_checkout.created`,
          `${cId} subscription_checkout.created`,
        ].sort(),
      );
      expect(new Set(delivered.map((w) => w.id)).size).toBe(4);
      for (const w of delivered)
        expect(verifyWebhook(w.body, w.headers, secret)).toMatchObject({ valid: true });

      // Read models: one row per intent, one webhook event per domain event, nothing else.
      const rows = await query<{ id: string; status: string }>(
        'SELECT id, status FROM subscription_checkouts ORDER BY id',
      );
      expect(rows).toEqual(
        [
          { id: aId, status: 'cancelled' },
          { id: bId, status: 'pending' },
          { id: cId, status: 'pending' },
        ].sort((x, y) => x.id.localeCompare(y.id)),
      );
      const recorded = await query<{ id: string }>('SELECT id FROM webhook_events');
      expect(recorded.map((r) => r.id).sort()).toEqual(delivered.map((w) => w.id).sort());
      const list = await api('GET', '/subscription-checkouts');
      expect((list.body['data'] as Array<{ id: string }>).map((x) => x.id).sort()).toEqual(
        [aId, bId, cId].sort(),
      );

      // 6. The webhook commands cross too: a manual redelivery (sent again, same event id) and a test delivery,
      // both carried out by webhook-dispatch, which owns the schedule and the egress.
      const merchantId = String((await api('GET', '/settings')).body['merchant_id']);
      const first = delivered[0];
      if (!first) throw new Error('no delivery');
      const redeliver = await api('POST', `/merchants/${merchantId}/webhook-events/${first.id}/redeliver`);
      expect(redeliver.status).toBe(202);
      expect(redeliver.body).toMatchObject({ id: first.id });
      await receiver.waitFor(5, 60_000);
      expect(webhooks()[4]?.id).toBe(first.id);
      const missing = await api('POST', `/merchants/${merchantId}/webhook-events/evt_unknown/redeliver`);
      expect(missing.status).toBe(404);
      const test = await api('POST', '/settings/webhook/test');
      expect(test.status).toBe(200);
      expect(test.body).toMatchObject({ delivered: true, response_status: 200 });
    },
    6 * READY_MS,
  );
});
