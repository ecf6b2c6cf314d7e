// One Jest preset for every project: @swc/jest (fast, with Nest's decorator metadata) and module
// aliases taken from tsconfig.base.json so tests import libs exactly as production code does.
const path = require('node:path');
const { compilerOptions } = require('./tsconfig.base.json');

const moduleNameMapper = {};
for (const [alias, targets] of Object.entries(compilerOptions.paths)) {
  const key = '^' + alias.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace('\\*', '(.*)') + '$';
  moduleNameMapper[key] = path.join(__dirname, targets[0].replace('*', '$1'));
}

module.exports = {
  testEnvironment: 'node',
  transform: {
    '^.+\\.ts$': [
      '@swc/jest',
      {
        jsc: {
          parser: { syntax: 'typescript', decorators: true },
          transform: { legacyDecorator: true, decoratorMetadata: true },
          target: 'es2022',
        },
        module: { type: 'commonjs' },
        sourceMaps: 'inline',
      },
    ],
  },
  moduleFileExtensions: ['ts', 'js', 'json'],
  moduleNameMapper,
  testMatch: ['**/?(*.)+(spec).ts'],
  // Without DATABASE_URL every int/e2e file starts its own embedded PGlite server (tools/pglite/serve.mjs), which on
  // a busy machine can take most of a minute before the first query; a setup that times out there goes on starting
  // what it would stop in afterAll, and Jest then waits on it. A ceiling, not a timed assertion.
  testTimeout: process.env.DATABASE_URL ? 60_000 : 180_000,
  // On two cores Jest runs every file in its own process (one worker: in band), so a server a timed-out setup went
  // on starting after afterAll kept that process, and `npm test`, alive for good. Every result is final when the run
  // ends; the run then exits instead of waiting on what nothing will stop (tools/lint-check/jest-preset.spec.ts).
  forceExit: true,
};
