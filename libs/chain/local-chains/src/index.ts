export * from './anvil';
export * from './local-chains';
