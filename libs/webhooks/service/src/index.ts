export * from './webhook-dispatch.module';
