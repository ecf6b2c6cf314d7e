export * from './payment.events';
export * from './payment';
export * from './rules';
export * from './payment-object';
export * from './payment-list-filter';
