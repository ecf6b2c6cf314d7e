export * from './ip-policy';
export * from './pglite-server';
export * from './connection-guard';
export * from './read-model-changes';
export * from './free-port';
export * from './one-session';
export * from './host-resolver';
export * from './fake-dns-server';
