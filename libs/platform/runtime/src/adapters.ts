import { createEsdbEventStore, createPostgresEventStore, type EventStore } from '@stablepay/event-store';
import { type EventBus, KafkaEventBus, StoreLogEventBus } from '@stablepay/event-bus';
import type { PlatformConfig } from './platform.config';

/** The event store named by configuration: PostgreSQL (embedded default, CI) or EventStoreDB (distributed). */
export async function openEventStore(config: PlatformConfig): Promise<EventStore> {
  if (config.eventStore === 'esdb') {
    if (!config.esdbUrl) throw new Error('environment variable ESDB_URL is required when EVENT_STORE=esdb');
    return createEsdbEventStore({ connectionString: config.esdbUrl });
  }
  return createPostgresEventStore({ url: config.databaseUrl, poolSize: 10 });
}

/**
 * The bus named by configuration: the store log (consumers read the event store by global position: the store
 * is the bus) or Kafka (a relay publishes the store to topics; consumers use consumer groups).
 */
export async function openEventBus(config: PlatformConfig, store: EventStore): Promise<EventBus> {
  if (config.eventBus === 'kafka') {
    if (!config.kafkaBrokers?.length)
      throw new Error('environment variable KAFKA_BROKERS is required when EVENT_BUS=kafka');
    return new KafkaEventBus({ brokers: config.kafkaBrokers, clientId: 'stablepay' });
  }
  return new StoreLogEventBus(store);
}
