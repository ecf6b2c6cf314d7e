export * from './anvil';
export * from './local-chains';
export * from './transfers-around-creation';
export * from './call-batcher';
