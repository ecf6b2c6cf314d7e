export * from './charge-ledger.module';
