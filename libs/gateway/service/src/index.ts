export * from './gateway.module';
export * from './deposit-rescans.controller';
export * from './payer-attestations.controller';
export * from './withheld-refund-returns.controller';
export * from './settlement-exposures.controller';
export * from './charge-settlement-exposures.controller';
