import {
  type DynamicModule,
  Global,
  Inject,
  Injectable,
  Module,
  type OnApplicationShutdown,
  type OnModuleInit,
  Logger,
  Optional,
} from '@nestjs/common';
import { DataSource } from 'typeorm';
import { type EventStore, PostgresEventStore } from '@stablepay/event-store';
import {
  EVENT_BUS,
  type EventBus,
  type ProjectionDefinition,
  ProjectionRegistry,
  ProjectionRunner,
  StoreLogEventBus,
  type ConsumerSupervisionSettings,
  SupervisedEventBus,
} from '@stablepay/event-bus';
import { type Clock, systemClock } from '@stablepay/util';
import { ReadinessRegistry } from '@stablepay/http';

export const EVENT_STORE = Symbol('EVENT_STORE');
export const CLOCK = Symbol('CLOCK');

export interface EventSourcingOptions {
  /** Opens the event store (Postgres or EventStoreDB, by configuration). */
  readonly createStore: () => Promise<EventStore>;
  /** Opens the bus on top of the store (store log embedded, Kafka distributed). */
  readonly createBus: (store: EventStore) => Promise<EventBus>;
  readonly clock?: Clock;
  /** Thresholds of the consumers' health tracking and isolation (tests shorten them). */
  readonly supervision?: ConsumerSupervisionSettings;
}

/**
 * Starts the process's projections (ProjectionRunner: batches in one transaction, poison events park their
 * stream) and keeps them in one registry for /ready and the operator routes.
 */
@Injectable()
export class Projections {
  readonly registry = new ProjectionRegistry();

  constructor(
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(EVENT_BUS) private readonly bus: EventBus,
    @Optional() @Inject(DataSource) private readonly dataSource?: DataSource,
  ) {}

  async start(definition: ProjectionDefinition): Promise<ProjectionRunner> {
    if (!this.dataSource) throw new Error(`projection ${definition.name} needs the DatabaseModule`);
    const logger = new Logger(definition.name);
    const runner = new ProjectionRunner(definition, {
      dataSource: this.dataSource,
      bus: this.bus,
      store: this.store,
      // The platform opens the Postgres event store on the read models' database (runtime adapters), so with the
      // store-log bus the bus position is committed, synchronously, to the same WAL after each batch.
      asyncCommit:
        this.store instanceof PostgresEventStore &&
        (this.bus instanceof SupervisedEventBus ? this.bus.inner : this.bus) instanceof StoreLogEventBus,
      logger: {
        error: (m) => logger.error(m),
        warn: (m) => logger.warn(m),
        log: (m) => logger.log(m),
      },
    });
    await runner.start();
    this.registry.add(runner);
    return runner;
  }

  async stop(runner: ProjectionRunner | undefined): Promise<void> {
    if (!runner) return;
    this.registry.remove(runner);
    await runner.stop();
  }
}

@Injectable()
class EventSourcingLifecycle implements OnModuleInit, OnApplicationShutdown {
  constructor(
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(EVENT_BUS) private readonly bus: EventBus,
    @Inject(ReadinessRegistry) private readonly readiness: ReadinessRegistry,
    @Inject(Projections) private readonly projections: Projections,
  ) {}

  onModuleInit(): void {
    this.readiness.register('event_store', async () => {
      await this.store.headPosition();
    });
    this.readiness.register('projections', async () => {
      const { stalled, degraded } = this.projections.registry.readiness();
      if (stalled.length > 0) throw new Error(stalled.join('; '));
      return degraded.join('; ');
    });
    const bus = this.bus;
    if (bus instanceof SupervisedEventBus) {
      // Every bus consumer group (projections included: a hung one never fails a batch): 503 naming the group.
      this.readiness.register('consumers', async () => {
        const { stalled, degraded } = bus.health.readiness();
        if (stalled.length > 0) throw new Error(stalled.join('; '));
        return degraded.join('; ');
      });
    }
  }

  async onApplicationShutdown(): Promise<void> {
    await this.bus.close();
    await this.store.close();
  }
}

/** The event store, the bus and the clock, shared by every module of the process. */
@Global()
@Module({})
export class EventSourcingModule {
  static forRoot(options: EventSourcingOptions): DynamicModule {
    return {
      module: EventSourcingModule,
      providers: [
        { provide: EVENT_STORE, useFactory: () => options.createStore() },
        {
          provide: EVENT_BUS,
          // Every consumer of the process gets health tracking and isolation, whichever adapter is configured.
          useFactory: async (store: EventStore, dataSource?: DataSource) => {
            const logger = new Logger('consumers');
            return new SupervisedEventBus(await options.createBus(store), {
              store,
              ...(dataSource ? { dataSource } : {}),
              logger: {
                error: (m) => logger.error(m),
                warn: (m) => logger.warn(m),
                log: (m) => logger.log(m),
              },
              ...(options.supervision ? { settings: options.supervision } : {}),
            });
          },
          inject: [EVENT_STORE, { token: DataSource, optional: true }],
        },
        { provide: CLOCK, useValue: options.clock ?? systemClock },
        Projections,
        EventSourcingLifecycle,
      ],
      exports: [EVENT_STORE, EVENT_BUS, CLOCK, Projections],
    };
  }
}
