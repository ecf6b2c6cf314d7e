export * from './subscription-checkout.events';
export * from './subscription-checkout';
export * from './subscription-options';
export * from './rates';
export * from './rules';
export * from './subscription.events';
export * from './subscription';
export * from './charge-preflight';
