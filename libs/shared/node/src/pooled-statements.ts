import type { Pool, QueryResultRow } from 'pg';
import { sharesOneSession } from './one-session';

/** What PooledStatements needs of a TypeORM DataSource (tests hand it a stand-in with `query` alone). */
export interface StatementSource {
  query(text: string, values?: unknown[]): Promise<unknown>;
  readonly driver?: unknown;
}

/**
 * Hot statements run on the pg pool under a TypeORM DataSource, as named prepared statements: parsed and planned
 * once per connection (PostgreSQL keeps a generic plan after five executions when it is no worse), and only the
 * name and the values sent each time. TypeORM's `query` makes a QueryRunner, logs and releases per call, which
 * a statement sent for every batch has no use for. Unnamed where the server shares one session between
 * connections (the embedded PGlite server: two connections preparing one name would collide); without a pg pool
 * (another driver, a test's stand-in) the call goes through `query`, whose result is returned as it comes.
 */
export class PooledStatements {
  private named: Promise<boolean> | undefined;

  constructor(private readonly source: StatementSource) {}

  private get pool(): Pool | undefined {
    // TypeORM's PostgresDriver keeps its pg Pool as `master` (no public accessor).
    const pool = (this.source.driver as { master?: Pool } | undefined)?.master;
    return pool && typeof pool.query === 'function' ? pool : undefined;
  }

  async query<R extends QueryResultRow>(name: string, text: string, values: unknown[]): Promise<R[]> {
    const pool = this.pool;
    if (!pool) return (await this.source.query(text, values)) as R[];
    // Probed once, at the first call; a failed probe (the database away) sends this call unnamed and probes again
    // next time. The probe holds two connections at once: a pool of one would wait for ever, so it goes unnamed.
    const max = (pool as { options?: { max?: number } }).options?.max;
    if (max !== undefined && max < 2) this.named ??= Promise.resolve(false);
    this.named ??= sharesOneSession(pool).then(
      (one) => !one,
      () => {
        this.named = undefined;
        return false;
      },
    );
    const named = await this.named;
    const { rows } = await pool.query<R>({ ...(named ? { name } : {}), text, values });
    return rows;
  }
}
