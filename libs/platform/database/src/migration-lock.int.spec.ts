import { Logger } from '@nestjs/common';
import { Client } from 'pg';
import type { DataSource, MigrationInterface, QueryRunner } from 'typeorm';
import { PostgresQueryRunner } from 'typeorm/driver/postgres/PostgresQueryRunner';
import { createTestDatabase, eventually, type TestDatabase } from '@stablepay/testing';
import { MIGRATION_LOCK, openDataSource } from './data-source';

/**
 * Replicas starting together each apply the pending migrations at start. A test lock (the gate) holds the first
 * migration of whichever run gets there, so every run is in flight at once before any migration commits: without
 * the migration lock they all find the same migrations pending and the plain CREATE fails in all but one.
 */
const GATE = 7340601;

class CreateWidgets1700000000001 implements MigrationInterface {
  async up(q: QueryRunner): Promise<void> {
    await q.query('SELECT pg_advisory_xact_lock_shared($1)', [GATE]);
    await q.query('CREATE TABLE widgets (id text PRIMARY KEY)');
    await q.query('CREATE TABLE backfill_runs (ran_at timestamptz NOT NULL DEFAULT clock_timestamp())');
  }
  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP TABLE backfill_runs, widgets');
  }
}
class BackfillWidgets1700000000002 implements MigrationInterface {
  async up(q: QueryRunner): Promise<void> {
    await q.query('INSERT INTO backfill_runs DEFAULT VALUES');
  }
  async down(q: QueryRunner): Promise<void> {
    await q.query('TRUNCATE backfill_runs');
  }
}
class AddWidgetName1700000000003 implements MigrationInterface {
  async up(q: QueryRunner): Promise<void> {
    await q.query("ALTER TABLE widgets ADD COLUMN name text NOT NULL DEFAULT ''");
  }
  async down(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE widgets DROP COLUMN name');
  }
}
const MIGRATIONS = [CreateWidgets1700000000001, BackfillWidgets1700000000002, AddWidgetName1700000000003];
const ALL_NAMES = MIGRATIONS.map((m) => m.name);

const databaseUrl = process.env['DATABASE_URL'];
if (!databaseUrl) {
  console.log(
    'concurrent migration runs skipped: on PGlite every connection is one backend session, so an advisory lock ' +
      'excludes nothing there (embedded mode runs its migrations once, in one process)',
  );
}

/** What the runs are doing: held at the gate, waiting for the migration lock (logged), done with waiting, ended. */
interface RunsState {
  readonly atGate: number;
  readonly waiting: number;
  readonly took: number;
  readonly ended: readonly string[];
}

/** A fresh database, a client holding the gate, the migration log's lines, and what the runs left behind. */
async function startRuns() {
  const db = await createTestDatabase();
  const gate = new Client({ connectionString: db.url });
  await gate.connect();
  await gate.query('SELECT pg_advisory_lock($1)', [GATE]);
  const logged: string[] = [];
  jest.spyOn(Logger.prototype, 'log').mockImplementation((message: unknown) => {
    logged.push(String(message));
  });
  const opened: DataSource[] = [];
  const ended: string[] = [];
  const start = (name: string): Promise<DataSource> => {
    const run = openDataSource({ url: db.url, migrations: MIGRATIONS, applicationName: name });
    run.then(
      (ds) => {
        opened.push(ds);
        ended.push(`${name}: done`);
      },
      (e: unknown) => ended.push(`${name}: ${e instanceof Error ? e.message : String(e)}`),
    );
    return run;
  };
  const lines = (prefix: string) => logged.filter((l) => l.startsWith(prefix));
  const state = async (endedBefore: number): Promise<RunsState> => {
    const rows = await gate.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND objid = $1
          AND objsubid = 1 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
      [GATE],
    );
    return {
      atGate: rows.rows[0]?.n ?? 0,
      waiting: lines('waiting for the migration lock').length,
      took: lines('took the migration lock').length,
      ended: ended.slice(endedBefore),
    };
  };
  /**
   * Until the runs reach `expected`, failing at once (with its message) if a run ends on the way or more runs than
   * expected reach the gate: without the migration lock they all do, saying nothing.
   */
  const until = async (expected: Omit<RunsState, 'ended'>, what: string): Promise<void> => {
    const endedBefore = ended.length;
    const seen = await eventually(
      () => state(endedBefore),
      (s) =>
        s.ended.length > 0 ||
        s.atGate > expected.atGate ||
        (s.atGate === expected.atGate && s.waiting >= expected.waiting && s.took >= expected.took),
      what,
    );
    expect(seen).toEqual({ ...expected, ended: [] });
  };
  const applied = async () => {
    const names = await gate.query<{ name: string }>('SELECT name FROM migrations ORDER BY id');
    const backfills = await gate.query<{ n: number }>('SELECT count(*)::int AS n FROM backfill_runs');
    return { migrations: names.rows.map((r) => r.name), backfills: backfills.rows[0]?.n };
  };
  const openGate = () => gate.query('SELECT pg_advisory_unlock($1)', [GATE]);
  const stop = async () => {
    await Promise.all(opened.map((ds) => ds.destroy()));
    await gate.end();
    await db.drop();
  };
  return { gate, logged, start, until, openGate, applied, stop };
}

(databaseUrl ? describe : describe.skip)('migration runs started together (PostgreSQL)', () => {
  let runs: Awaited<ReturnType<typeof startRuns>> | undefined;
  afterEach(async () => {
    jest.restoreAllMocks();
    await runs?.stop();
    runs = undefined;
  });

  it('on a fresh database, three runs at once all succeed and each migration (and its backfill) runs once', async () => {
    const r = (runs = await startRuns());
    const starts = ['replica-a', 'replica-b', 'replica-c'].map((name) => r.start(name));
    // One run inside the first migration (held at the gate), the two others waiting for the migration lock.
    await r.until({ atGate: 1, waiting: 2, took: 0 }, 'every run to be in flight');
    await r.openGate();
    const outcomes = await Promise.allSettled(starts);
    expect(outcomes.map((o) => (o.status === 'rejected' ? String(o.reason) : o.status))).toEqual([
      'fulfilled',
      'fulfilled',
      'fulfilled',
    ]);
    expect(await r.applied()).toEqual({ migrations: ALL_NAMES, backfills: 1 });
  });

  it('a run that waits for the lock logs which session holds it and what that session is running', async () => {
    const r = (runs = await startRuns());
    const first = r.start('gateway-pod-1');
    await r.until({ atGate: 1, waiting: 0, took: 0 }, 'the first run to reach the gate');
    const second = r.start('gateway-pod-2');
    await r.until({ atGate: 1, waiting: 1, took: 0 }, 'the second run to say it waits');
    expect(r.logged.find((l) => l.startsWith('waiting for the migration lock'))).toMatch(
      /held by pid \d+ \(gateway-pod-1( at [^)]+)?\), running: SELECT pg_advisory_xact_lock_shared/,
    );
    await r.openGate();
    await Promise.all([first, second]);
    expect(r.logged.filter((l) => l.startsWith('took the migration lock after'))).toHaveLength(1);
    expect(await r.applied()).toEqual({ migrations: ALL_NAMES, backfills: 1 });
  });

  it('when the holder dies mid-migration, its lock goes with its session and the next run applies everything', async () => {
    const r = (runs = await startRuns());
    const doomed = r.start('replica-killed');
    await r.until({ atGate: 1, waiting: 0, took: 0 }, 'the first run to reach the gate');
    const next = r.start('replica-next');
    await r.until({ atGate: 1, waiting: 1, took: 0 }, 'the second run to wait for the migration lock');
    // What a SIGKILLed pod leaves: its connections closed by the server.
    await r.gate.query(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
        WHERE application_name = 'replica-killed' AND datname = current_database()`,
    );
    await expect(doomed).rejects.toThrow();
    // The next run takes the migration lock the dead one lost, and is held at the gate in its turn.
    await r.until({ atGate: 1, waiting: 1, took: 1 }, 'the next run to take the lock and reach the gate');
    await r.openGate();
    await next;
    expect(await r.applied()).toEqual({ migrations: ALL_NAMES, backfills: 1 });
  });
});

describe('migration lock', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db.drop();
  });

  it('is let go once the migrations are applied, so a replica starting later does not wait', async () => {
    class CreateGadgets1700000000010 implements MigrationInterface {
      async up(q: QueryRunner): Promise<void> {
        await q.query('CREATE TABLE gadgets (id text PRIMARY KEY)');
      }
      async down(q: QueryRunner): Promise<void> {
        await q.query('DROP TABLE gadgets');
      }
    }
    const ds = await openDataSource({ url: db.url, migrations: [CreateGadgets1700000000010] });
    try {
      const held: Array<{ n: number }> = await ds.query(
        `SELECT count(*)::int AS n FROM pg_locks
          WHERE locktype = 'advisory' AND classid = $1 AND objid = $2 AND objsubid = 2
            AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
        [MIGRATION_LOCK.space, MIGRATION_LOCK.id],
      );
      expect(held).toEqual([{ n: 0 }]);
      expect(await ds.query('SELECT name FROM migrations')).toEqual([{ name: 'CreateGadgets1700000000010' }]);
    } finally {
      await ds.destroy();
    }
  });

  it('asks the server to probe the migrating session, so a holder whose host died loses the lock within a minute', async () => {
    class RecordKeepalives1700000000020 implements MigrationInterface {
      async up(q: QueryRunner): Promise<void> {
        await q.query(`CREATE TABLE migrating_session AS
          SELECT current_setting('tcp_keepalives_idle') AS idle, current_setting('tcp_keepalives_interval') AS every,
                 current_setting('tcp_keepalives_count') AS probes, inet_client_addr() IS NOT NULL AS over_tcp`);
      }
      async down(q: QueryRunner): Promise<void> {
        await q.query('DROP TABLE migrating_session');
      }
    }
    const ds = await openDataSource({
      url: db.url,
      migrations: [RecordKeepalives1700000000020],
      poolSize: 1,
    });
    try {
      const [seen] = (await ds.query('SELECT * FROM migrating_session')) as Array<Record<string, unknown>>;
      if (seen?.['over_tcp'] !== true) {
        console.log('keepalive check skipped: the session is no TCP connection (a Unix socket or PGlite)');
        return;
      }
      expect(seen).toEqual({ idle: '30', every: '10', probes: '3', over_tcp: true });
      // The pooled session (the only one: pool of one) goes back to what any new session has.
      const fresh = new Client({ connectionString: db.url });
      await fresh.connect();
      try {
        const { rows } = await fresh.query("SELECT current_setting('tcp_keepalives_idle') AS idle");
        expect(await ds.query("SELECT current_setting('tcp_keepalives_idle') AS idle")).toEqual(rows);
      } finally {
        await fresh.end();
      }
    } finally {
      await ds.destroy();
    }
  });

  it('a session that refuses the keepalive settings still migrates and starts (a warning, not a failed start)', async () => {
    class CreateSprockets1700000000030 implements MigrationInterface {
      async up(q: QueryRunner): Promise<void> {
        await q.query('CREATE TABLE sprockets (id text PRIMARY KEY)');
      }
      async down(q: QueryRunner): Promise<void> {
        await q.query('DROP TABLE sprockets');
      }
    }
    // A pooler or server that refuses these settings: both the set before and the reset after are refused.
    const query = PostgresQueryRunner.prototype.query;
    const refused = jest.spyOn(PostgresQueryRunner.prototype, 'query').mockImplementation(function (
      this: PostgresQueryRunner,
      sql: string,
      ...rest: unknown[]
    ) {
      if (sql.includes('tcp_keepalives')) return Promise.reject(new Error('parameter cannot be changed now'));
      return (query as (...a: unknown[]) => Promise<unknown>).call(this, sql, ...rest);
    } as typeof query);
    const ds = await openDataSource({ url: db.url, migrations: [CreateSprockets1700000000030] }).finally(() =>
      refused.mockRestore(),
    );
    try {
      expect(
        await ds.query("SELECT name FROM migrations WHERE name = 'CreateSprockets1700000000030'"),
      ).toEqual([{ name: 'CreateSprockets1700000000030' }]);
    } finally {
      await ds.destroy();
    }
  });
});
