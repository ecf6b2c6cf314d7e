import { Client } from 'pg';
import type { MigrationInterface, QueryRunner } from 'typeorm';
import { createTestDatabase, eventually, type TestDatabase, withClient } from '@stablepay/testing';
import { queryWithBoundedLockWait } from './bounded-lock-wait';
import { openDataSource } from './data-source';

/** The lock_timeout each migration's session had right after the bounded statement. */
const after: string[] = [];
const recordLockTimeout = async (q: QueryRunner) => {
  const [row] = (await q.query(`SELECT current_setting('lock_timeout') AS t`)) as Array<{ t: string }>;
  after.push(row?.t ?? 'unset');
};

class CreateGadgets1700000000100 implements MigrationInterface {
  async up(q: QueryRunner): Promise<void> {
    await q.query('CREATE TABLE IF NOT EXISTS gadgets (id serial PRIMARY KEY)');
    await q.query('INSERT INTO gadgets DEFAULT VALUES');
  }
  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE gadgets');
  }
}

/** In the migration's transaction (the runner's 'each'): the statement after it still runs in that transaction. */
class AddGadgetColour1700000000200 implements MigrationInterface {
  async up(q: QueryRunner): Promise<void> {
    await queryWithBoundedLockWait(q, 'ALTER TABLE gadgets ADD COLUMN IF NOT EXISTS colour text', {
      lockTimeoutMs: 50,
    });
    await recordLockTimeout(q);
    await q.query(`UPDATE gadgets SET colour = 'red'`);
  }
  async down(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE gadgets DROP COLUMN IF EXISTS colour');
  }
}

/** Outside a transaction (as a migration that also builds an index CONCURRENTLY). */
class AddGadgetSize1700000000300 implements MigrationInterface {
  readonly transaction = false;
  async up(q: QueryRunner): Promise<void> {
    await queryWithBoundedLockWait(q, 'ALTER TABLE gadgets ADD COLUMN IF NOT EXISTS size integer', {
      lockTimeoutMs: 50,
    });
    await recordLockTimeout(q);
  }
  async down(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE gadgets DROP COLUMN IF EXISTS size');
  }
}

/** A migration's ALTER TABLE waits a bounded time for its lock per try, so readers never queue behind it for long. */
describe('queryWithBoundedLockWait in a migration', () => {
  let db: TestDatabase;
  beforeEach(async () => {
    db = await createTestDatabase();
  });
  afterEach(async () => {
    await db.drop();
  });

  const withSql = <T>(run: (sql: Client) => Promise<T>): Promise<T> => withClient(db.url, run);
  const migrate = async (migrations: Array<new () => MigrationInterface>) =>
    (await openDataSource({ url: db.url, migrations })).destroy();
  const columns = () =>
    withSql((sql) =>
      sql.query<{ column_name: string }>(
        `SELECT column_name FROM information_schema.columns WHERE table_name = 'gadgets' ORDER BY column_name`,
      ),
    ).then((r) => r.rows.map((row) => row.column_name));

  it('applies the statement in and outside a transaction, and leaves the session lock_timeout as it was', async () => {
    after.length = 0;
    await migrate([CreateGadgets1700000000100, AddGadgetColour1700000000200, AddGadgetSize1700000000300]);
    expect(await columns()).toEqual(['colour', 'id', 'size']);
    expect(
      await withSql((sql) => sql.query<{ colour: string }>('SELECT colour FROM gadgets')).then((r) => r.rows),
    ).toEqual([{ colour: 'red' }]);
    expect(after).toEqual(['0', '0']);
  });

  const onPostgres = process.env['DATABASE_URL'] ? it : it.skip;
  // PGlite runs one connection at a time: no transaction can hold the table beside the migration there.
  onPostgres.each([
    ['in the migration transaction', AddGadgetColour1700000000200, 'colour'],
    ['outside a transaction', AddGadgetSize1700000000300, 'size'],
  ] as const)(
    '%s: while a long transaction holds the table, readers that come after the ALTER still read; it lands once that transaction ends',
    async (_, migration, column) => {
      await migrate([CreateGadgets1700000000100]);
      const holder = new Client({ connectionString: db.url });
      await holder.connect();
      try {
        await holder.query('BEGIN');
        await holder.query('SELECT count(*) FROM gadgets');
        const migrating = migrate([migration]);
        await eventually(
          () =>
            withSql((sql) =>
              sql.query(
                `SELECT 1 FROM pg_stat_activity
                  WHERE datname = current_database() AND query LIKE 'ALTER TABLE gadgets%' AND wait_event_type = 'Lock'`,
              ),
            ),
          (r) => r.rowCount === 1,
          'the ALTER waiting for the transaction before it',
          { intervalMs: 20 },
        );
        // A reader queued behind an unbounded ALTER waits for the holder, here for ever (lock_timeout: an error).
        const read = await withSql(async (sql) => {
          await sql.query(`SET lock_timeout = '30s'`);
          return sql.query('SELECT count(*)::int AS n FROM gadgets');
        });
        expect(read.rows).toEqual([{ n: 1 }]);
        await holder.query('COMMIT');
        await migrating;
      } finally {
        await holder.end();
      }
      expect(await columns()).toContain(column);
    },
    60_000,
  );
});
