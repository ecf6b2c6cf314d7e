export * from './chain-mode';
export * from './chain-operator.config';
export * from './chain-operator.module';
export * from './indexer-watch.commands';
export * from './sanctions-screening';
export * from './payout-deposits';
export * from './deposit-rescan';
