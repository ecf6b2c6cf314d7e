export * from './charge.events';
export * from './charge';
export * from './ledger-sequence';
export * from './charge-list-filter';
export * from './charge.webhooks';
