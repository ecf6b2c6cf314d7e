import { Module } from '@nestjs/common';
import type { ServiceDefinition } from '@stablepay/runtime';

/**
 * The indexer service: chain followers that turn blocks into chain observation events.
 * Its features arrive with their issues; today it hosts the platform wiring (database, event store, bus,
 * health and readiness) so the service deploys, boots and reports ready on its own.
 */
@Module({})
export class IndexerServiceModule {}

export function indexerService(): ServiceDefinition {
  return { name: 'indexer', imports: [IndexerServiceModule] };
}
