import { envEnum, envInt, envString, ConfigError } from '@stablepay/util';

/**
 * How commands travel from the gateway to the service that owns the aggregate (the code is the same for all):
 * - `in-process`: embedded mode; the owner's handlers run in the same process, still behind serialisation;
 * - `tcp`: @nestjs/microservices TCP; each owner listens on COMMANDS_PORT, callers dial `<OWNER>_COMMANDS_ADDRESS`;
 * - `kafka`: @nestjs/microservices Kafka request-reply over KAFKA_BROKERS.
 */
export type CommandTransport = 'in-process' | 'tcp' | 'kafka';

/** The services other processes send commands to (app names), and the variable naming each one's address. */
export const COMMAND_OWNERS = {
  payments: 'PAYMENTS_COMMANDS_ADDRESS',
  payouts: 'PAYOUTS_COMMANDS_ADDRESS',
  subscriptions: 'SUBSCRIPTIONS_COMMANDS_ADDRESS',
  'webhook-dispatch': 'WEBHOOK_DISPATCH_COMMANDS_ADDRESS',
  indexer: 'INDEXER_COMMANDS_ADDRESS',
} as const;
export type CommandOwner = keyof typeof COMMAND_OWNERS;

export interface HostPort {
  readonly host: string;
  readonly port: number;
}

export interface CommandsConfig {
  readonly transport: CommandTransport;
  /** tcp: where a process that owns commands listens. */
  readonly listen: HostPort;
  /** tcp: where each owner listens (default `<owner>:4000`, the service name in compose and k8s). */
  readonly owners: Readonly<Record<CommandOwner, HostPort>>;
  /** kafka: the brokers (KAFKA_BROKERS). */
  readonly kafkaBrokers?: readonly string[];
  /** How long a caller waits for the owner's answer before failing with 503. */
  readonly timeoutMs: number;
}

const DEFAULT_COMMANDS_PORT = 4000;

function parseHostPort(name: string, value: string): HostPort {
  const match = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):([0-9]{1,5})$/.exec(value);
  const port = Number(match?.[2]);
  if (!match?.[1] || !Number.isInteger(port) || port < 1 || port > 65535)
    throw new ConfigError(`environment variable ${name} must be host:port, got '${value}'`);
  return { host: match[1].replace(/^\[|\]$/g, ''), port };
}

export function commandsConfigFromEnv(
  env: Record<string, string | undefined>,
  defaults: { transport?: CommandTransport } = {},
): CommandsConfig {
  const transport = envEnum(
    env,
    'COMMAND_TRANSPORT',
    ['in-process', 'tcp', 'kafka'] as const,
    defaults.transport ?? 'tcp',
  );
  const owners = Object.fromEntries(
    Object.entries(COMMAND_OWNERS).map(([owner, variable]) => [
      owner,
      parseHostPort(variable, envString(env, variable, `${owner}:${DEFAULT_COMMANDS_PORT}`)),
    ]),
  ) as Record<CommandOwner, HostPort>;
  const brokers =
    transport === 'kafka'
      ? envString(env, 'KAFKA_BROKERS')
          .split(',')
          .map((b) => b.trim())
          .filter(Boolean)
      : undefined;
  return {
    transport,
    listen: {
      host: envString(env, 'COMMANDS_HOST', '0.0.0.0'),
      port: envInt(env, 'COMMANDS_PORT', DEFAULT_COMMANDS_PORT, 1, 65535),
    },
    owners,
    ...(brokers ? { kafkaBrokers: brokers } : {}),
    timeoutMs: envInt(env, 'COMMAND_TIMEOUT_MS', 10_000, 100, 120_000),
  };
}
