export * from './charge-ledger.module';
export * from './charge-ledger.gateway';
export * from './migrations';
export * from './charges/changes';
export * from './charges/charge-ledger.commands';
export * from './charges/charge-ledger.projection';
export * from './charges/charge-ledger.reader';
export * from './consumers/subscription-charges.consumer';
