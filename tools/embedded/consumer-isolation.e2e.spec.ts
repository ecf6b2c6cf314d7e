import { Client } from 'pg';
import { EVENT_STORE } from '@stablepay/aggregate';
import { SUBSCRIPTION_CHARGES_GROUP, SubscriptionChargesConsumer } from '@stablepay/charge-ledger-service';
import type { EventStore } from '@stablepay/event-store';
import { createTestDatabase, eventually, type TestDatabase } from '@stablepay/testing';
import { runAdminCli } from './admin-cli';
import { type EmbeddedStack, startEmbedded } from './embedded';
import { chargeIdOf, subscriptionFacts } from './subscription-facts';

/**
 * One merchant's message that a bus consumer cannot handle must not stop every merchant (issue 8): the charge
 * ledger's consumer (a plain `bus.consume`, no projection runner) meets a charge the database refuses for merchant
 * A. After its retries the bus parks A's subscription stream (A's later charge waits behind it), merchant B's
 * charges are recorded, /ready stays 200 but names the parked stream, and an operator retry through the CLI records
 * A's charges in order once the cause is gone.
 */
const ADMIN_TOKEN = 'admin-token-consumer-isolation-0123';
/** Polling with a generous bound (the machine is shared; parking takes ~16 s of the bus's back-off). */
const POLL = { timeoutMs: 120_000, intervalMs: 250 };

describe('a bus consumer parks the stream of a message that keeps failing (embedded stack)', () => {
  let db: TestDatabase;
  let stack: EmbeddedStack;
  let store: EventStore;
  const { subscription, charged } = subscriptionFacts(() => store);

  const newMerchant = async (name: string) => {
    const res = await fetch(`${stack.url}/admin/merchants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name, mode: 'test' }),
    });
    const body = (await res.json()) as { id: string; api_key: string };
    return { id: body.id, apiKey: body.api_key };
  };
  const nonces = async (who: { id: string; apiKey: string }, subscriptionId: string): Promise<number[]> => {
    const res = await fetch(`${stack.url}/merchants/${who.id}/charges?subscription_id=${subscriptionId}`, {
      headers: { authorization: `Bearer ${who.apiKey}` },
    });
    const body = (await res.json()) as { data: Array<{ charge_nonce: number }> };
    return body.data.map((c) => c.charge_nonce).sort();
  };
  const parkedStreams = async (): Promise<Array<Record<string, unknown>>> => {
    const res = await fetch(`${stack.url}/admin/parked-streams`, {
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    });
    return ((await res.json()) as { data: Array<Record<string, unknown>> }).data;
  };
  const sql = async (text: string): Promise<void> => {
    const pg = new Client({ connectionString: db.url });
    await pg.connect();
    try {
      await pg.query(text);
    } finally {
      await pg.end();
    }
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    stack = await startEmbedded({
      env: {
        DATABASE_URL: db.url,
        PORT: '0',
        ADMIN_TOKEN,
        LOG_LEVEL: 'fatal',
        STABLEPAY_LOCAL_CHAINS: 'false',
      },
      dataDir: 'memory',
    });
    store = stack.service.app.get<EventStore>(EVENT_STORE);
  });

  afterAll(async () => {
    await stack?.stop();
    await db?.drop();
  });

  it("parks merchant A's subscription stream while merchant B's charges are recorded, and records A's in order after a retry", async () => {
    const a = await newMerchant('Merchant A');
    const b = await newMerchant('Merchant B');
    const sa = await subscription(a);
    const sb = await subscription(b);
    // The database refuses A's first charge (standing for a draft it cannot hold), every time, until "fixed".
    const refused = `charge-${chargeIdOf(sa.subscriptionId, 0)}`;
    await sql(`
      CREATE FUNCTION refuse_charge() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.stream_id = '${refused}' THEN RAISE EXCEPTION 'the database refuses this charge'; END IF;
        RETURN NEW;
      END $$;
      CREATE TRIGGER refuse_charge BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION refuse_charge();`);

    await charged(a, sa, 0, 'api');
    await charged(a, sa, 1, 'api');
    await charged(b, sb, 0, 'api');
    const parked = await eventually(
      parkedStreams,
      (rows) => rows.some((p) => p['stream_id'] === `subscription-${sa.subscriptionId}`),
      "A's stream parked",
      POLL,
    );
    expect(parked.find((p) => p['stream_id'] === `subscription-${sa.subscriptionId}`)).toMatchObject({
      projection: SUBSCRIPTION_CHARGES_GROUP,
      revision: 1,
      event_type: 'SubscriptionChargeSucceeded.v1',
      waiting_revision: 2,
    });

    // B is recorded; A's later charge waits behind the parked one (per-stream order).
    await stack.service.app.get(SubscriptionChargesConsumer).caughtUp();
    await eventually(
      () => nonces(b, sb.subscriptionId),
      (n) => n.length === 1,
      "B's charge listed",
      POLL,
    );
    expect(await nonces(a, sa.subscriptionId)).toEqual([]);
    const ready = await fetch(`${stack.url}/ready`);
    expect(ready.status).toBe(200);
    const checks = ((await ready.json()) as { checks: Record<string, string> }).checks;
    expect(checks['consumers']).toBe(`degraded: ${SUBSCRIPTION_CHARGES_GROUP}: 1 parked stream(s)`);
    const metrics = await (await fetch(`${stack.url}/metrics`)).text();
    expect(metrics).toContain(`stablepay_consumer_parked_streams{group="${SUBSCRIPTION_CHARGES_GROUP}"} 1`);
    expect(metrics).toContain(`stablepay_consumer_stalled{group="${SUBSCRIPTION_CHARGES_GROUP}"} 0`);

    // The cause is fixed; the operator retries through the CLI (the group runs in this process: applied at once).
    await sql('DROP TRIGGER refuse_charge ON events; DROP FUNCTION refuse_charge();');
    const out: string[] = [];
    const code = await runAdminCli(
      [
        'retry-parked',
        '--projection',
        SUBSCRIPTION_CHARGES_GROUP,
        '--stream',
        `subscription-${sa.subscriptionId}`,
        '--url',
        stack.url,
      ],
      { ADMIN_TOKEN },
      (s) => out.push(s),
    );
    expect(code).toBe(0);
    expect(JSON.parse(out.join('\n'))).toMatchObject({ status: 'applied', parked_stream: null });
    await eventually(
      () => nonces(a, sa.subscriptionId),
      (n) => n.length === 2,
      "A's charges listed",
      POLL,
    );
    expect(await nonces(a, sa.subscriptionId)).toEqual([0, 1]);
    expect((await parkedStreams()).some((p) => p['projection'] === SUBSCRIPTION_CHARGES_GROUP)).toBe(false);
  }, 180_000);
});
