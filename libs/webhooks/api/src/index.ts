export * from './webhooks-api.module';
export * from './webhook-events.controller';
export * from './webhook-test.controller';
export * from './webhook-event.presenter';
