export * from './data-source';
export * from './database.module';
export * from './concurrent-index';
export * from './bounded-lock-wait';
