import { Module } from '@nestjs/common';
import type { ServiceDefinition } from '@stablepay/runtime';

/**
 * The webhook-dispatch service: merchant webhook events: build, sign, deliver, retry.
 * Its features arrive with their issues; today it hosts the platform wiring (database, event store, bus,
 * health and readiness) so the service deploys, boots and reports ready on its own.
 */
@Module({})
export class WebhookDispatchServiceModule {}

export function webhookDispatchService(): ServiceDefinition {
  return { name: 'webhook-dispatch', imports: [WebhookDispatchServiceModule] };
}
