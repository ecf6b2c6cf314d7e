export * from './eip712';
