import { computeStablepayAddresses } from '@stablepay/contracts';
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

describe('merchantsConfigFromEnv: the contract addresses settings show, from the public roles', () => {
  // Public addresses only: the gateway never holds the operator key.
  const roles = {
    admin: '0x0000000000000000000000000000000000000A11',
    operator: '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266',
    operatorPauser: '0x0000000000000000000000000000000000000B22',
  };
  const rolesEnv = {
    OPERATOR_ADDRESS: roles.operator,
    REGISTRY_ADMIN_ADDRESS: roles.admin,
    OPERATOR_PAUSER_ADDRESS: roles.operatorPauser,
  };
  const expected = computeStablepayAddresses(roles);
  const chains = { CHAIN_RPC_URLS: 'eip155:8453=http://127.0.0.1:8545' };
  const read = (env: Record<string, string | undefined>, requireContractAddresses = true) =>
    merchantsConfigFromEnv(
      { WEBHOOK_SECRET_ENCRYPTION_KEY: KEY, ...env },
      {
        allowEphemeralKey: false,
        requireContractAddresses,
      },
    );

  it('computes the registry and payment factory from OPERATOR_ADDRESS, REGISTRY_ADMIN_ADDRESS and OPERATOR_PAUSER_ADDRESS', () => {
    const config = read({ ...chains, ...rolesEnv });
    expect(config.registryAddress).toBe(expected.registry);
    expect(config.paymentFactoryAddress).toBe(expected.paymentFactory);
  });

  it('computes the subscription manager factory from the roles, else reads SUBSCRIPTION_MANAGER_FACTORY_ADDRESS', () => {
    expect(read({ ...chains, ...rolesEnv }).subscriptionManagerFactoryAddress).toBe(
      expected.subscriptionManagerFactory,
    );
    const factory = '0x5FbDB2315678afecb367f032d93F642f64180aa3';
    expect(
      read({ SUBSCRIPTION_MANAGER_FACTORY_ADDRESS: factory.toLowerCase() }).subscriptionManagerFactoryAddress,
    ).toBe(factory);
    expect(read({}).subscriptionManagerFactoryAddress).toBeNull();
  });

  it('knows the Stablepay contracts the roles fix, and every stablecoin, as contracts no signer or settlement address may be', () => {
    const known = read({ ...chains, ...rolesEnv }).knownContracts;
    expect(known.get(expected.registry.toLowerCase())).toBe('the Stablepay registry contract');
    expect(known.get(expected.paymentFactory.toLowerCase())).toBe('the Stablepay payment factory contract');
    expect(known.get(expected.subscriptionManagerFactory.toLowerCase())).toMatch(
      /subscription manager factory/,
    );
    expect(known.get('0x833589fcd6edb6e08f4c7c32d4f71b54bda02913')).toBe(
      'the USDC token contract on eip155:8453',
    );
    // Without roles, a configured registry is still known; the tokens always are.
    const factory = '0x5FbDB2315678afecb367f032d93F642f64180aa3';
    const configured = read({ REGISTRY_ADDRESS: factory }, false).knownContracts;
    expect(configured.get(factory.toLowerCase())).toBe('the Stablepay registry contract');
    expect(configured.get(expected.paymentFactory.toLowerCase())).toBeUndefined();
  });

  it('PAYMENT_FACTORY_ADDRESS and REGISTRY_ADDRESS may restate the computed addresses, or name them without roles', () => {
    const config = read({
      ...rolesEnv,
      PAYMENT_FACTORY_ADDRESS: expected.paymentFactory.toLowerCase(),
      REGISTRY_ADDRESS: expected.registry.toLowerCase(),
    });
    expect(config.paymentFactoryAddress).toBe(expected.paymentFactory);
    expect(config.registryAddress).toBe(expected.registry);
    const factory = '0x5FbDB2315678afecb367f032d93F642f64180aa3';
    expect(read({ PAYMENT_FACTORY_ADDRESS: factory.toLowerCase() }).paymentFactoryAddress).toBe(factory);
    expect(() => read({ PAYMENT_FACTORY_ADDRESS: '0x12' })).toThrow(/PAYMENT_FACTORY_ADDRESS/);
  });

  it('refuses a PAYMENT_FACTORY_ADDRESS other than the factory the roles fix (the payments service deploys only through that one)', () => {
    const other = '0x5FbDB2315678afecb367f032d93F642f64180aa3';
    expect(() => read({ ...rolesEnv, PAYMENT_FACTORY_ADDRESS: other })).toThrow(ConfigError);
    expect(() => read({ ...rolesEnv, PAYMENT_FACTORY_ADDRESS: other })).toThrow(
      `PAYMENT_FACTORY_ADDRESS (${other}) is not the PaymentFactory OPERATOR_ADDRESS, REGISTRY_ADMIN_ADDRESS and OPERATOR_PAUSER_ADDRESS fix (${expected.paymentFactory})`,
    );
  });

  it('refuses a REGISTRY_ADDRESS other than the registry the roles fix (the payments service verifies against that one)', () => {
    const other = '0x5FbDB2315678afecb367f032d93F642f64180aa3';
    expect(() => read({ ...rolesEnv, REGISTRY_ADDRESS: other })).toThrow(ConfigError);
    expect(() => read({ ...rolesEnv, REGISTRY_ADDRESS: other })).toThrow(
      `REGISTRY_ADDRESS (${other}) is not the registry OPERATOR_ADDRESS, REGISTRY_ADMIN_ADDRESS and OPERATOR_PAUSER_ADDRESS fix (${expected.registry})`,
    );
  });

  it('refuses incomplete roles naming the missing variable', () => {
    expect(() =>
      read({ OPERATOR_ADDRESS: roles.operator, OPERATOR_PAUSER_ADDRESS: roles.operatorPauser }),
    ).toThrow(/REGISTRY_ADMIN_ADDRESS is required with OPERATOR_ADDRESS/);
  });

  it('a gateway with chains but neither the roles nor REGISTRY_ADDRESS refuses to start, naming OPERATOR_ADDRESS', () => {
    // OPERATOR_PAUSER_ADDRESS and REGISTRY_ADMIN_ADDRESS alone are what deployments gave the gateway before.
    const partial = {
      ...chains,
      OPERATOR_PAUSER_ADDRESS: roles.operatorPauser,
      REGISTRY_ADMIN_ADDRESS: roles.admin,
    };
    expect(() => read(partial)).toThrow(ConfigError);
    expect(() => read(partial)).toThrow(/OPERATOR_ADDRESS .* is required when CHAIN_RPC_URLS is set/);
    expect(read({ ...chains, REGISTRY_ADDRESS: expected.registry }).registryAddress).toBe(expected.registry);
    // Without chains (or for another reader, webhook-dispatch) nothing is required: settings show null.
    expect(read({}).registryAddress).toBeNull();
    expect(read(partial, false).registryAddress).toBeNull();
  });
});
