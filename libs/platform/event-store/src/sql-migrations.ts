import type { Pool, PoolClient } from 'pg';

/** One forward-only schema step. Versions are positive integers, applied in ascending order, each once. */
export interface SqlMigration {
  readonly version: number;
  readonly name: string;
  readonly sql: string;
}

/**
 * Applies the pending migrations of one component (e.g. 'event_store') in one transaction.
 *
 * Safe to call from every process at start: a transaction-scoped advisory lock keyed by the component makes
 * concurrent starters queue, and the second one finds the versions already recorded and applies nothing.
 * Everything runs on ONE connection, so it also works on PGlite, where a second connection would wait for
 * this transaction to end.
 */
export async function applySqlMigrations(
  pool: Pool,
  component: string,
  migrations: readonly SqlMigration[],
): Promise<number[]> {
  assertWellFormed(component, migrations);
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    try {
      const applied = await applyPending(client, component, migrations);
      await client.query('COMMIT');
      return applied;
    } catch (error) {
      await client.query('ROLLBACK');
      throw error;
    }
  } finally {
    client.release();
  }
}

async function applyPending(
  client: PoolClient,
  component: string,
  migrations: readonly SqlMigration[],
): Promise<number[]> {
  await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`stablepay.migrations.${component}`]);
  await client.query(`
    CREATE TABLE IF NOT EXISTS stablepay_schema_migrations (
      component  text        NOT NULL,
      version    integer     NOT NULL,
      name       text        NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (component, version)
    )`);
  const done = await client.query<{ version: number }>(
    'SELECT version FROM stablepay_schema_migrations WHERE component = $1',
    [component],
  );
  const appliedVersions = new Set(done.rows.map((r) => r.version));
  const applied: number[] = [];
  for (const migration of [...migrations].sort((a, b) => a.version - b.version)) {
    if (appliedVersions.has(migration.version)) continue;
    await client.query(migration.sql);
    await client.query(
      'INSERT INTO stablepay_schema_migrations (component, version, name) VALUES ($1, $2, $3)',
      [component, migration.version, migration.name],
    );
    applied.push(migration.version);
  }
  return applied;
}

function assertWellFormed(component: string, migrations: readonly SqlMigration[]): void {
  const seen = new Set<number>();
  for (const m of migrations) {
    if (!Number.isInteger(m.version) || m.version < 1) {
      throw new Error(`${component} migration '${m.name}': version must be a positive integer`);
    }
    if (seen.has(m.version))
      throw new Error(`${component}: migration version ${m.version} is declared twice`);
    seen.add(m.version);
  }
}
