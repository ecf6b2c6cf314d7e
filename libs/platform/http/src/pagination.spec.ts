import fc from 'fast-check';
import { Client } from 'pg';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { DomainError } from '@stablepay/util';
import { keysetPage, parseListQuery, type Queryable } from './pagination';

describe('parseListQuery', () => {
  it('defaults limit to 10 and accepts 1..100', () => {
    expect(parseListQuery({})).toEqual({ limit: 10 });
    expect(parseListQuery({ limit: '100' }).limit).toBe(100);
  });
  it.each(['0', '101', '-1', '1.5', 'ten', ''])('rejects limit=%j with param limit', (limit) => {
    expect(() => parseListQuery({ limit })).toThrow(
      expect.objectContaining({ type: 'validation_error', param: 'limit' }),
    );
  });
  it('rejects both cursors with 400 validation_error on ending_before', () => {
    let thrown: unknown;
    try {
      parseListQuery({ starting_after: 'a', ending_before: 'b' });
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(DomainError);
    expect(thrown).toMatchObject({ status: 400, type: 'validation_error', param: 'ending_before' });
  });
  it('rejects a repeated parameter', () => {
    expect(() => parseListQuery({ limit: ['1', '2'] })).toThrow(expect.objectContaining({ param: 'limit' }));
  });
});

describe('keysetPage on a real database', () => {
  let db: TestDatabase;
  let client: Client;
  let q: Queryable;
  const ROWS = 57;

  beforeAll(async () => {
    db = await createTestDatabase();
    client = new Client({ connectionString: db.url });
    await client.connect();
    q = { query: async (sql, params) => (await client.query(sql, params as unknown[])).rows };
    await client.query(
      'CREATE TABLE items (seq bigint generated always as identity primary key, id text unique, owner text, colour text)',
    );
    for (let i = 0; i < ROWS; i++) {
      await client.query('INSERT INTO items (id, owner, colour) VALUES ($1, $2, $3)', [
        `it_${i}`,
        'm1',
        i % 3 === 0 ? 'red' : 'blue',
      ]);
    }
    await client.query("INSERT INTO items (id, owner, colour) VALUES ('other_merchant_row', 'm2', 'red')");
  });
  afterAll(async () => {
    await client.end();
    await db.drop();
  });

  const scope = [(p: (v: unknown) => string) => `owner = ${p('m1')}`];
  const page = (query: ReturnType<typeof parseListQuery>, colour?: string) =>
    keysetPage<{ id: string }>(q, {
      table: 'items',
      scope,
      filters: colour ? [(p) => `colour = ${p(colour)}`] : [],
      query,
      select: 'id',
    });

  it('lists newest first and says has_more on the first page', async () => {
    const first = await page({ limit: 3 });
    expect(first.rows.map((r) => r.id)).toEqual(['it_56', 'it_55', 'it_54']);
    expect(first.hasMore).toBe(true);
  });

  it('has_more on an ending_before page means more rows exist before (newer), never the other direction', async () => {
    const back = await page({ limit: 3, endingBefore: 'it_52' });
    expect(back.rows.map((r) => r.id)).toEqual(['it_55', 'it_54', 'it_53']);
    expect(back.hasMore).toBe(true);
    const head = await page({ limit: 3, endingBefore: 'it_53' });
    expect(head.rows.map((r) => r.id)).toEqual(['it_56', 'it_55', 'it_54']);
    expect(head.hasMore).toBe(false);
  });

  it('has_more on a starting_after page is false at the oldest row', async () => {
    const tail = await page({ limit: 5, startingAfter: 'it_2' });
    expect(tail.rows.map((r) => r.id)).toEqual(['it_1', 'it_0']);
    expect(tail.hasMore).toBe(false);
  });

  it("an unknown cursor, or another merchant's row as cursor, is a clear 400 naming the cursor param", async () => {
    await expect(page({ limit: 3, startingAfter: 'nope' })).rejects.toMatchObject({
      status: 400,
      param: 'starting_after',
      code: 'resource_missing',
    });
    await expect(page({ limit: 3, endingBefore: 'other_merchant_row' })).rejects.toMatchObject({
      status: 400,
      param: 'ending_before',
    });
  });

  it('walking forward then back over any page size and filter sees every row exactly once, in order', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 20 }),
        fc.constantFrom(undefined, 'red', 'blue'),
        async (limit, colour) => {
          const expected = (
            await client.query(
              `SELECT id FROM items WHERE owner = 'm1' ${colour ? 'AND colour = $1' : ''} ORDER BY seq DESC`,
              colour ? [colour] : [],
            )
          ).rows.map((r: { id: string }) => r.id);
          const forward: string[] = [];
          let cursor: string | undefined;
          let pages: string[][] = [];
          for (;;) {
            const res = await page({ limit, ...(cursor ? { startingAfter: cursor } : {}) }, colour);
            forward.push(...res.rows.map((r) => r.id));
            pages.push(res.rows.map((r) => r.id));
            if (!res.hasMore) break;
            cursor = res.rows[res.rows.length - 1]?.id;
          }
          expect(forward).toEqual(expected);
          // Back from the last page to the first, each time passing the first id of the page.
          const backward: string[][] = [pages[pages.length - 1] ?? []];
          let first = pages[pages.length - 1]?.[0];
          while (first !== undefined) {
            const res = await page({ limit, endingBefore: first }, colour);
            if (res.rows.length === 0) break;
            backward.unshift(res.rows.map((r) => r.id));
            if (!res.hasMore) break;
            first = res.rows[0]?.id;
          }
          expect(backward.flat()).toEqual(expected);
          pages = [];
        },
      ),
      { numRuns: 25 },
    );
  });
});
