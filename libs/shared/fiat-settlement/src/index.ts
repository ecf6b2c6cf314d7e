export * from './fiat-settlement';
export * from './settlement-feed';
export * from './sandbox-payouts';
