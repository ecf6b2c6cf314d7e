import { Module } from '@nestjs/common';
import type { ServiceDefinition } from '@stablepay/runtime';

/**
 * The payments service: Checkout and Payment aggregates (one-time payments).
 * Its features arrive with their issues; today it hosts the platform wiring (database, event store, bus,
 * health and readiness) so the service deploys, boots and reports ready on its own.
 */
@Module({})
export class PaymentsServiceModule {}

export function paymentsService(): ServiceDefinition {
  return { name: 'payments', imports: [PaymentsServiceModule] };
}
