import { Client } from 'pg';
import { createTestDatabase } from './test-database';

describe('createTestDatabase', () => {
  it('gives each caller its own empty database that accepts SQL and is gone after drop', async () => {
    const a = await createTestDatabase();
    const b = await createTestDatabase();
    try {
      const ca = new Client({ connectionString: a.url });
      const cb = new Client({ connectionString: b.url });
      await ca.connect();
      await cb.connect();
      await ca.query('CREATE TABLE only_in_a (id int primary key)');
      await ca.query('INSERT INTO only_in_a VALUES (1)');
      const seenInA = await ca.query('SELECT count(*)::int AS n FROM only_in_a');
      expect(seenInA.rows[0].n).toBe(1);
      await expect(cb.query('SELECT 1 FROM only_in_a')).rejects.toThrow(/does not exist/);
      await ca.end();
      await cb.end();
    } finally {
      await a.drop();
      await b.drop();
    }
  });
});
