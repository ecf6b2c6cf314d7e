export * from './event-bus.port';
export * from './topics';
export * from './bus-message';
export * from './store-log/store-log-event-bus';
export * from './kafka/kafka-event-bus';
export * from './relay/event-store-relay';
export * from './idempotency/idempotent-handler';
