import { createTestDatabase, type TestDatabase, testPool } from '@stablepay/testing';
import type { Pool } from 'pg';
import type { DataSource, QueryRunner } from 'typeorm';
import {
  type ActionSubmissions,
  AddPaymentActionSubmissionFailures1767600000200,
  CreatePaymentActionSubmissions1767500000000,
  InMemoryActionSubmissions,
  PostgresActionSubmissions,
} from './action-submissions';

/**
 * Two submitters can finish one kept call (a replica resuming unfinished calls at start while another has it in
 * flight): the one whose transaction landed wins. A failure marked after the success must not make the kept call
 * look failed, or a retry under the same Idempotency-Key would run again as a new attempt (a second capture).
 */
describe.each<[string, () => Promise<ActionSubmissions>]>([
  ['PostgresActionSubmissions', async () => postgres()],
  ['InMemoryActionSubmissions', () => Promise.resolve(new InMemoryActionSubmissions())],
])('%s: the landed outcome of a kept call wins', (_name, open) => {
  const call = (commandId: string) => ({
    paymentId: 'pay_race',
    commandId,
    chain: 'eip155:8453',
    to: '0x00000000000000000000000000000000000000aa',
    data: '0x',
  });

  it('a failure marked after the success leaves it done and not failed', async () => {
    const submissions = await open();
    await submissions.save(call('cmd_1'));
    await submissions.markDone('pay_race', 'cmd_1', '0xlanded', false);
    await submissions.markDone('pay_race', 'cmd_1', '0xreverted', true);
    expect(await submissions.find('pay_race', 'cmd_1')).toMatchObject({ done: true, failed: false });
  });

  it('a success marked after a failure makes it done and not failed', async () => {
    const submissions = await open();
    await submissions.save(call('cmd_2'));
    await submissions.markDone('pay_race', 'cmd_2', '0xreverted', true);
    await submissions.markDone('pay_race', 'cmd_2', '0xlanded', false);
    expect(await submissions.find('pay_race', 'cmd_2')).toMatchObject({ done: true, failed: false });
  });
});

let database: TestDatabase | undefined;
let pool: Pool | undefined;
async function postgres(): Promise<ActionSubmissions> {
  if (!pool) {
    database = await createTestDatabase();
    pool = testPool({ connectionString: database.url, max: 2 });
    const runner = { query: (sql: string) => pool?.query(sql) } as unknown as QueryRunner;
    await new CreatePaymentActionSubmissions1767500000000().up(runner);
    await new AddPaymentActionSubmissionFailures1767600000200().up(runner);
  }
  const db = pool;
  return new PostgresActionSubmissions({
    query: async (sql: string, params?: unknown[]) => (await db.query(sql, params)).rows,
  } as unknown as DataSource);
}

afterAll(async () => {
  await pool?.end();
  await database?.drop();
});
