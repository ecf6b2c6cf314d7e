import type { MigrationInterface, QueryRunner } from 'typeorm';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { openDataSource } from './data-source';

class CreateWidgets1700000000001 implements MigrationInterface {
  async up(q: QueryRunner): Promise<void> {
    await q.query('CREATE TABLE widgets (id text primary key)');
  }
  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE widgets');
  }
}
class AddWidgetName1700000000002 implements MigrationInterface {
  async up(q: QueryRunner): Promise<void> {
    await q.query("ALTER TABLE widgets ADD COLUMN name text NOT NULL DEFAULT ''");
  }
  async down(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE widgets DROP COLUMN name');
  }
}

describe('openDataSource', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db.drop();
  });

  it('applies migrations in timestamp order whatever order they are listed in, once', async () => {
    const first = await openDataSource({
      url: db.url,
      migrations: [AddWidgetName1700000000002, CreateWidgets1700000000001],
    });
    await first.query("INSERT INTO widgets (id, name) VALUES ('w1', 'one')");
    await first.destroy();
    const second = await openDataSource({
      url: db.url,
      migrations: [CreateWidgets1700000000001, AddWidgetName1700000000002],
    });
    const rows: Array<{ id: string; name: string }> = await second.query('SELECT id, name FROM widgets');
    expect(rows).toEqual([{ id: 'w1', name: 'one' }]);
    const applied: Array<{ name: string }> = await second.query('SELECT name FROM migrations ORDER BY id');
    expect(applied.map((r) => r.name)).toEqual(['CreateWidgets1700000000001', 'AddWidgetName1700000000002']);
    await second.destroy();
  });
});
