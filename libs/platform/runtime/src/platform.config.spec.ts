import { platformConfigFromEnv } from './platform.config';

describe('platformConfigFromEnv (fail fast, naming the variable)', () => {
  it('needs DATABASE_URL', () => {
    expect(() => platformConfigFromEnv({})).toThrow(/DATABASE_URL/);
  });
  it.each([
    ['garbage', 'got a value with no scheme'],
    ['127.0.0.1:5432/stablepay', 'got a value with no scheme'],
    ['mysql://app:s3cret@db/stablepay', "got scheme 'mysql:'"],
    ['http://db:5432/stablepay', "got scheme 'http:'"],
  ])('refuses a DATABASE_URL that is not a PostgreSQL URL (%s), without echoing it', (url, why) => {
    let message = '';
    try {
      platformConfigFromEnv({ DATABASE_URL: url });
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toContain('environment variable DATABASE_URL must be a PostgreSQL URL');
    expect(message).toContain(why);
    expect(message).not.toContain('s3cret');
  });
  it('takes postgres://, postgresql:// (any case) and socket: URLs', () => {
    for (const url of [
      'postgres://h/db',
      'postgresql://u:p@h:5433/db?sslmode=require',
      'POSTGRES://h/db',
      'socket:/run/pg?db=x',
    ])
      expect(platformConfigFromEnv({ DATABASE_URL: url }).databaseUrl).toBe(url);
  });
  it('defaults to the Postgres store and the store-log bus on port 3000', () => {
    expect(platformConfigFromEnv({ DATABASE_URL: 'postgres://x' })).toMatchObject({
      eventStore: 'postgres',
      eventBus: 'store-log',
      port: 3000,
      host: '0.0.0.0',
      logLevel: 'log',
    });
  });
  it('needs ESDB_URL with EVENT_STORE=esdb and KAFKA_BROKERS with EVENT_BUS=kafka', () => {
    expect(() => platformConfigFromEnv({ DATABASE_URL: 'postgres://x', EVENT_STORE: 'esdb' })).toThrow(
      /ESDB_URL/,
    );
    expect(() => platformConfigFromEnv({ DATABASE_URL: 'postgres://x', EVENT_BUS: 'kafka' })).toThrow(
      /KAFKA_BROKERS/,
    );
    expect(
      platformConfigFromEnv({
        DATABASE_URL: 'postgres://x',
        EVENT_BUS: 'kafka',
        KAFKA_BROKERS: 'a:9092, b:9092',
      }).kafkaBrokers,
    ).toEqual(['a:9092', 'b:9092']);
  });
  it('refuses unknown adapters, a bad port and a bad log level', () => {
    expect(() => platformConfigFromEnv({ DATABASE_URL: 'postgres://x', EVENT_STORE: 'mongo' })).toThrow(
      /EVENT_STORE must be one of postgres, esdb/,
    );
    expect(() => platformConfigFromEnv({ DATABASE_URL: 'postgres://x', PORT: '99999' })).toThrow(/PORT/);
    expect(() => platformConfigFromEnv({ DATABASE_URL: 'postgres://x', LOG_LEVEL: 'chatty' })).toThrow(
      /LOG_LEVEL/,
    );
  });
  it('serves /metrics on the API port unless METRICS_PORT names another, naming it when malformed', () => {
    expect(platformConfigFromEnv({ DATABASE_URL: 'postgres://x' }).metricsPort).toBeUndefined();
    expect(platformConfigFromEnv({ DATABASE_URL: 'postgres://x', METRICS_PORT: '9464' }).metricsPort).toBe(
      9464,
    );
    expect(() => platformConfigFromEnv({ DATABASE_URL: 'postgres://x', METRICS_PORT: 'metrics' })).toThrow(
      /METRICS_PORT/,
    );
    expect(() => platformConfigFromEnv({ DATABASE_URL: 'postgres://x', METRICS_PORT: '70000' })).toThrow(
      /METRICS_PORT/,
    );
  });
  it('reads HTTP deadlines and rate limits, with defaults, naming a bad variable', () => {
    const config = platformConfigFromEnv({
      DATABASE_URL: 'postgres://x',
      RATE_LIMIT_PER_KEY_PER_SECOND: '0',
    });
    expect(config.rateLimits).toEqual({
      perKeyPerSecond: 0,
      perSourcePerSecond: 10000,
      authFailuresPerMinute: 30,
      unauthenticatedInFlightPerSource: 128,
    });
    expect(config.httpTimeouts).toEqual({
      requestMs: 30000,
      headersMs: 10000,
      keepAliveMs: 5000,
      idleMs: 60000,
    });
    expect(() =>
      platformConfigFromEnv({ DATABASE_URL: 'postgres://x', RATE_LIMIT_AUTH_FAILURES_PER_MINUTE: 'many' }),
    ).toThrow(/RATE_LIMIT_AUTH_FAILURES_PER_MINUTE/);
    expect(() =>
      platformConfigFromEnv({
        DATABASE_URL: 'postgres://x',
        RATE_LIMIT_UNAUTHENTICATED_IN_FLIGHT_PER_SOURCE: '-1',
      }),
    ).toThrow(/RATE_LIMIT_UNAUTHENTICATED_IN_FLIGHT_PER_SOURCE/);
    expect(() =>
      platformConfigFromEnv({
        DATABASE_URL: 'postgres://x',
        HTTP_REQUEST_TIMEOUT_MS: '1000',
        HTTP_HEADERS_TIMEOUT_MS: '5000',
      }),
    ).toThrow(/HTTP_HEADERS_TIMEOUT_MS/);
  });
  it('reads TRUST_PROXY as a hop count or proxy addresses, naming it when malformed', () => {
    expect(platformConfigFromEnv({ DATABASE_URL: 'postgres://x' }).trustProxy).toBeUndefined();
    expect(platformConfigFromEnv({ DATABASE_URL: 'postgres://x', TRUST_PROXY: '1' }).trustProxy).toBe(1);
    expect(
      platformConfigFromEnv({ DATABASE_URL: 'postgres://x', TRUST_PROXY: '10.0.0.0/8, 127.0.0.1' })
        .trustProxy,
    ).toEqual(['10.0.0.0/8', '127.0.0.1']);
    expect(() => platformConfigFromEnv({ DATABASE_URL: 'postgres://x', TRUST_PROXY: 'everyone' })).toThrow(
      /TRUST_PROXY/,
    );
  });
});
