import { Module } from '@nestjs/common';
import type { ServiceDefinition } from '@stablepay/runtime';

/**
 * The payouts service: Customer, Beneficiary and Payout aggregates (beta).
 * Its features arrive with their issues; today it hosts the platform wiring (database, event store, bus,
 * health and readiness) so the service deploys, boots and reports ready on its own.
 */
@Module({})
export class PayoutsServiceModule {}

export function payoutsService(): ServiceDefinition {
  return { name: 'payouts', imports: [PayoutsServiceModule] };
}
