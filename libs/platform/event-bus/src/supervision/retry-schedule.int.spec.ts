import { Client } from 'pg';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { RETRY_DUE } from './supervised-event-bus';

/** RETRY_DUE asked about one parked row: parked `parkedMinutesAgo` ago, `attempts` retries counted so far. */
describe('a parked stream is retried automatically on a doubling schedule, capped, never every poll', () => {
  let db: TestDatabase;
  let client: Client;
  beforeAll(async () => {
    db = await createTestDatabase();
    client = new Client({ connectionString: db.url });
    await client.connect();
  });
  afterAll(async () => {
    await client.end();
    await db.drop();
  });

  const due = async (parkedMinutesAgo: number, attempts: number, requested = false): Promise<boolean> => {
    const { rows } = await client.query<{ due: boolean }>(
      `SELECT ${RETRY_DUE} AS due
         FROM (SELECT $4::text AS projection,
                      now() - make_interval(mins => $5::int) AS parked_at,
                      $6::int AS attempts,
                      CASE WHEN $7::boolean THEN now() END AS retry_requested_at) AS parked_streams
        WHERE projection = $1`,
      ['group-a', 60, 1800, 'group-a', parkedMinutesAgo, attempts, requested],
    );
    return rows[0]?.due === true;
  };

  it('the first retry a minute after parking, then 2, 4, 8, 16 minutes after the one before', async () => {
    expect(await due(0, 1)).toBe(false);
    expect(await due(1, 1)).toBe(true);
    // Retries at 1, 3, 7, 15, 31 minutes after parking.
    expect(await due(2, 2)).toBe(false);
    expect(await due(3, 2)).toBe(true);
    expect(await due(30, 5)).toBe(false);
    expect(await due(31, 5)).toBe(true);
  });

  it('past the cap, one retry each 30 minutes after the one before, not one per poll', async () => {
    // Attempts 6 and on: 31 + 30 = 61 minutes, then 91, 121, 151.
    expect(await due(60, 6)).toBe(false);
    expect(await due(61, 6)).toBe(true);
    expect(await due(90, 7)).toBe(false);
    expect(await due(91, 7)).toBe(true);
    expect(await due(150, 9)).toBe(false);
    expect(await due(151, 9)).toBe(true);
  });

  it('an operator request is due at once; automatic retries off ($2 = 0) are never due by time', async () => {
    expect(await due(0, 3, true)).toBe(true);
    const { rows } = await client.query<{ due: boolean }>(
      `SELECT ${RETRY_DUE} AS due FROM (SELECT 'g'::text AS projection, now() - interval '1 day' AS parked_at,
              4 AS attempts, NULL::timestamptz AS retry_requested_at) AS parked_streams WHERE projection = $1`,
      ['g', 0, 1800],
    );
    expect(rows[0]?.due).toBe(false);
  });
});
