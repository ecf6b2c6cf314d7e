import { type CreatedBounds, invalidRequest, validationError } from '@stablepay/util';

/**
 * Keyset pagination exactly as SPEC.md's list rules: newest first (fixed order), `limit`, `starting_after`
 * (walk forward: older rows) or `ending_before` (walk back: newer rows), never both, and `has_more` relative to
 * the direction of paging. Rows are ordered by a monotonic sequence column, so rows inserted while a client
 * pages appear at the head without shifting pages already read.
 */
export const DEFAULT_LIST_LIMIT = 10;
export const MAX_LIST_LIMIT = 100;

/** The query parameters of every list's paging, which each list declares beside its filters (QueryParameters). */
export const PAGINATION_PARAMETERS = ['limit', 'starting_after', 'ending_before'] as const;

export interface ListQuery {
  readonly limit: number;
  readonly startingAfter?: string;
  readonly endingBefore?: string;
}

export interface ListEnvelope<T> {
  readonly object: 'list';
  readonly data: T[];
  readonly has_more: boolean;
}

function single(query: Record<string, unknown>, name: string): string | undefined {
  const v = query[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'string') throw validationError(name, `${name} must be given once, as a string.`);
  return v;
}

/** Validates the three pagination parameters; filters are the caller's. */
export function parseListQuery(query: Record<string, unknown>): ListQuery {
  const limitRaw = single(query, 'limit');
  const startingAfter = single(query, 'starting_after');
  const endingBefore = single(query, 'ending_before');
  if (startingAfter !== undefined && endingBefore !== undefined) {
    throw validationError('ending_before', 'Send at most one of starting_after and ending_before.');
  }
  let limit = DEFAULT_LIST_LIMIT;
  if (limitRaw !== undefined) {
    if (!/^[0-9]{1,4}$/.test(limitRaw) || Number(limitRaw) < 1 || Number(limitRaw) > MAX_LIST_LIMIT) {
      throw validationError('limit', `limit must be an integer between 1 and ${MAX_LIST_LIMIT}.`);
    }
    limit = Number(limitRaw);
  }
  for (const [name, value] of [
    ['starting_after', startingAfter],
    ['ending_before', endingBefore],
  ] as const) {
    if (value !== undefined && (value.length === 0 || value.length > 255)) {
      throw validationError(name, `${name} must be an object id from a previous page.`);
    }
  }
  return {
    limit,
    ...(startingAfter !== undefined ? { startingAfter } : {}),
    ...(endingBefore !== undefined ? { endingBefore } : {}),
  };
}

/** Something that runs parameterised SQL: a TypeORM DataSource/EntityManager or a pg client adapter. */
export interface Queryable {
  query(sql: string, params?: unknown[]): Promise<unknown>;
}

/** Adds a parameter and returns its `$n` placeholder. */
export type Param = (value: unknown) => string;
export type Clause = (p: Param) => string;

export interface KeysetSpec {
  /** Trusted SQL identifier of the table (never user input). */
  readonly table: string;
  /** Conditions every row of the list and the cursor must satisfy (the caller's merchant and mode). */
  readonly scope: readonly Clause[];
  /** User filters: narrow the rows, but a cursor is resolved within the scope alone. */
  readonly filters?: readonly Clause[];
  readonly query: ListQuery;
  readonly idColumn?: string;
  readonly seqColumn?: string;
  readonly select?: string;
}

export async function keysetPage<Row>(
  db: Queryable,
  spec: KeysetSpec,
): Promise<{ rows: Row[]; hasMore: boolean }> {
  const idColumn = spec.idColumn ?? 'id';
  const seqColumn = spec.seqColumn ?? 'seq';
  const params: unknown[] = [];
  const p: Param = (value) => {
    params.push(value);
    return `$${params.length}`;
  };
  const scope = spec.scope.map((c) => c(p));
  const cursorId = spec.query.startingAfter ?? spec.query.endingBefore;
  let cursorSeq: string | undefined;
  if (cursorId !== undefined) {
    const cursorParams: unknown[] = [];
    const cp: Param = (value) => {
      cursorParams.push(value);
      return `$${cursorParams.length}`;
    };
    const cursorWhere = [...spec.scope.map((c) => c(cp)), `${idColumn} = ${cp(cursorId)}`];
    const found = (await db.query(
      `SELECT ${seqColumn}::text AS seq FROM ${spec.table} WHERE ${cursorWhere.join(' AND ')}`,
      cursorParams,
    )) as Array<{ seq: string }>;
    if (!found[0]) {
      const param = spec.query.startingAfter !== undefined ? 'starting_after' : 'ending_before';
      throw invalidRequest(
        `No such object: '${cursorId}'. Use an id from a previous page of this list.`,
        'resource_missing',
        param,
      );
    }
    cursorSeq = found[0].seq;
  }
  const where = [...scope, ...(spec.filters ?? []).map((c) => c(p))];
  const backwards = spec.query.endingBefore !== undefined;
  if (cursorSeq !== undefined) where.push(`${seqColumn} ${backwards ? '>' : '<'} ${p(cursorSeq)}::bigint`);
  const sql = `SELECT ${spec.select ?? '*'} FROM ${spec.table}${where.length ? ` WHERE ${where.join(' AND ')}` : ''}
    ORDER BY ${seqColumn} ${backwards ? 'ASC' : 'DESC'} LIMIT ${p(spec.query.limit + 1)}`;
  const rows = (await db.query(sql, params)) as Row[];
  const hasMore = rows.length > spec.query.limit;
  const page = rows.slice(0, spec.query.limit);
  if (backwards) page.reverse();
  return { rows: page, hasMore };
}

export function listEnvelope<T>(data: T[], hasMore: boolean): ListEnvelope<T> {
  return { object: 'list', data, has_more: hasMore };
}

/** The SQL of `created[gte|gt|lte|lt]` on a timestamptz column (lists and exports alike). */
export function createdClauses(bounds: CreatedBounds, column = 'created_at'): Clause[] {
  const all: Array<[Date | undefined, string]> = [
    [bounds.createdGte, '>='],
    [bounds.createdGt, '>'],
    [bounds.createdLte, '<='],
    [bounds.createdLt, '<'],
  ];
  return all.flatMap(([value, op]) =>
    value === undefined ? [] : [(p: Param) => `${column} ${op} ${p(value.toISOString())}::timestamptz`],
  );
}
