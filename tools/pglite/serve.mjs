#!/usr/bin/env node
// Serves an embedded PGlite database over the Postgres wire protocol, so every part of Stablepay talks
// to "a Postgres server" the same way whether it is PGlite (embedded default) or a real one.
// Usage: node tools/pglite/serve.mjs [--port 0] [--data-dir DIR|memory://] [--max-connections 8]
// Prints one JSON line {"ready":true,"port":N,"url":"postgres://..."} on stdout once listening.
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
const maxConnections = Number(opt('max-connections', '16'));

if (!dataDir.startsWith('memory://')) mkdirSync(dataDir, { recursive: true });
const db = await PGlite.create(dataDir);
const server = new PGLiteSocketServer({ db, port, host: '127.0.0.1', maxConnections });
await server.start();
const boundPort = Number(server.getServerConn().split(':').pop());
process.stdout.write(
  JSON.stringify({ ready: true, port: boundPort, url: `postgres://postgres:postgres@127.0.0.1:${boundPort}/postgres` }) + '\n',
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
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
// The parent owns us: when its pipe closes (it died or exited), we go too.
process.stdin.on('end', stop);
process.stdin.on('close', stop);
process.stdin.resume();
