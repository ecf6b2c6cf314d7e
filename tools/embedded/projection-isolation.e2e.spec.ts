import { Client } from 'pg';
import { EVENT_STORE } from '@stablepay/aggregate';
import type { EventStore } from '@stablepay/event-store';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { runAdminCli } from './admin-cli';
import { type EmbeddedStack, startEmbedded } from './embedded';

/**
 * One bad event must not stop every merchant: a poison event in merchant A's stream parks A's stream in the
 * settings projection; merchant B (and merchant creation) keep working through HTTP; /ready and /metrics show
 * it; after the cause is fixed an operator retry applies A's events in order.
 */
const ADMIN_TOKEN = 'admin-token-isolation-0123456789';
const PROJECTION = 'merchants.settings-projection';

describe('a projection parks the stream of an event it cannot apply (embedded stack)', () => {
  let db: TestDatabase;
  let stack: EmbeddedStack;

  const call = async (method: string, path: string, token: string, body?: unknown) => {
    const res = await fetch(`${stack.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    return {
      status: res.status,
      body: text.startsWith('{') ? (JSON.parse(text) as Record<string, unknown>) : {},
    };
  };
  const newMerchant = async (name: string) => {
    const { status, body } = await call('POST', '/admin/merchants', ADMIN_TOKEN, { name, mode: 'test' });
    expect(status).toBe(201);
    return { id: String(body['id']), key: String(body['api_key']) };
  };
  const ready = async () => {
    const res = await fetch(`${stack.url}/ready`);
    return { status: res.status, body: (await res.json()) as { checks: Record<string, string> } };
  };
  const metric = async (line: string): Promise<number | undefined> => {
    const text = await (await fetch(`${stack.url}/metrics`)).text();
    const found = text.split('\n').find((l) => l.startsWith(line + ' '));
    return found === undefined ? undefined : Number(found.slice(line.length + 1));
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    stack = await startEmbedded({
      env: { DATABASE_URL: db.url, PORT: '0', ADMIN_TOKEN, LOG_LEVEL: 'error' },
      dataDir: 'memory',
      localChains: false,
    });
  });
  afterAll(async () => {
    await stack?.stop();
    await db?.drop();
  });

  it("parks merchant A's stream while merchant B keeps working, shows it in /ready and /metrics, and applies A after a retry", async () => {
    const a = await newMerchant('Merchant A');
    const b = await newMerchant('Merchant B');
    const store = stack.service.app.get<EventStore>(EVENT_STORE);
    const streamA = `merchant-${a.id}`;
    const [created] = await store.readStream(streamA);
    // The poison, appended directly as a buggy writer would: a value the read model cannot hold.
    await store.appendToStream(
      streamA,
      [
        {
          id: `poison-${a.id}`,
          type: 'MerchantProfileUpdated.v1',
          data: { displayName: null, updatedAt: '2026-06-01T10:00:00.000Z' },
          metadata: { ...created?.metadata },
        },
      ],
      { expectedRevision: 0 },
    );
    const parked = await waitFor(async () => {
      const { body } = await call('GET', '/admin/parked-streams', ADMIN_TOKEN);
      const data = body['data'] as Array<Record<string, unknown>>;
      return data.find((p) => p['stream_id'] === streamA);
    });
    expect(parked).toMatchObject({
      projection: PROJECTION,
      revision: 1,
      event_type: 'MerchantProfileUpdated.v1',
    });
    expect(String(parked['error'])).toMatch(/display_name/);

    // Merchant B's writes, and merchant creation, answer as usual.
    const patched = await call('PATCH', '/settings', b.key, { display_name: 'B renamed' });
    expect(patched.status).toBe(200);
    expect(patched.body['display_name']).toBe('B renamed');
    await newMerchant('Merchant C');

    // Ready but degraded, with the details; the metric counts the parked stream.
    const degraded = await ready();
    expect(degraded.status).toBe(200);
    expect(degraded.body.checks['projections']).toBe(`degraded: ${PROJECTION}: 1 parked stream(s)`);
    expect(await metric(`stablepay_projection_parked_streams{projection="${PROJECTION}"}`)).toBe(1);
    expect(await metric(`stablepay_projection_batch_size_count{projection="${PROJECTION}"}`)).toBeGreaterThan(
      0,
    );

    // The operator fixes the cause (here the read model learns to hold the value, standing for the deploy
    // that fixes it) and retries through the CLI.
    const pg = new Client({ connectionString: db.url });
    await pg.connect();
    try {
      await pg.query('ALTER TABLE merchant_settings ALTER COLUMN display_name DROP NOT NULL');
    } finally {
      await pg.end();
    }
    const out: string[] = [];
    expect(
      await runAdminCli(
        ['retry-parked', '--projection', PROJECTION, '--stream', streamA, '--url', stack.url],
        { ADMIN_TOKEN },
        (s) => out.push(s),
      ),
    ).toBe(0);
    expect(JSON.parse(out.join('\n'))).toMatchObject({ status: 'applied', parked_stream: null });
    expect((await ready()).body.checks['projections']).toBe('ok');
    expect(await metric(`stablepay_projection_parked_streams{projection="${PROJECTION}"}`)).toBe(0);

    // A is live again: its next write is read back.
    const again = await call('PATCH', '/settings', a.key, { display_name: 'A is back' });
    expect(again.status).toBe(200);
    expect(again.body['display_name']).toBe('A is back');
    expect(
      (await call('POST', `/admin/projections/${PROJECTION}/parked-streams/${streamA}/retry`, ADMIN_TOKEN))
        .status,
    ).toBe(404);
  });
});

async function waitFor<T>(probe: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
