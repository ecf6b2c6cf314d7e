export * from './decider';
export * from './event-sourcing.module';
