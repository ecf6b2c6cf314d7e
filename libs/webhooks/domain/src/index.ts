export * from './event-types';
export * from './envelope';
export * from './delivery-policy';
export * from './delivery';
export * from './test-delivery';
export * from './ports';
