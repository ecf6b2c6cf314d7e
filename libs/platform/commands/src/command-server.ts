import type { INestApplication } from '@nestjs/common';
import { type MicroserviceOptions, Transport } from '@nestjs/microservices';
import type { CommandsConfig } from './commands.config';
import { type InProcessBroker, InProcessServer } from './in-process.transport';
import { CommandErrorFilter } from './remote-error';

/**
 * Makes the application answer the commands its `@CommandHandler`s declare, on the configured transport:
 * in-process (the broker the application's CommandClient uses), TCP on COMMANDS_HOST:COMMANDS_PORT, or Kafka
 * (consumer group `stablepay-<service>-commands`). Call before `listen`; `startAllMicroservices` starts it.
 */
export function connectCommandServer(
  app: INestApplication,
  config: CommandsConfig,
  broker: InProcessBroker,
  service: string,
): void {
  const options: MicroserviceOptions =
    config.transport === 'in-process'
      ? { strategy: new InProcessServer(broker) }
      : config.transport === 'tcp'
        ? { transport: Transport.TCP, options: { host: config.listen.host, port: config.listen.port } }
        : {
            transport: Transport.KAFKA,
            options: {
              client: {
                clientId: `stablepay-${service}-commands`,
                brokers: [...(config.kafkaBrokers ?? [])],
              },
              consumer: { groupId: `stablepay-${service}-commands` },
              producer: { idempotent: true, maxInFlightRequests: 1 },
            },
          };
  // Deferred: the filter must be registered before the handlers are bound (binding reads the global filters).
  const server = app.connectMicroservice(options, { deferInitialization: true }) as ReturnType<
    INestApplication['connectMicroservice']
  > &
    DeferredMicroservice;
  server.useGlobalFilters(new CommandErrorFilter());
  // What connectMicroservice does when not deferred; the application runs the lifecycle hooks once, itself.
  server.registerListeners();
  server.setIsInitialized(true);
  server.setIsInitHookCalled(true);
}

/** NestMicroservice's methods that connectMicroservice uses and INestMicroservice does not declare. */
interface DeferredMicroservice {
  registerListeners(): void;
  setIsInitialized(value: boolean): void;
  setIsInitHookCalled(value: boolean): void;
}
