import {
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  type OnModuleDestroy,
} from '@nestjs/common';
import { EVENT_STORE } from '@stablepay/aggregate';
import { EVENT_BUS, type EventBus, EventStoreRelay } from '@stablepay/event-bus';
import type { EventStore } from '@stablepay/event-store';
import { ReadinessRegistry } from '@stablepay/http';
import { ConfigError } from '@stablepay/util';
import type { PlatformConfig } from './platform.config';
import type { ServiceDefinition } from './service';

/** The relay's durable checkpoint in the event store (one relay per deployment: see relayService). */
export const RELAY_SUBSCRIPTION_ID = 'relay:kafka';

@Injectable()
class RelayLifecycle implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('EventStoreRelay');
  private readonly relay: EventStoreRelay;
  private lastError: string | undefined;

  constructor(
    @Inject(EVENT_STORE) store: EventStore,
    @Inject(EVENT_BUS) bus: EventBus,
    @Inject(ReadinessRegistry) private readonly readiness: ReadinessRegistry,
  ) {
    // Records success too, so readiness reflects the broker as the relay last saw it.
    const observed: EventBus = {
      publish: async (messages) => {
        await bus.publish(messages);
        this.lastError = undefined;
      },
      consume: (options) => bus.consume(options),
      close: () => bus.close(),
    };
    this.relay = new EventStoreRelay(store, observed, {
      subscriptionId: RELAY_SUBSCRIPTION_ID,
      onError: (error, event) => {
        this.lastError = error instanceof Error ? error.message : String(error);
        this.logger.error({
          msg: 'publishing to Kafka failed; retrying the same events',
          streamId: event.streamId,
          position: String(event.globalPosition),
          error: this.lastError,
        });
      },
    });
  }

  async onApplicationBootstrap(): Promise<void> {
    await this.relay.start();
    // Not ready while the broker refuses the events: the relay keeps retrying, an orchestrator sees why.
    this.readiness.register('relay', async () => {
      if (this.lastError !== undefined) throw new Error(`publishing to Kafka fails: ${this.lastError}`);
    });
  }

  /** Before the bus and the store close (their lifecycle hook runs at application shutdown). */
  async onModuleDestroy(): Promise<void> {
    await this.relay.stop();
  }
}

/**
 * The relay role: publishes every stored event whose category has a topic to Kafka, in global order, from a
 * durable checkpoint in the event store (`relay:kafka`). It exists only with EVENT_BUS=kafka: with the store-log
 * bus the event store is the bus and consumers read it directly, so asking for a relay then is a configuration
 * error. Run exactly one per deployment (apps/relay; the manifests pin one replica and recreate rather than
 * roll): two relays would publish everything twice.
 *
 * Delivery into Kafka: the producer is idempotent with one request in flight and keys each message by its stream
 * id, so a retried produce neither duplicates nor reorders an aggregate's events, and a position is published
 * once per producer session. A crash between Kafka's acknowledgement and the checkpoint write republishes that
 * last batch after restart with the same message ids; consumers are idempotent by message id.
 */
export function relayService(
  config: Pick<PlatformConfig, 'eventBus'>,
  options: Pick<ServiceDefinition, 'upcasters'> = {},
): ServiceDefinition {
  if (config.eventBus !== 'kafka') {
    throw new ConfigError(
      'environment variable EVENT_BUS must be kafka for the relay: with EVENT_BUS=store-log the event store is the bus and no relay runs',
    );
  }
  // Topics carry the newest version of each event type: the relay reads the store through every scope's upcasters.
  return { name: 'relay', imports: [], providers: [RelayLifecycle], ...options };
}
