import { Client } from 'pg';
import type { DataSource } from 'typeorm';
import { openDataSource } from '@stablepay/database';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import {
  AddIdempotencyKeyGenerations1795536000300,
  IDEMPOTENCY_MIGRATIONS,
  ValidateIdempotencyKeyStateCheck1795795200700,
} from './idempotency.interceptor';

/**
 * The idempotency_keys migrations on a table in use: no step scans the table while it holds a lock that stops the
 * claims of keyed POSTs.
 */
describe('idempotency_keys migrations', () => {
  let db: TestDatabase;
  let ds: DataSource | undefined;

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await ds?.destroy();
    await db.drop();
  });

  const upTo = (last: (typeof IDEMPOTENCY_MIGRATIONS)[number]) =>
    IDEMPOTENCY_MIGRATIONS.slice(0, IDEMPOTENCY_MIGRATIONS.indexOf(last) + 1);
  const stateCheckValidated = async (source: DataSource) =>
    (
      (await source.query(
        `SELECT convalidated FROM pg_constraint WHERE conname = 'idempotency_keys_state_check'`,
      )) as Array<{ convalidated: boolean }>
    )[0]?.convalidated;

  it('the state check is added without a scan under the exclusive lock and validated by a later step that lets claims through', async () => {
    ds = await openDataSource({ url: db.url, migrations: upTo(AddIdempotencyKeyGenerations1795536000300) });
    await ds.query(
      `INSERT INTO idempotency_keys (scope, key, request_hash, state, created_at)
       SELECT 'm:test', 'k' || n, 'h', 'done', now() FROM generate_series(1, 50) n`,
    );
    expect(await stateCheckValidated(ds)).toBe(false);

    // The validation, in its transaction as the runner runs it: only SHARE UPDATE EXCLUSIVE on the table.
    const runner = ds.createQueryRunner();
    await runner.startTransaction();
    try {
      await new ValidateIdempotencyKeyStateCheck1795795200700().up(runner);
      const locks = (await runner.query(
        `SELECT mode FROM pg_locks WHERE relation = 'idempotency_keys'::regclass AND pid = pg_backend_pid()`,
      )) as Array<{ mode: string }>;
      expect(locks.map((l) => l.mode)).toEqual(['ShareUpdateExclusiveLock']);
      if (db.kind === 'postgres') {
        // A claim from another connection meanwhile goes through (the embedded PGlite runs one connection at a
        // time, so there is no other connection to ask while this transaction is open).
        const claim = new Client({ connectionString: db.url });
        await claim.connect();
        try {
          await claim.query(`SET lock_timeout = '5s'`);
          await claim.query(
            `INSERT INTO idempotency_keys (scope, key, request_hash, state, created_at)
             VALUES ('m:test', 'during-validation', 'h', 'in_flight', now())`,
          );
        } finally {
          await claim.end();
        }
      }
      await runner.commitTransaction();
    } finally {
      await runner.release();
    }
    expect(await stateCheckValidated(ds)).toBe(true);
    await ds.destroy();

    // The whole list applied (a start of any service): nothing left to run, the check valid and enforced.
    ds = await openDataSource({ url: db.url, migrations: IDEMPOTENCY_MIGRATIONS });
    expect(await stateCheckValidated(ds)).toBe(true);
    await expect(
      ds.query(
        `INSERT INTO idempotency_keys (scope, key, request_hash, state, created_at)
         VALUES ('m:test', 'bad', 'h', 'lost', now())`,
      ),
    ).rejects.toThrow(/idempotency_keys_state_check/);
  });
});
