export * from './charge-ledger.port';
export * from './charges.controller';
export * from './list-query';
export * from './ledger-api.module';
