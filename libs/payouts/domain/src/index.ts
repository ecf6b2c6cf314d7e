export * from './customer';
export * from './beneficiary';
export * from './payout';
