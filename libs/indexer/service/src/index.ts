export * from './indexer.module';
export * from './indexer.config';
export * from './migrations';
export * from './chain-rpc';
export * from './chain-follower';
export * from './follower-reset';
export * from './indexer-store';
export * from './log-decoder';
// Test and benchmark support (a private anvil with a test stablecoin); not used by the service itself.
export * from './testing/test-chain';
