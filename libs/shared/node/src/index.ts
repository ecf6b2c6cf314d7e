export * from './ip-policy';
export * from './pglite-server';
