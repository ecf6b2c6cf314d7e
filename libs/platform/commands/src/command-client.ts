import { type DynamicModule, Global, Inject, Injectable, Module, type OnModuleDestroy } from '@nestjs/common';
import { ClientProxy, ClientProxyFactory, Transport } from '@nestjs/microservices';
import { lastValueFrom, timeout, TimeoutError } from 'rxjs';
import { DomainError } from '@stablepay/util';
import { type CommandOwner, type CommandsConfig } from './commands.config';
import { InProcessBroker, InProcessClient } from './in-process.transport';
import { RemoteCommandError, reviveRemoteError } from './remote-error';
import { commandPatternsOf } from './patterns';

export const COMMANDS_CONFIG = Symbol('COMMANDS_CONFIG');
export const IN_PROCESS_BROKER = Symbol('IN_PROCESS_BROKER');

const unavailable = (owner: string, why: string) =>
  new DomainError({
    type: 'api_error',
    status: 503,
    code: 'service_unavailable',
    message: `The ${owner} service did not answer (${why}); retry shortly.`,
  });

/**
 * Sends a command to the service that owns the aggregate and returns its answer, over the configured transport
 * (docs/architecture.md, "Gateway route -> use case"). A DomainError the owner threw is thrown here unchanged;
 * an owner that cannot be reached or does not answer in time is a 503 `service_unavailable`.
 */
@Injectable()
export class CommandClient implements OnModuleDestroy {
  private readonly clients = new Map<CommandOwner, ClientProxy>();

  constructor(
    @Inject(COMMANDS_CONFIG) private readonly config: CommandsConfig,
    @Inject(IN_PROCESS_BROKER) private readonly broker: InProcessBroker,
  ) {}

  /**
   * `options.minTimeoutMs`: a command whose owner may rightly take longer than COMMAND_TIMEOUT_MS (it waits on a
   * third party under its own deadline) is waited for at least this long, so its own answer arrives, not a 503.
   */
  async send<Result>(
    owner: CommandOwner,
    pattern: string,
    payload: unknown,
    options: { readonly minTimeoutMs?: number } = {},
  ): Promise<Result> {
    const timeoutMs = Math.max(this.config.timeoutMs, options.minTimeoutMs ?? 0);
    if (this.config.transport === 'in-process') return this.sendInProcess(owner, pattern, payload, timeoutMs);
    try {
      const client = await this.client(owner);
      return await lastValueFrom(
        client.send<Result>(pattern, payload ?? {}).pipe(timeout({ first: timeoutMs })),
      );
    } catch (error) {
      if (error instanceof TimeoutError) throw unavailable(owner, `no answer within ${timeoutMs} ms`);
      const revived = reviveRemoteError(pattern, error);
      if (revived instanceof RemoteCommandError && isConnectionFailure(error))
        throw unavailable(owner, revived.message);
      throw revived;
    }
  }

  /**
   * The in-process transport without the ClientProxy's packet streams (rxjs subjects and a packet id per command,
   * a profiled share of every embedded create): the same JSON crossing, the same errors, the same timeout.
   */
  private async sendInProcess<Result>(
    owner: CommandOwner,
    pattern: string,
    payload: unknown,
    timeoutMs: number,
  ): Promise<Result> {
    const server = this.broker.server;
    if (!server) throw reviveRemoteError(pattern, { message: 'no in-process command server is listening' });
    let timeout: DomainError | undefined;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        timeout = unavailable(owner, `no answer within ${timeoutMs} ms`);
        reject(timeout);
      }, timeoutMs);
    });
    try {
      return (await Promise.race([server.call(pattern, payload ?? {}), timedOut])) as Result;
    } catch (error) {
      if (timeout !== undefined && error === timeout) throw error;
      throw reviveRemoteError(pattern, error);
    } finally {
      clearTimeout(timer);
    }
  }

  async onModuleDestroy(): Promise<void> {
    const clients = [...this.clients.values()];
    this.clients.clear();
    await Promise.all(clients.map((c) => c.close()));
  }

  private async client(owner: CommandOwner): Promise<ClientProxy> {
    const existing = this.clients.get(owner);
    if (existing) return existing;
    const client = this.create(owner);
    this.clients.set(owner, client);
    if (this.config.transport === 'kafka') {
      // Kafka request-reply: the client listens on `<pattern>.reply` for the patterns it sends.
      const kafka = client as ClientProxy & { subscribeToResponseOf(pattern: string): void };
      for (const pattern of commandPatternsOf(owner)) kafka.subscribeToResponseOf(pattern);
    }
    try {
      await client.connect();
    } catch (error) {
      // Not cached: the next command tries again (the owner may be starting or restarting).
      this.clients.delete(owner);
      await Promise.resolve(client.close()).catch(() => undefined);
      throw error;
    }
    return client;
  }

  private create(owner: CommandOwner): ClientProxy {
    switch (this.config.transport) {
      case 'in-process':
        return new InProcessClient(this.broker);
      case 'tcp':
        return ClientProxyFactory.create({ transport: Transport.TCP, options: this.config.owners[owner] });
      case 'kafka':
        return ClientProxyFactory.create({
          transport: Transport.KAFKA,
          options: {
            client: { clientId: `stablepay-${owner}-caller`, brokers: [...(this.config.kafkaBrokers ?? [])] },
            consumer: { groupId: `stablepay-${owner}-replies` },
            producer: { idempotent: true, maxInFlightRequests: 1 },
          },
        }) as unknown as ClientProxy;
    }
  }
}

function isConnectionFailure(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return (
    typeof code === 'string' &&
    ['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN'].includes(code)
  );
}

/** Gives every module of the process the CommandClient (and the in-process broker its server shares). */
@Global()
@Module({})
export class CommandsModule {
  static forRoot(config: CommandsConfig, broker: InProcessBroker): DynamicModule {
    return {
      module: CommandsModule,
      providers: [
        { provide: COMMANDS_CONFIG, useValue: config },
        { provide: IN_PROCESS_BROKER, useValue: broker },
        CommandClient,
      ],
      exports: [CommandClient, COMMANDS_CONFIG],
    };
  }
}
