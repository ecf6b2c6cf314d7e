export * from './payment.commands';
export * from './payments.port';
export * from './create-checkout.dto';
export * from './list-query';
export * from './checkouts.controller';
export * from './payments.controller';
export * from './hosted-payment.controller';
export * from './payments-api.module';
