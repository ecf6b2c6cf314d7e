/** Nest token of the rates port (RateSource from @stablepay/subscriptions-domain). */
export const RATE_SOURCE = Symbol('RATE_SOURCE');
