export * from './adapters';
export * from './platform.config';
export * from './service';
export * from './run-main';
export * from './relay';
export * from './read-model-timer';
