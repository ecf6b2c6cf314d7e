export * from './eip712';
export * from './caip';
export * from './chains';
export * from './typed-data';
export * from './chain-env';
export * from './sanctions';
export * from './log-range';
export * from './chain-clock';
