import { ConfigError, HOUR } from '@stablepay/util';
import { idempotencyPruneConfigFromEnv } from './idempotency-pruner';

describe('IDEMPOTENCY_KEY_RETENTION_HOURS', () => {
  it('defaults to 48 hours', () => {
    expect(idempotencyPruneConfigFromEnv({}).retentionMs).toBe(48 * HOUR);
  });

  it('refuses a retention within the 24 hours (and their margin), naming the variable', () => {
    expect(() => idempotencyPruneConfigFromEnv({ IDEMPOTENCY_KEY_RETENTION_HOURS: '24' })).toThrow(
      ConfigError,
    );
    expect(() => idempotencyPruneConfigFromEnv({ IDEMPOTENCY_KEY_RETENTION_HOURS: '24' })).toThrow(
      /IDEMPOTENCY_KEY_RETENTION_HOURS/,
    );
    expect(idempotencyPruneConfigFromEnv({ IDEMPOTENCY_KEY_RETENTION_HOURS: '25' }).retentionMs).toBe(
      25 * HOUR,
    );
  });
});
