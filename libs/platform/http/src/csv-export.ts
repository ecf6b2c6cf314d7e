import { Logger } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Pool } from 'pg';
import QueryStream from 'pg-query-stream';
import { Counter, register } from 'prom-client';
import { Readable } from 'node:stream';
import { stringify as stringifyRecords } from 'csv-stringify/sync';
import { sharesOneSession } from '@stablepay/node-util';
import type { Clause, Param, Queryable } from './pagination';
import { admitInFlight, InFlightLimit } from './rate-limits';

/**
 * CSV exports (GET /reports/.../export): rows read from the database a batch at a time and written to the response
 * as the client takes them, so an export of any size costs the same memory (docs/reports.md).
 */

/** One column of an export: its header and how a row fills it. */
export interface CsvColumn<Row> {
  readonly header: string;
  readonly cell: (row: Row) => string | number | boolean | null | undefined;
  /**
   * Text a merchant or customer wrote (metadata, names, ids they chose): neutralised against formula injection.
   * Values the API produced (ids, amounts, hashes, enums) are left as they are.
   */
  readonly untrusted?: boolean;
}

// OWASP CSV injection: a spreadsheet runs a cell that starts with one of these as a formula. Leading white space
// (TAB, CR, LF, spaces of any kind) and invisible format characters before it count as nothing: an import that
// trims cells (LibreOffice's "Trim spaces", Sheets) reads " =1+1" as =1+1. The full-width forms (U+FF1D, U+FF0B,
// U+FF0D, U+FF20) too: spreadsheets of CJK locales normalise them to their ASCII operators.
const FORMULA_START =
  /^[\p{White_Space}\p{Cf}\p{Default_Ignorable_Code_Point}]*[=+\-@\uFF1D\uFF0B\uFF0D\uFF20]|^[\t\r\n]/u;

/** OWASP's neutralisation: a cell that a spreadsheet would read as a formula gets a leading single quote. */
export function neutraliseCell(text: string): string {
  return FORMULA_START.test(text) ? `'${text}` : text;
}

/** A row as CSV cells: null/undefined empty, booleans `true`/`false`, untrusted text neutralised. */
export function csvRecord<Row>(columns: readonly CsvColumn<Row>[], row: Row): string[] {
  return columns.map((column) => {
    const value = column.cell(row);
    if (value === null || value === undefined) return '';
    const text = typeof value === 'string' ? value : String(value);
    return column.untrusted ? neutraliseCell(text) : text;
  });
}

/** What to read: one table's rows within `where`, in `seq` order (oldest first). */
export interface ExportQuery {
  /** Trusted SQL identifier (never user input). */
  readonly table: string;
  readonly select?: string;
  /** Scope (merchant and mode) and the filters, ANDed. */
  readonly where: readonly Clause[];
  /** A monotonic bigint column: the order of the export and the keyset of its batches. */
  readonly seqColumn?: string;
  /** Trusted SQL: extra joins after the table (aliased as the table's name). */
  readonly join?: string;
  readonly batchSize?: number;
  /** Names the statement in pg_stat_activity (`/* stablepay:export <label> *\/`). */
  readonly label: string;
}

export const EXPORT_BATCH_SIZE = 1000;

/** What exportRows needs of a TypeORM DataSource: `query`, and its pg Pool as `driver.master` when there is one. */
export type ExportSource = Queryable & { readonly driver?: unknown };

const oneSession = new WeakMap<Pool, Promise<boolean>>();

function poolOf(source: ExportSource): Pool | undefined {
  // TypeORM's PostgresDriver keeps its pg Pool as `master` (no public accessor).
  const pool = (source.driver as { master?: Pool } | undefined)?.master;
  return pool && typeof pool.connect === 'function' ? pool : undefined;
}

function build(query: ExportQuery, select: string, extra: (p: Param) => string[], tail: string) {
  const values: unknown[] = [];
  const p: Param = (value) => {
    values.push(value);
    return `$${values.length}`;
  };
  const where = [...query.where.map((c) => c(p)), ...extra(p)];
  const text = `/* stablepay:export ${query.label} */ SELECT ${select} FROM ${query.table}${
    query.join ? ` ${query.join}` : ''
  }${where.length ? ` WHERE ${where.join(' AND ')}` : ''} ${tail}`;
  return { text, values };
}

/**
 * What a row stream has buffered, as arrays: every row read so far in one go, so the layers above pay their
 * per-item cost (promises, stream turns) once per batch, not once per row.
 */
async function* bufferedBatches<Row>(stream: Readable): AsyncGenerator<Row[]> {
  for (;;) {
    const batch: Row[] = [];
    for (let row = stream.read() as Row | null; row !== null; row = stream.read() as Row | null)
      batch.push(row);
    if (batch.length > 0) {
      yield batch;
      continue;
    }
    if (stream.readableEnded) return;
    if (stream.destroyed) throw new Error('the row stream closed before its end');
    await new Promise<void>((resolve, reject) => {
      const settle = (error?: unknown) => {
        stream.off('readable', settle).off('end', settle).off('close', settle).off('error', settle);
        if (error instanceof Error) reject(error);
        else resolve();
      };
      stream.on('readable', settle).on('end', settle).on('close', settle).on('error', settle);
    });
  }
}

/**
 * The export's rows, oldest first. On PostgreSQL: one statement read through a server-side cursor
 * (pg-query-stream, `batchSize` rows per round trip) on a connection of its own, which is released when the rows
 * end and discarded when the reader stops early (a client gone mid-export), so no half-read portal is pooled. On a
 * server that runs every connection in one session (the embedded PGlite server), an open cursor would hold that one
 * session, and every other request would wait behind it for the whole export: there the rows come in keyset-paged
 * batches instead (`seq > last ORDER BY seq LIMIT n`, bounded by the newest `seq` at the start), each its own
 * short statement, holding no connection in between. Both hold at most one batch in memory.
 */
export async function* exportRows<Row extends object>(
  source: ExportSource,
  query: ExportQuery,
): AsyncGenerator<Row[]> {
  const pool = poolOf(source);
  const seq = `${query.table}.${query.seqColumn ?? 'seq'}`;
  const batchSize = query.batchSize ?? EXPORT_BATCH_SIZE;
  const select = query.select ?? `${query.table}.*`;
  let cursor = false;
  if (pool) {
    let probe = oneSession.get(pool);
    if (!probe) {
      probe = sharesOneSession(pool);
      oneSession.set(pool, probe);
      probe.catch(() => oneSession.delete(pool));
    }
    cursor = !(await probe);
  }
  if (pool && cursor) {
    const { text, values } = build(query, select, () => [], `ORDER BY ${seq} ASC`);
    const client = await pool.connect();
    const stream = client.query(new QueryStream(text, values, { batchSize, highWaterMark: batchSize }));
    // Read by hand, not with for-await: leaving a for-await destroys the stream, whose cursor close waits for the
    // server to answer a portal that is mid-read; the connection is discarded below instead.
    let finished = false;
    try {
      yield* bufferedBatches<Row>(stream);
      finished = true;
    } finally {
      if (finished) client.release();
      else {
        // A connection left mid-portal is not worth cleaning up: discarding it ends the backend's cursor too.
        stream.on('error', () => undefined);
        client.release(new Error('export stopped before its last row'));
        stream.destroy();
      }
    }
    return;
  }
  const bound = build(query, `max(${seq})::text AS max`, () => [], '');
  const maxRows = (await source.query(bound.text, bound.values)) as Array<{ max: string | null }>;
  const max = maxRows[0]?.max;
  if (max === null || max === undefined) return;
  let after = '0';
  for (;;) {
    const { text, values } = build(
      query,
      `${select}, ${seq}::text AS export_seq_`,
      (p) => [`${seq} > ${p(after)}::bigint`, `${seq} <= ${p(max)}::bigint`],
      `ORDER BY ${seq} ASC LIMIT ${batchSize}`,
    );
    const rows = (await source.query(text, values)) as Row[];
    const last = rows.at(-1);
    if (!last) return;
    after = (last as { export_seq_: string }).export_seq_;
    yield rows;
    if (rows.length < batchSize) return;
  }
}

/** Concurrent exports one merchant may run in this process; one more is 429 (an export reads a whole table). */
export const DEFAULT_EXPORTS_PER_MERCHANT = 2;
/** What the 429 tells the client to wait: exports take seconds, not minutes, at the benchmarked rate. */
const EXPORT_RETRY_AFTER_MS = 5_000;

/**
 * The per-merchant bound on exports running at once (an InFlightLimit, per process like every rate limit; refusals
 * counted as `stablepay_http_rate_limited_total{limit="concurrent_exports"}`). A slot is held from the request's
 * admission to the moment its rows stopped being read (finished, failed or the client gone).
 */
export class ExportSlots {
  private readonly running: InFlightLimit;

  constructor(readonly perMerchant = DEFAULT_EXPORTS_PER_MERCHANT) {
    this.running = new InFlightLimit('concurrent_exports', perMerchant);
  }

  /** Takes a slot (the function returned gives it back, once) or throws 429 rate_limited with Retry-After. */
  async take(merchantId: string, request: FastifyRequest, reply: FastifyReply): Promise<() => void> {
    const release = await admitInFlight(
      request,
      reply,
      [
        {
          limit: this.running,
          key: merchantId,
          message: `Too many exports running at once: at most ${this.perMerchant} per account. Retry when one has finished.`,
        },
      ],
      EXPORT_RETRY_AFTER_MS,
    );
    let given = false;
    return () => {
      if (given) return;
      given = true;
      void release();
    };
  }
}

export type ExportOutcome = 'completed' | 'aborted' | 'failed';

const exportsTotal = ((): Counter<'report' | 'outcome'> => {
  const name = 'stablepay_report_exports_total';
  // Get-or-create: tests and the embedded run host several applications on prom-client's one default registry.
  return (
    (register.getSingleMetric(name) as Counter<'report' | 'outcome'> | undefined) ??
    new Counter({
      name,
      help: 'CSV exports that ended, by report and outcome (completed, aborted: the client left, failed).',
      labelNames: ['report', 'outcome'],
    })
  );
})();
const exportRowsTotal = ((): Counter<'report'> => {
  const name = 'stablepay_report_export_rows_total';
  return (
    (register.getSingleMetric(name) as Counter<'report'> | undefined) ??
    new Counter({ name, help: 'Rows written by CSV exports, by report.', labelNames: ['report'] })
  );
})();

const logger = new Logger('reports');

export interface CsvExport<Row> {
  /** The report's name (metrics, logs). */
  readonly report: string;
  /** The attachment's file name (trusted: built by the route, never user input). */
  readonly filename: string;
  readonly columns: readonly CsvColumn<Row>[];
  /** The rows in batches (exportRows' shape), oldest first. */
  readonly rows: AsyncIterable<readonly Row[]>;
}

/**
 * Sends the export: `text/csv; charset=utf-8` as an attachment, header row always (also with no rows), RFC 4180
 * (csv-stringify: CRLF records, fields with a quote, comma or line break quoted, quotes doubled), backpressure from
 * the socket to the database read (one batch of CSV text is written at a time, the next read once the socket took
 * it). The first batch is read before anything is sent, so a database that fails at once is an error in the
 * envelope; a failure after the first byte can only cut the response short (the connection is closed without the
 * terminating chunk, so a client sees an incomplete body, never a short CSV that looks whole). `done` runs once the
 * rows are no longer read, however the export ended.
 */
export async function sendCsv<Row>(
  reply: FastifyReply,
  csv: CsvExport<Row>,
  done: () => void,
): Promise<void> {
  const iterator = csv.rows[Symbol.asyncIterator]();
  let first: IteratorResult<readonly Row[]>;
  try {
    first = await iterator.next();
  } catch (error) {
    done();
    exportsTotal.inc({ report: csv.report, outcome: 'failed' });
    throw error;
  }
  const options = { record_delimiter: 'windows' } as const;
  let written = 0;
  let outcome: ExportOutcome = 'aborted';
  const chunks = async function* (): AsyncGenerator<string> {
    let reading = false;
    try {
      yield stringifyRecords([csv.columns.map((c) => c.header)], options);
      let next = first;
      while (!next.done) {
        written += next.value.length;
        // A client gone while this waits at the yield arrives as an error thrown here (the stream's destroy):
        // that is an abort, not a failure of the read.
        yield stringifyRecords(
          next.value.map((row) => csvRecord(csv.columns, row)),
          options,
        );
        reading = true;
        next = await iterator.next();
        reading = false;
      }
      outcome = 'completed';
    } catch (error) {
      if (reading) outcome = 'failed';
      throw error;
    } finally {
      // Stops the read (a cursor's connection is discarded) when the client went away mid-export.
      await iterator.return?.(undefined);
      exportsTotal.inc({ report: csv.report, outcome });
      exportRowsTotal.inc({ report: csv.report }, written);
      if (outcome !== 'completed')
        logger.warn({ msg: 'export ended early', report: csv.report, outcome, rows: written });
      done();
    }
  };
  await csvAttachment(reply, csv.filename).send(Readable.from(chunks(), { objectMode: false }));
}

/**
 * Answers a HEAD of an export: the headers its GET sends, and no row read. Fastify answers a HEAD with the GET route
 * and drains the body that route sends, so through sendCsv a HEAD read (and held a slot for) the whole export. The
 * empty body keeps Fastify from claiming `content-length: 0` for a GET that streams its length unknown.
 */
export async function sendCsvHead(reply: FastifyReply, filename: string): Promise<void> {
  await csvAttachment(reply, filename).send(Readable.from([]));
}

function csvAttachment(reply: FastifyReply, filename: string): FastifyReply {
  return reply
    .status(200)
    .header('content-type', 'text/csv; charset=utf-8')
    .header('content-disposition', `attachment; filename="${filename}"`)
    .header('cache-control', 'no-store');
}
