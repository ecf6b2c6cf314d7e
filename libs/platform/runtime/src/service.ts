import {
  type DynamicModule,
  Inject,
  Injectable,
  Module,
  type OnModuleInit,
  type Provider,
  type Type,
} from '@nestjs/common';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { DataSource } from 'typeorm';
import { EventSourcingModule } from '@stablepay/aggregate';
import {
  CommandsModule,
  commandsConfigFromEnv,
  connectCommandServer,
  InProcessBroker,
} from '@stablepay/commands';
import { PARKED_STREAMS_MIGRATIONS } from '@stablepay/event-bus';
import { type Upcaster, UpcasterRegistry, withUpcasters } from '@stablepay/event-store';
import { DatabaseModule, type MigrationClass } from '@stablepay/database';
import {
  createHttpApp,
  DEFAULT_HTTP_TIMEOUTS,
  drainHttpApp,
  HealthModule,
  IDEMPOTENCY_MIGRATIONS,
  ReadinessRegistry,
  startMetricsServer,
  stopDeadlineMs,
} from '@stablepay/http';
import { type Clock, ConfigError } from '@stablepay/util';
import { openEventBus, openEventStore } from './adapters';
import type { PlatformConfig } from './platform.config';

/** What a service contributes to a process: its Nest modules, its migrations and extra root providers. */
export interface ServiceDefinition {
  readonly name: string;
  readonly imports: ReadonlyArray<Type | DynamicModule>;
  readonly migrations?: readonly MigrationClass[];
  readonly providers?: readonly Provider[];
  /** True when the service owns aggregates whose commands others send it (its `@CommandHandler`s answer them). */
  readonly handlesCommands?: boolean;
  /**
   * Upcasters of the events this service reads (its own aggregates' and any other scope's it consumes): the
   * process's store reads old shapes as the newest through all of them (see docs/architecture.md, Event versioning).
   */
  readonly upcasters?: readonly Upcaster[];
}

@Injectable()
class DatabaseReadiness implements OnModuleInit {
  constructor(
    @Inject(DataSource) private readonly dataSource: DataSource,
    @Inject(ReadinessRegistry) private readonly readiness: ReadinessRegistry,
  ) {}
  onModuleInit(): void {
    this.readiness.register('database', async () => {
      await this.dataSource.query('SELECT 1');
    });
  }
}

const IN_PROCESS_COMMANDS = commandsConfigFromEnv({}, { transport: 'in-process' });

/** The root module of a process hosting one service (distributed) or all of them (embedded). */
export function platformRootModule(
  config: PlatformConfig,
  services: readonly ServiceDefinition[],
  clock?: Clock,
  broker: InProcessBroker = new InProcessBroker(),
): DynamicModule {
  @Module({})
  class StablepayRootModule {}
  return {
    module: StablepayRootModule,
    imports: [
      HealthModule,
      DatabaseModule.forRoot({
        url: config.databaseUrl,
        migrations: [
          ...IDEMPOTENCY_MIGRATIONS,
          ...PARKED_STREAMS_MIGRATIONS,
          ...services.flatMap((s) => s.migrations ?? []),
        ],
        applicationName: services.map((s) => s.name).join('+'),
      }),
      EventSourcingModule.forRoot({
        createStore: async () =>
          withUpcasters(
            await openEventStore(config),
            new UpcasterRegistry(services.flatMap((s) => s.upcasters ?? [])),
          ),
        createBus: (store) => openEventBus(config, store),
        ...(clock ? { clock } : {}),
      }),
      CommandsModule.forRoot(config.commands ?? IN_PROCESS_COMMANDS, broker),
      ...services.flatMap((s) => s.imports),
    ],
    providers: [DatabaseReadiness, ...services.flatMap((s) => s.providers ?? [])],
  };
}

export interface RunningService {
  readonly app: NestFastifyApplication;
  readonly url: string;
  /** Where /metrics is served when METRICS_PORT moved it off the API port. */
  readonly metricsUrl?: string;
  /** The longest stop() may take (stopDeadlineMs): past it the process should exit anyway. */
  readonly stopDeadlineMs: number;
  stop(): Promise<void>;
}

/** Boots a process: migrations, event store, bus, modules, then the HTTP server (health, ready, routes). */
export async function startService(
  config: PlatformConfig,
  services: readonly ServiceDefinition[],
  options: { clock?: Clock; service?: string } = {},
): Promise<RunningService> {
  const service = options.service ?? services.map((s) => s.name).join('+');
  const broker = new InProcessBroker();
  const app = await createHttpApp(platformRootModule(config, services, options.clock, broker), {
    service,
    logLevel: config.logLevel,
    ...(config.httpTimeouts ? { timeouts: config.httpTimeouts } : {}),
    ...(config.rateLimits ? { rateLimits: config.rateLimits } : {}),
    ...(config.trustProxy !== undefined ? { trustProxy: config.trustProxy } : {}),
    metricsOnApiPort: config.metricsPort === undefined,
  });
  if (services.some((s) => s.handlesCommands)) {
    connectCommandServer(app, config.commands ?? IN_PROCESS_COMMANDS, broker, service);
    await app.startAllMicroservices();
  }
  await app.listen(config.port, config.host).catch(async (error: unknown) => {
    // Nothing is served: stop what started (consumers, pools) and say which variable to change.
    await app.close().catch(() => undefined);
    throw listenFault(error, config.host, config.port);
  });
  const metrics =
    config.metricsPort === undefined
      ? undefined
      : await startMetricsServer(config.metricsPort, config.host).catch(async (error: unknown) => {
          // A taken METRICS_PORT stops the start, with the API port released rather than left open.
          await app.close();
          throw error;
        });
  const address = app.getHttpServer().address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const host = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host;
  let stopping: Promise<void> | undefined;
  const shutdownDelayMs = config.shutdownDelayMs ?? 0;
  // Nest's close() runs the destroy hooks (bus consumers) before it closes the HTTP server, so a request in flight
  // could outlive its consumers, and new ones keep arriving meanwhile. The HTTP server goes first: /ready answers
  // 503 at once, requests are still served for SHUTDOWN_DELAY_MS (balancers take that long to move away), then it
  // stops accepting, answers 503 in the envelope to new requests on open connections and waits for those in
  // flight; then Nest stops the consumers and, last, the database pools.
  const stop = async (): Promise<void> => {
    await drainHttpApp(app, new Promise((resolve) => setTimeout(resolve, shutdownDelayMs)));
    await app.close();
    // Scraped to the end: the last values of a stopping process are worth having.
    await metrics?.close();
  };
  return {
    app,
    url: `http://${host}:${port}`,
    ...(metrics ? { metricsUrl: `http://${host}:${metrics.port}/metrics` } : {}),
    stopDeadlineMs: stopDeadlineMs(config.httpTimeouts ?? DEFAULT_HTTP_TIMEOUTS, shutdownDelayMs),
    stop: () => (stopping ??= stop()),
  };
}

/**
 * A listen that failed for the environment's sake is a ConfigError naming the variable (exit 78 in runMain): a
 * taken or privileged port names PORT, a HOST that is no address of this machine (a typo, a public address) names
 * HOST. Both were the bare errno and exit 1, after the migrations had run.
 */
function listenFault(error: unknown, host: string, port: number): unknown {
  const code = (error as { code?: unknown } | null)?.code;
  if (code === 'EADDRINUSE' || code === 'EACCES')
    return new ConfigError(
      `environment variable PORT: cannot listen on port ${port} of ${host} (${code}): set PORT to a free port`,
    );
  if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'EAI_NONAME')
    return new ConfigError(
      `environment variable HOST: cannot listen on ${host} (${code}): set HOST to an address of this machine (0.0.0.0 for every interface)`,
    );
  return error;
}
