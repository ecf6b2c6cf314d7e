import type { TestDatabase } from '@stablepay/testing';
import { DataSource } from 'typeorm';
import { recordedDelivery } from '@stablepay/webhooks-domain';
import { WEBHOOKS_MIGRATIONS } from './migrations';
import { createWebhookTestDatabase as createTestDatabase } from './testing/webhook-test-database';
import { WebhookEventStore } from './webhook-event.store';

interface PlanNode {
  readonly 'Shared Hit Blocks'?: number;
  readonly 'Shared Read Blocks'?: number;
}

/**
 * What a claim reads must not grow with the merchants' delivered history: the schedule is found through the
 * partial due index whatever the planner's statistics say about how many rows are due.
 */
describe('the claim on a long history', () => {
  const now = new Date('2026-09-03T09:00:00.000Z');
  let db: TestDatabase;
  let dataSource: DataSource;
  let store: WebhookEventStore;

  beforeAll(async () => {
    db = await createTestDatabase();
    dataSource = new DataSource({
      type: 'postgres',
      url: db.url,
      migrations: [...WEBHOOKS_MIGRATIONS],
      extra: { max: 2 },
    });
    await dataSource.initialize();
    await dataSource.runMigrations({ transaction: 'each' });
    store = new WebhookEventStore(dataSource);
  });

  afterAll(async () => {
    await dataSource?.destroy();
    await db?.drop();
  });

  /** Blocks the claim's statement touched, from its plan (run, then rolled back). */
  async function blocksReadByClaim(): Promise<number> {
    const runner = dataSource.createQueryRunner();
    await runner.startTransaction();
    try {
      const explaining = {
        query: async (sql: string, params: unknown[]) =>
          (await runner.query(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${sql}`, params)) as unknown,
      } as unknown as DataSource;
      const [result] = (await new WebhookEventStore(explaining).claimDue({
        now,
        limit: 10,
        perMerchantLimit: 10,
        busy: new Map(),
        inFlight: [],
        leaseToken: 'lease-cost',
        leaseExpiresAt: new Date(now.getTime() + 60_000),
      })) as unknown as Array<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>;
      const plan = result?.['QUERY PLAN'][0]?.Plan;
      return (plan?.['Shared Hit Blocks'] ?? 0) + (plan?.['Shared Read Blocks'] ?? 0);
    } finally {
      await runner.rollbackTransaction();
      await runner.release();
    }
  }

  it('reads a few index pages, not every delivered event of each merchant, after a backlog drained', async () => {
    const merchants = Array.from({ length: 8 }, (_, m) => `mer_cost_${m}`);
    const total = 5_000;
    const events = Array.from({ length: total }, (_, i) => ({
      event: {
        id: `evt_cost_${i}`,
        merchantId: merchants[i % merchants.length] ?? '',
        type: 'subscription.charge_succeeded',
        createdAt: now,
        data: { object: { object: 'subscription', id: `sub_${i}` } },
        origin: {
          source: 'test',
          topic: 'charge',
          eventId: `cost_${i}`,
          streamId: 'charge-cost',
          revision: i,
        },
      },
      state: recordedDelivery(now),
      recordedAt: now,
    }));
    await store.record(events);
    // Statistics taken while the backlog was due (autovacuum's ANALYZE can land there), then the backlog is
    // delivered but for each merchant's last event; no vacuum yet (it runs minutes later, if at all under load).
    await dataSource.query('ANALYZE webhook_events');
    await dataSource.query(
      `UPDATE webhook_events SET delivery_status = 'delivered', attempt_count = 1, next_attempt_at = NULL,
         delivered_at = $1 WHERE source_revision < $2`,
      [now.toISOString(), total - merchants.length],
    );

    // The first scan after the drain steps over the index entries of the delivered rows' old versions and marks
    // them dead for the scans after it; the claims after it are what every poll pays.
    await blocksReadByClaim();
    const blocks = await blocksReadByClaim();

    // One due row for each of 8 merchants: ~200 blocks of the due index and the heap here, where the walk past
    // each merchant's delivered rows in (merchant_id, seq) order read ~4,700.
    expect(blocks).toBeLessThan(1_000);
  });
});
