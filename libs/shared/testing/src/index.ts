export * from './free-port';
export * from './pglite-server';
export * from './test-database';
