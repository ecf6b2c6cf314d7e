export * from './observation-events';
export * from './follower-rules';
