import { Module } from '@nestjs/common';
import type { ServiceDefinition } from '@stablepay/runtime';

/**
 * The charge-ledger service: the Charge aggregate and its ledger.
 * Its features arrive with their issues; today it hosts the platform wiring (database, event store, bus,
 * health and readiness) so the service deploys, boots and reports ready on its own.
 */
@Module({})
export class ChargeLedgerServiceModule {}

export function chargeLedgerService(): ServiceDefinition {
  return { name: 'charge-ledger', imports: [ChargeLedgerServiceModule] };
}
