import { Client } from 'pg';
import { openDataSource } from '@stablepay/database';
import { createTestDatabase, eventually, type TestDatabase, withClient } from '@stablepay/testing';
import {
  AddSubscriptionObservationBlocks1795622400100,
  CreateSubscriptionChainObservations1767600000100,
  SUBSCRIPTIONS_MIGRATIONS,
} from './migrations';

/** createIndexConcurrently's lock for the first index the migration builds. */
const BUILD_LOCK = 'stablepay:create-index:subscription_chain_observations_open_receipts';

const upTo = (last: unknown) =>
  SUBSCRIPTIONS_MIGRATIONS.slice(0, SUBSCRIPTIONS_MIGRATIONS.indexOf(last as never) + 1);

/** The subscriptions migrations run by replicas starting together against the same database. */
describe('subscriptions migrations', () => {
  let db: TestDatabase;
  beforeEach(async () => {
    db = await createTestDatabase();
  });
  afterEach(async () => {
    await db.drop();
  });

  const migrate = async (applicationName: string) =>
    (
      await openDataSource({
        url: db.url,
        migrations: upTo(AddSubscriptionObservationBlocks1795622400100),
        applicationName,
      })
    ).destroy();
  const validIndexes = () =>
    withClient(db.url, (sql) =>
      sql.query<{ relname: string }>(
        `SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
          WHERE c.relname LIKE 'subscription_chain_observations_%' AND NOT i.indisprimary AND i.indisvalid ORDER BY 1`,
      ),
    ).then((r) => r.rows.map((row) => row.relname));

  it('adds the observation blocks and builds both indexes valid', async () => {
    await migrate('runner');
    expect(await validIndexes()).toEqual([
      'subscription_chain_observations_open_receipts',
      'subscription_chain_observations_tx',
    ]);
  });

  const onPostgres = process.env['DATABASE_URL'] ? it : it.skip;
  // The build waits for every snapshot older than its own before it finishes. A second runner holding one while it
  // waits for the first (its ALTER TABLE queued behind the build's SHARE UPDATE EXCLUSIVE, or a wait inside
  // pg_advisory_lock for the migration lock) is a deadlock PostgreSQL breaks by failing one of them: the migration
  // lock is polled between statements instead (data-source.ts).
  onPostgres(
    'a second replica starting while the first builds an index waits for it instead of deadlocking it',
    async () => {
      await (
        await openDataSource({
          url: db.url,
          migrations: upTo(CreateSubscriptionChainObservations1767600000100),
        })
      ).destroy();
      // A write in flight holds the first build at its start, so the second runner arrives during the build. The
      // write starts once the first runner's ALTER TABLE is done: the writer holds the build's lock until then.
      const writer = new Client({ connectionString: db.url });
      await writer.connect();
      let first: Promise<void> | undefined;
      let second: Promise<void> | undefined;
      try {
        await writer.query('SELECT pg_advisory_lock(hashtext($1))', [BUILD_LOCK]);
        first = migrate('runner-a');
        await eventually(
          () =>
            withClient(db.url, (sql) =>
              sql.query(
                // The build's lock (hashtext of its name), not the migration lock tried before the ALTER.
                `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'runner-a'
                   AND query LIKE '%pg_try_advisory_lock(hashtext(%'`,
              ),
            ),
          (r) => r.rowCount === 1,
          'the first runner past its ALTER TABLE, at the build',
          { intervalMs: 20 },
        );
        await writer.query('BEGIN');
        await writer.query('LOCK TABLE subscription_chain_observations IN ROW EXCLUSIVE MODE');
        await writer.query('SELECT pg_advisory_unlock(hashtext($1))', [BUILD_LOCK]);
        await eventually(
          () =>
            withClient(db.url, (sql) =>
              sql.query(
                `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'runner-a'
                   AND query LIKE 'CREATE INDEX CONCURRENTLY%' AND wait_event_type = 'Lock'`,
              ),
            ),
          (r) => r.rowCount === 1,
          'the first build waiting for the write in flight',
          { intervalMs: 20 },
        );
        second = migrate('runner-b');
        // The second runner has started: waiting for the migration lock (or, without it, queued on the table).
        await eventually(
          () =>
            withClient(db.url, (sql) =>
              sql.query(
                `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'runner-b'
                   AND ((query LIKE 'ALTER TABLE subscription_chain_observations%' AND wait_event_type = 'Lock')
                     OR query LIKE '%advisory_lock(%')`,
              ),
            ),
          (r) => (r.rowCount ?? 0) > 0,
          'the second runner at the migration',
          { intervalMs: 20 },
        );
        await writer.query('COMMIT');
      } finally {
        await writer.end();
      }
      const results = await Promise.allSettled([first, second]);
      expect(results.map((r) => (r.status === 'rejected' ? String(r.reason) : 'ok'))).toEqual(['ok', 'ok']);
      expect(await validIndexes()).toEqual([
        'subscription_chain_observations_open_receipts',
        'subscription_chain_observations_tx',
      ]);
    },
  );
});
