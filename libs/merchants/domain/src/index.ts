export * from './merchant.events';
export * from './merchant';
export * from './rules';
