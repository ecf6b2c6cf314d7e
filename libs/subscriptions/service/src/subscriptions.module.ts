import { Module } from '@nestjs/common';
import type { ServiceDefinition } from '@stablepay/runtime';

/**
 * The subscriptions service: SubscriptionCheckout and Subscription aggregates.
 * Its features arrive with their issues; today it hosts the platform wiring (database, event store, bus,
 * health and readiness) so the service deploys, boots and reports ready on its own.
 */
@Module({})
export class SubscriptionsServiceModule {}

export function subscriptionsService(): ServiceDefinition {
  return { name: 'subscriptions', imports: [SubscriptionsServiceModule] };
}
