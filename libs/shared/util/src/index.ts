export * from './errors';
export * from './clock';
export * from './ids';
export * from './money';
export * from './config';
export * from './json-logger';
export * from './secret-box';
export * from './read-your-writes';
