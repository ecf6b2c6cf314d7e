export * from './event-bus.port';
export * from './topics';
