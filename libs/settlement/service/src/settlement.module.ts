import { Module } from '@nestjs/common';
import type { ServiceDefinition } from '@stablepay/runtime';

/**
 * The settlement service: the fiat settlement process manager.
 * Its features arrive with their issues; today it hosts the platform wiring (database, event store, bus,
 * health and readiness) so the service deploys, boots and reports ready on its own.
 */
@Module({})
export class SettlementServiceModule {}

export function settlementService(): ServiceDefinition {
  return { name: 'settlement', imports: [SettlementServiceModule] };
}
