export * from './free-port';
export { startPgliteServer, workspaceRoot, type PgliteServer } from '@stablepay/node-util';
export * from './test-database';
export * from './eventually';
export * from './raw-headers';
export * from './metric-value';
export * from './holding-server';
export * from './range-limited-rpc';
export * from './openapi-conformance';
