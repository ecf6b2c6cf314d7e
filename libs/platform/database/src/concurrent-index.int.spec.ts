import { Client } from 'pg';
import type { MigrationInterface, QueryRunner } from 'typeorm';
import { createTestDatabase, eventually, type TestDatabase, withClient } from '@stablepay/testing';
import { createIndexConcurrently } from './concurrent-index';
import { openDataSource } from './data-source';

class CreateWidgets1700000000100 implements MigrationInterface {
  async up(q: QueryRunner): Promise<void> {
    await q.query('CREATE TABLE IF NOT EXISTS widgets (id serial PRIMARY KEY, tx_hash text NOT NULL)');
    await q.query(`INSERT INTO widgets (tx_hash) SELECT '0xAB' || n FROM generate_series(1, 200) n`);
  }
  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE widgets');
  }
}

class IndexWidgetsByTx1700000000200 implements MigrationInterface {
  readonly transaction = false;
  async up(q: QueryRunner): Promise<void> {
    await createIndexConcurrently(q, 'widgets_tx', 'ON widgets (lower(tx_hash))');
  }
  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP INDEX IF EXISTS widgets_tx');
  }
}

/** Indexes built by migrations on tables in use: writes go on during the build, and a build that died is redone. */
describe('createIndexConcurrently in a migration', () => {
  let db: TestDatabase;
  beforeEach(async () => {
    db = await createTestDatabase();
  });
  afterEach(async () => {
    await db.drop();
  });

  const withSql = <T>(run: (sql: Client) => Promise<T>): Promise<T> => withClient(db.url, run);
  const indexValid = (sql: Client) =>
    sql
      .query<{ valid: boolean }>(
        `SELECT i.indisvalid AS valid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = 'widgets_tx'`,
      )
      .then((r) => r.rows[0]?.valid);
  const migrate = async () =>
    (
      await openDataSource({
        url: db.url,
        migrations: [CreateWidgets1700000000100, IndexWidgetsByTx1700000000200],
      })
    ).destroy();

  it('builds the index outside a transaction, valid, and finds it built when run again', async () => {
    await migrate();
    expect(await withSql(indexValid)).toBe(true);
    await withSql((sql) => sql.query(`DELETE FROM migrations WHERE name = 'IndexWidgetsByTx1700000000200'`));
    await migrate();
    expect(await withSql(indexValid)).toBe(true);
  });

  const onPostgres = process.env['DATABASE_URL'] ? it : it.skip;
  // PGlite runs one connection at a time: no write can go on beside a build there, nor beside an open transaction.
  onPostgres(
    'lets writes to the table go on while it builds (a plain CREATE INDEX held them for the build)',
    async () => {
      await (await openDataSource({ url: db.url, migrations: [CreateWidgets1700000000100] })).destroy();
      // A transaction in flight on the table: the build waits for it, as any build waits for writers before it.
      const older = new Client({ connectionString: db.url });
      await older.connect();
      try {
        await older.query('BEGIN');
        await older.query(`INSERT INTO widgets (tx_hash) VALUES ('0xbefore')`);
        const migrating = migrate();
        await eventually(
          () =>
            withSql((sql) =>
              sql.query(
                `SELECT 1 FROM pg_stat_activity
                  WHERE datname = current_database() AND query LIKE 'CREATE INDEX%widgets_tx%' AND wait_event_type = 'Lock'`,
              ),
            ),
          (r) => r.rowCount === 1,
          'the index build waiting for the transaction before it',
          { intervalMs: 20 },
        );
        // A write that starts now does not queue behind the build (lock_timeout turns a wait into an error).
        await withSql(async (sql) => {
          await sql.query(`SET lock_timeout = '5s'`);
          await sql.query(`INSERT INTO widgets (tx_hash) VALUES ('0xduring')`);
        });
        await older.query('COMMIT');
        await migrating;
      } finally {
        await older.end();
      }
      expect(await withSql(indexValid)).toBe(true);
    },
  );

  onPostgres(
    'two runners at once (pods starting together): the second waits for the first build, the index is valid for both',
    async () => {
      // The table (and the runner's own migrations table) first: what races here is the index.
      await (await openDataSource({ url: db.url, migrations: [CreateWidgets1700000000100] })).destroy();
      await Promise.all([migrate(), migrate()]);
      expect(await withSql(indexValid)).toBe(true);
    },
  );

  it('drops and builds again an index whose build died (left INVALID, which IF NOT EXISTS would keep)', async () => {
    await migrate();
    await withSql(async (sql) => {
      await sql.query(`UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'widgets_tx'::regclass`);
      await sql.query(`DELETE FROM migrations WHERE name = 'IndexWidgetsByTx1700000000200'`);
    });
    await migrate();
    expect(await withSql(indexValid)).toBe(true);
  });
});
