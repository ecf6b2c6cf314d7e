#!/usr/bin/env node
// Serves an embedded PGlite database over the Postgres wire protocol, so every part of Stablepay talks
// to "a Postgres server" the same way whether it is PGlite (embedded default) or a real one.
// Usage: node tools/pglite/serve.mjs [--port 0] [--data-dir DIR|memory://] [--max-connections 256] [--managed]
//        [--report-stalls-ms N]
// Prints one JSON line {"ready":true,"port":N,"url":"postgres://..."} on stdout once listening.
//
// One fix over @electric-sql/pglite-socket 0.2.17: it queues each wire-protocol MESSAGE of every connection in one
// FIFO, so when two connections run parameterised queries at once, connection A's Parse/Bind/Execute/Sync can be
// split by connection B's Parse ("bind message supplies 8 parameters, but prepared statement "" requires 2", and
// with a transaction involved, a stalled queue). Here a connection that sends a message owns the backend until it
// is idle again (it sent Sync, a simple Query or Terminate and PGlite is not inside a transaction block); other
// connections' messages wait in arrival order; a connection that goes away releases what it owned (rolling back an
// open transaction).
import { PGlite } from '@electric-sql/pglite';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';
import { mkdirSync } from 'node:fs';

const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1] : fallback;
};
const port = Number(opt('port', '0'));
const dataDir = opt('data-dir', 'memory://');
// Every pool of the process (event store, read models, consumers' listeners) connects here; a connection past the
// limit is dropped by pglite-socket mid-handshake (ECONNRESET, "Connection terminated unexpectedly" at the
// client). Connections are cheap (one backend serves them all in turn), so the limit sits far above the pools.
const maxConnections = Number(opt('max-connections', '256'));

if (!dataDir.startsWith('memory://')) mkdirSync(dataDir, { recursive: true });
const db = await PGlite.create(dataDir);
const server = new PGLiteSocketServer({ db, port, host: '127.0.0.1', maxConnections });

const SYNC = 0x53; // 'S'
const QUERY = 0x51; // 'Q'
const TERMINATE = 0x58; // 'X'
const PASSWORD = 0x70; // 'p'
const PARSE = 0x50; // 'P'
const PROTOCOL_3 = 196608;

/** Messages after which a connection, unless inside a transaction block, leaves the backend idle. */
function endsExchange(message) {
  if (
    message.length >= 8 &&
    new DataView(message.buffer, message.byteOffset, message.byteLength).getInt32(4) === PROTOCOL_3
  )
    return true; // startup
  const type = message[0];
  return type === SYNC || type === QUERY || type === TERMINATE || type === PASSWORD;
}
let owner = null;
let running = false;
const waiting = [];

// --report-stalls-ms N (or PGLITE_REPORT_STALLS_MS): when the connection owning the backend sits idle inside a
// transaction for N ms while other connections wait, say so on stderr with both sides' last statements. On PGlite
// that is the signature of code that opens a second connection inside a transaction and waits on it (a deadlock
// no real PostgreSQL shows); the report names the statements so the caller can be found.
const reportStallsMs = Number(opt('report-stalls-ms', process.env.PGLITE_REPORT_STALLS_MS ?? '0'));
const lastStatement = new Map();
let stallTimer = null;
let lastReport = '';

/** The SQL text of a simple Query or a Parse message, for the stall report. */
function statementOf(message) {
  const type = message[0];
  if (type === QUERY) return new TextDecoder().decode(message.subarray(5, message.length - 1));
  if (type === PARSE) {
    const body = message.subarray(5);
    const nameEnd = body.indexOf(0);
    const textEnd = body.indexOf(0, nameEnd + 1);
    return new TextDecoder().decode(body.subarray(nameEnd + 1, textEnd));
  }
  return undefined;
}

const short = (sql) => sql?.replace(/\s+/g, ' ').trim().slice(0, 160);

function watchForStall() {
  if (reportStallsMs <= 0 || stallTimer !== null) return;
  const heldBy = owner;
  stallTimer = setTimeout(() => {
    stallTimer = null;
    if (owner === null || owner !== heldBy || !db.isInTransaction() || waiting.length === 0) return;
    if (waiting.some((w) => w.handlerId === owner)) return;
    const waiters = new Map();
    for (const w of waiting) {
      if (!waiters.has(w.handlerId))
        waiters.set(w.handlerId, short(statementOf(w.message) ?? lastStatement.get(w.handlerId)));
    }
    const report = JSON.stringify({ owner, statement: lastStatement.get(owner), waiters: [...waiters] });
    if (report === lastReport) return; // said once per stall
    lastReport = report;
    process.stderr.write(
      JSON.stringify({
        msg: 'pglite: a connection holds an open transaction and sends nothing while others wait (deadlock?)',
        idleMs: reportStallsMs,
        holder: { connection: owner, lastStatement: short(lastStatement.get(owner)) },
        waiting: [...waiters].map(([connection, statement]) => ({ connection, statement })),
      }) + '\n',
    );
  }, reportStallsMs);
  stallTimer.unref();
}

async function pump() {
  if (running) return;
  running = true;
  try {
    for (;;) {
      const index = owner === null ? 0 : waiting.findIndex((w) => w.handlerId === owner);
      if (index < 0 && waiting.length > 0) watchForStall();
      if (index < 0 || waiting.length === 0) return;
      const [item] = waiting.splice(index, 1);
      owner = item.handlerId;
      if (reportStallsMs > 0) {
        const statement = statementOf(item.message);
        if (statement !== undefined) lastStatement.set(item.handlerId, statement);
      }
      try {
        const bytes = await db.runExclusive(() =>
          db.execProtocolRawStream(item.message, { onRawData: (chunk) => item.onData(chunk) }),
        );
        item.resolve(bytes);
      } catch (error) {
        item.reject(error);
      }
      if (endsExchange(item.message) && !db.isInTransaction()) owner = null;
    }
  } finally {
    running = false;
  }
}

const queue = server.queryQueue;
queue.enqueue = (handlerId, message, onData) =>
  new Promise((resolve, reject) => {
    waiting.push({ handlerId, message, onData, resolve, reject });
    void pump();
  });
queue.clearQueueForHandler = (handlerId) => {
  lastStatement.delete(handlerId);
  for (let i = waiting.length - 1; i >= 0; i--) {
    if (waiting[i].handlerId === handlerId) waiting.splice(i, 1)[0].reject(new Error('Handler disconnected'));
  }
};
queue.clearTransactionIfNeeded = async (handlerId) => {
  if (owner !== handlerId) return;
  if (db.isInTransaction()) await db.exec('ROLLBACK');
  owner = null;
  void pump();
};
queue.getQueueLength = () => waiting.length;

await server.start();
const boundPort = Number(server.getServerConn().split(':').pop());
process.stdout.write(
  JSON.stringify({
    ready: true,
    port: boundPort,
    url: `postgres://postgres:postgres@127.0.0.1:${boundPort}/postgres`,
  }) + '\n',
);

let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  try {
    await server.stop();
    await db.close();
  } finally {
    process.exit(0);
  }
};
// Managed by a parent (--managed): a signal to the whole process group (Ctrl-C, `kill -TERM -PGID`, an
// orchestrator) must not close the database under the parent while it drains its requests; the parent closes our
// stdin once it no longer needs us. Standalone, a signal stops us.
const managed = args.includes('--managed');
process.on('SIGINT', managed ? () => undefined : stop);
process.on('SIGTERM', managed ? () => undefined : stop);
// The parent owns us: when its pipe closes (it stopped us, died or exited), we go too.
process.stdin.on('end', stop);
process.stdin.on('close', stop);
process.stdin.resume();
