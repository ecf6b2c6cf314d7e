export * from './colors';
export * from './html';
