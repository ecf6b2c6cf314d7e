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
  testTimeout: 60_000,
};
