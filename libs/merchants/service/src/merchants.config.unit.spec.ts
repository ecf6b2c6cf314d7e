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

describe('merchantsConfigFromEnv: REGISTRY_ADDRESS', () => {
  it('takes the registry checksummed, none when unset, and refuses a malformed one naming the variable', () => {
    const lower = '0x5fbdb2315678afecb367f032d93f642f64180aa3';
    const read = (REGISTRY_ADDRESS?: string) =>
      merchantsConfigFromEnv(REGISTRY_ADDRESS === undefined ? {} : { REGISTRY_ADDRESS }, {
        allowEphemeralKey: true,
      }).registryAddress;
    expect(read(lower)).toBe('0x5FbDB2315678afecb367f032d93F642f64180aa3');
    expect(read()).toBeNull();
    expect(() => read('0x12')).toThrow(/REGISTRY_ADDRESS/);
  });
});
