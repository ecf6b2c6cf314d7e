export * from './api-key';
export * from './auth';
export * from './error-envelope.filter';
export * from './health';
export * from './http-app';
export * from './idempotency.interceptor';
export * from './pagination';
export * from './validation';
