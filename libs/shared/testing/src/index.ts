export * from './free-port';
export { startPgliteServer, workspaceRoot, type PgliteServer } from '@stablepay/util';
export * from './test-database';
