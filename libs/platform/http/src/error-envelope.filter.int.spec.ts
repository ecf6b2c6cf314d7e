import { Client } from 'pg';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { toEnvelope } from './error-envelope.filter';

/** What PostgreSQL itself refuses of a client's value is that client's 400, whatever check at the edge missed it. */
describe('error envelope of PostgreSQL refusals (real PostgreSQL)', () => {
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

  const refusal = (sql: string, params: unknown[] = []) =>
    client.query(sql, params).then(
      () => {
        throw new Error('PostgreSQL accepted it');
      },
      (error: unknown) => error,
    );

  it('answers a NUL in a text parameter (SQLSTATE 22021) with 400 invalid_string, not 500', async () => {
    const error = await refusal('SELECT $1::text AS v', ['a\u0000b']);
    expect((error as { code?: string }).code).toBe('22021');
    expect(toEnvelope(error)).toEqual({
      status: 400,
      body: { error: expect.objectContaining({ type: 'invalid_request', code: 'invalid_string' }) },
    });
  });

  it('answers an untranslatable character (22P05) and a too complex statement (54001) with 400', () => {
    expect(toEnvelope({ code: '22P05', message: 'x' }).status).toBe(400);
    expect(toEnvelope({ driverError: { code: '54001' }, message: 'stack depth limit exceeded' })).toEqual({
      status: 400,
      body: { error: expect.objectContaining({ code: 'request_too_complex' }) },
    });
    // Other database failures stay the server's.
    expect(toEnvelope({ code: '57P01', message: 'terminating connection' }).status).toBe(500);
  });
});
