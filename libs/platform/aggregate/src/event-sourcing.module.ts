import {
  type DynamicModule,
  Global,
  Inject,
  Injectable,
  Module,
  type OnApplicationShutdown,
  type OnModuleInit,
} from '@nestjs/common';
import { type EventStore } from '@stablepay/event-store';
import { EVENT_BUS, type EventBus } from '@stablepay/event-bus';
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
}

@Injectable()
class EventSourcingLifecycle implements OnModuleInit, OnApplicationShutdown {
  constructor(
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(EVENT_BUS) private readonly bus: EventBus,
    @Inject(ReadinessRegistry) private readonly readiness: ReadinessRegistry,
  ) {}

  onModuleInit(): void {
    this.readiness.register('event_store', async () => {
      await this.store.headPosition();
    });
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
          useFactory: (store: EventStore) => options.createBus(store),
          inject: [EVENT_STORE],
        },
        { provide: CLOCK, useValue: options.clock ?? systemClock },
        EventSourcingLifecycle,
      ],
      exports: [EVENT_STORE, EVENT_BUS, CLOCK],
    };
  }
}
