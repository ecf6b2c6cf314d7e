export * from './webhooks-api.module';
export * from './webhook-events.controller';
export * from './webhook-test.controller';
export * from './webhook-event.presenter';
export * from './webhook-events.port';
export * from './webhook-event.commands';
