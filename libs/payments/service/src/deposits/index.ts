export * from './payment-deposits.module';
export * from './deposit-flow';
export * from './deposit-contracts';
export * from './deposit.store';
