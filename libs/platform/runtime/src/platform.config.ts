import { type CommandsConfig, commandsConfigFromEnv, type CommandTransport } from '@stablepay/commands';
import {
  httpTimeoutsFromEnv,
  type HttpTimeouts,
  metricsPortFromEnv,
  type RateLimits,
  rateLimitsFromEnv,
  shutdownDelayMsFromEnv,
  trustProxyFromEnv,
} from '@stablepay/http';
import { ConfigError, envEnum, envInt, envOptional, envString, type LogLevel } from '@stablepay/util';

/** Configuration every service process shares, validated at start: a wrong value stops the process with its name. */
export interface PlatformConfig {
  readonly databaseUrl: string;
  readonly eventStore: 'postgres' | 'esdb';
  readonly esdbUrl?: string;
  readonly eventBus: 'store-log' | 'kafka';
  readonly kafkaBrokers?: readonly string[];
  readonly port: number;
  readonly host: string;
  readonly logLevel: LogLevel;
  /**
   * How commands reach the service that owns the aggregate (COMMAND_TRANSPORT and its addresses); absent means
   * in-process (a process hosting the owners itself, as tests do).
   */
  readonly commands?: CommandsConfig;
  /** Default DEFAULT_HTTP_TIMEOUTS. */
  readonly httpTimeouts?: HttpTimeouts;
  /** None when absent (tests that build a config by hand); platformConfigFromEnv always sets them. */
  readonly rateLimits?: RateLimits;
  /** TRUST_PROXY: whose X-Forwarded-For names the source address (default: nobody's). */
  readonly trustProxy?: number | readonly string[];
  /** SHUTDOWN_DELAY_MS: how long a stopping process keeps serving while /ready answers 503 (default 0). */
  readonly shutdownDelayMs?: number;
  /** METRICS_PORT: /metrics on a listener of its own (absent: on the API port). */
  readonly metricsPort?: number;
}

export function platformConfigFromEnv(
  env: Record<string, string | undefined>,
  defaults: { port?: number; commandTransport?: CommandTransport } = {},
): PlatformConfig {
  const eventStore = envEnum(env, 'EVENT_STORE', ['postgres', 'esdb'] as const, 'postgres');
  const eventBus = envEnum(env, 'EVENT_BUS', ['store-log', 'kafka'] as const, 'store-log');
  const esdbUrl = eventStore === 'esdb' ? envString(env, 'ESDB_URL') : envOptional(env, 'ESDB_URL');
  const brokers = eventBus === 'kafka' ? envString(env, 'KAFKA_BROKERS') : envOptional(env, 'KAFKA_BROKERS');
  const trustProxy = trustProxyFromEnv(env);
  const metricsPort = metricsPortFromEnv(env);
  return {
    databaseUrl: databaseUrlFromEnv(env),
    eventStore,
    ...(esdbUrl ? { esdbUrl } : {}),
    eventBus,
    ...(brokers
      ? {
          kafkaBrokers: brokers
            .split(',')
            .map((b) => b.trim())
            .filter(Boolean),
        }
      : {}),
    port: envInt(env, 'PORT', defaults.port ?? 3000, 0, 65535),
    host: envString(env, 'HOST', '0.0.0.0'),
    logLevel: envEnum(
      env,
      'LOG_LEVEL',
      ['fatal', 'error', 'warn', 'log', 'debug', 'verbose'] as const,
      'log',
    ),
    commands: commandsConfigFromEnv(
      env,
      defaults.commandTransport ? { transport: defaults.commandTransport } : {},
    ),
    httpTimeouts: httpTimeoutsFromEnv(env),
    rateLimits: rateLimitsFromEnv(env),
    ...(trustProxy !== undefined ? { trustProxy } : {}),
    shutdownDelayMs: shutdownDelayMsFromEnv(env),
    ...(metricsPort !== undefined ? { metricsPort } : {}),
  };
}

/**
 * DATABASE_URL must be a PostgreSQL connection URL (postgres:// or postgresql://; socket: for a Unix socket). The
 * driver read anything else as something: `garbage` was tried as a host named "base", `mysql://db/x` was dialled on
 * 5432; each failed later as "cannot reach the database". The value is not echoed (it holds the password).
 */
function databaseUrlFromEnv(env: Record<string, string | undefined>): string {
  const value = envString(env, 'DATABASE_URL');
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(value)?.[1]?.toLowerCase();
  if (scheme === 'postgres' || scheme === 'postgresql' || scheme === 'socket') return value;
  throw new ConfigError(
    `environment variable DATABASE_URL must be a PostgreSQL URL such as postgres://user:password@host:5432/database, ${
      scheme === undefined ? 'got a value with no scheme' : `got scheme '${scheme}:'`
    }`,
  );
}
