export * from './payouts.commands';
export * from './payouts.port';
export * from './dtos';
export * from './list-query';
export * from './beta.guard';
export * from './payouts.controllers';
export * from './hosted-kyc.controller';
export * from './payouts-api.module';
