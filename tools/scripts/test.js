#!/usr/bin/env node
// `npm test`: the type check, the lint (module boundaries included) and every project's tests.
// Uses DATABASE_URL when set (CI: the machine's PostgreSQL), otherwise each test file gets its own PGlite.
// Extra arguments go to Nx, e.g. `npm test -- --projects=platform-event-store`.
const { spawnSync } = require('node:child_process');
const path = require('node:path');

const root = path.join(__dirname, '..', '..');
const env = {
  ...process.env,
  NX_DAEMON: 'false',
  NX_NO_CLOUD: 'true',
  NX_TUI: 'false',
  NX_SKIP_NX_CACHE: process.env.NX_SKIP_NX_CACHE ?? 'false',
};
const extra = process.argv.slice(2);
const bin = (name) => path.join(root, 'node_modules', '.bin', name);

function run(title, cmd, args) {
  console.log(`\n=== ${title}: ${[path.basename(cmd), ...args].join(' ')}`);
  const started = Date.now();
  const result = spawnSync(cmd, args, { cwd: root, env, stdio: 'inherit' });
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  if (result.status !== 0) {
    console.error(`=== ${title} failed after ${seconds}s (exit ${result.status ?? result.signal})`);
    process.exit(result.status ?? 1);
  }
  console.log(`=== ${title} passed in ${seconds}s`);
}

if (!process.env.DATABASE_URL) {
  console.log('DATABASE_URL is not set: database tests use a private embedded PGlite per test file.');
} else {
  console.log(
    `DATABASE_URL is set: database tests create throwaway databases on ${new URL(process.env.DATABASE_URL).host}.`,
  );
}
// Formatting first: it is the cheapest check and its fix (`npm run format`) is mechanical.
run('format', bin('prettier'), ['--check', '.', '--log-level=warn']);
run('typecheck', bin('tsc'), ['-p', 'tsconfig.json']);
// One ESLint process over the repo: the rules (module boundaries included) are the same as `nx run-many -t lint`,
// but the type-aware program is built once instead of once per project (15 s instead of minutes).
// @nx/enforce-module-boundaries reads the cached project graph and silently skips itself when there is none (a
// fresh clone): compute it first so the boundaries are always enforced.
run('project graph', bin('nx'), ['show', 'projects', '--json']);
run('lint', bin('eslint'), ['.', '--max-warnings=0']);
run('test', bin('nx'), ['run-many', '-t', 'test', '--outputStyle=static', '--parallel=2', ...extra]);
