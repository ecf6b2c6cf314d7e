export * from './fiat-settlement';
export * from './settlement-feed';
