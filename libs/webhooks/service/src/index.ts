export * from './webhook-dispatch.module';
export * from './dispatch.config';
export * from './migrations';
export * from './sources';
export * from './tokens';
export * from './webhook-dispatcher';
export * from './webhook-event.recorder';
export * from './webhook-event.store';
export * from './webhook-events.gateway';
export * from './commands/redeliver-webhook-event/redeliver-webhook-event.handler';
export * from './commands/send-test-webhook/send-test-webhook.handler';
export * from './webhook-deliverer';
export * from './http/egress-policy';
export * from './http/webhook-http-sender';
export {
  recordedDelivery,
  WEBHOOK_EVENT_TYPES,
  webhookEventId,
  type WebhookEventData,
  type WebhookEventType,
} from '@stablepay/webhooks-domain';
