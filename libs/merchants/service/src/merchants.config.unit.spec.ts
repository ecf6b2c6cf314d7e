import { ConfigError } from '@stablepay/util';
import { merchantsConfigFromEnv } from './merchants.config';

const KEY = 'ab'.repeat(32);

describe('merchantsConfigFromEnv: ADMIN_TOKEN', () => {
  it.each([
    ['a service', { allowEphemeralKey: false }],
    ['the embedded run', { allowEphemeralKey: true }],
  ])('refuses an operator token shorter than 32 characters in %s, naming the variable', (_, options) => {
    for (const token of ['x', 'admin', 'a'.repeat(31)]) {
      expect(() =>
        merchantsConfigFromEnv({ WEBHOOK_SECRET_ENCRYPTION_KEY: KEY, ADMIN_TOKEN: token }, options),
      ).toThrow(ConfigError);
      expect(() =>
        merchantsConfigFromEnv({ WEBHOOK_SECRET_ENCRYPTION_KEY: KEY, ADMIN_TOKEN: token }, options),
      ).toThrow(/ADMIN_TOKEN/);
    }
  });

  it('accepts 32 characters or more, and no token at all (the operator API off, the embedded default)', () => {
    const token = 'a'.repeat(32);
    expect(
      merchantsConfigFromEnv(
        { WEBHOOK_SECRET_ENCRYPTION_KEY: KEY, ADMIN_TOKEN: token },
        { allowEphemeralKey: false },
      ).adminToken,
    ).toBe(token);
    expect(merchantsConfigFromEnv({}, { allowEphemeralKey: true }).adminToken).toBeNull();
    expect(merchantsConfigFromEnv({ ADMIN_TOKEN: '' }, { allowEphemeralKey: true }).adminToken).toBeNull();
  });
});
