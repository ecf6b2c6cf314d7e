import type { Pool } from 'pg';

/**
 * Whether the server behind the pool runs every connection in one session (the embedded PGlite server does:
 * one backend serves all connections in turn), seen by preparing a statement on one connection and looking for
 * it from another. Prepared statements are per session on a real server; on a shared session two connections
 * preparing the same name would collide, so named statements are only for a server where this is false.
 */
export async function sharesOneSession(pool: Pool): Promise<boolean> {
  const name = `sp_session_probe_${process.pid}_${Date.now().toString(36)}_${Math.random().toString(36).slice(2)}`;
  const a = await pool.connect();
  try {
    const b = await pool.connect();
    try {
      await a.query(`PREPARE ${name} AS SELECT 1`);
      try {
        const { rows } = await b.query<{ n: number }>(
          'SELECT count(*)::int AS n FROM pg_prepared_statements WHERE name = $1',
          [name],
        );
        return (rows[0]?.n ?? 0) > 0;
      } finally {
        await a.query(`DEALLOCATE ${name}`);
      }
    } finally {
      b.release();
    }
  } finally {
    a.release();
  }
}
