import { Wallet } from 'ethers';
import { computeStablepayAddresses, computeTestStablecoinAddresses } from '@stablepay/contracts';
import { ConfigError } from '@stablepay/util';
import { chainOperatorConfigFromEnv, publicRolesFromEnv } from './chain-operator.config';

const operator = Wallet.createRandom();
const admin = Wallet.createRandom().address;
const pauser = Wallet.createRandom().address;
const base = {
  CHAIN_RPC_URLS: 'eip155:8453=http://127.0.0.1:8545,eip155:137=http://127.0.0.1:8546',
  OPERATOR_PRIVATE_KEY: operator.privateKey,
  REGISTRY_ADMIN_ADDRESS: admin,
  OPERATOR_PAUSER_ADDRESS: pauser,
};

describe('chainOperatorConfigFromEnv', () => {
  it('is disabled without CHAIN_RPC_URLS, and then needs no key', () => {
    const config = chainOperatorConfigFromEnv({});
    expect(config).toMatchObject({ enabled: false, chains: [], operator: null, addresses: null });
  });

  it('reads the chains in SPEC order with their RPC URL, tokens, confirmations and the computed addresses', () => {
    const config = chainOperatorConfigFromEnv({ ...base, CHAIN_CONFIRMATIONS: '5,eip155:137=64' });
    expect(config.enabled).toBe(true);
    expect(config.mode).toBe('live');
    expect(config.chains.map((c) => [c.caip2, c.rpcUrl, c.confirmations])).toEqual([
      ['eip155:137', 'http://127.0.0.1:8546', 64],
      ['eip155:8453', 'http://127.0.0.1:8545', 5],
    ]);
    expect(config.chains[1]?.stablecoins.map((s) => s.symbol)).toEqual(['USDC']);
    expect(config.operator?.address).toBe(operator.address);
    expect(config.roles).toEqual({ admin, operator: operator.address, operatorPauser: pauser });
    expect(config.addresses).toEqual(
      computeStablepayAddresses({ admin, operator: operator.address, operatorPauser: pauser }),
    );
    expect(config.registry.isSupported('eip155:1')).toBe(false);
    expect(() => config.registry.get('eip155:1')).toThrow(/not supported/);
  });

  it('payouts: off without PAYOUT_OFF_RAMP_ADDRESS; with it, the computed PayoutDepositFactory unless overridden', () => {
    expect(chainOperatorConfigFromEnv(base).payouts).toBeNull();
    const offRamp = Wallet.createRandom().address;
    const config = chainOperatorConfigFromEnv({ ...base, PAYOUT_OFF_RAMP_ADDRESS: offRamp.toLowerCase() });
    expect(config.payouts).toEqual({ factory: config.addresses?.payoutDepositFactory, offRamp });
    const factory = Wallet.createRandom().address;
    expect(
      chainOperatorConfigFromEnv({
        ...base,
        PAYOUT_OFF_RAMP_ADDRESS: offRamp,
        PAYOUT_DEPOSIT_FACTORY_ADDRESS: factory,
      }).payouts,
    ).toEqual({ factory, offRamp });
    // Without chains nothing is read, not even a malformed off-ramp.
    expect(chainOperatorConfigFromEnv({ PAYOUT_OFF_RAMP_ADDRESS: 'nope' }).payouts).toBeNull();
  });

  it.each([
    [{ PAYOUT_OFF_RAMP_ADDRESS: 'nope' }, /PAYOUT_OFF_RAMP_ADDRESS must be an EVM address, got 'nope'/],
    [
      { PAYOUT_OFF_RAMP_ADDRESS: '0x0000000000000000000000000000000000000000' },
      /PAYOUT_OFF_RAMP_ADDRESS must not be the zero address/,
    ],
    [
      { PAYOUT_OFF_RAMP_ADDRESS: pauser, PAYOUT_DEPOSIT_FACTORY_ADDRESS: '0x12' },
      /PAYOUT_DEPOSIT_FACTORY_ADDRESS must be an EVM address/,
    ],
  ])('payouts: %j is a ConfigError naming the variable', (env, message) => {
    expect(() => chainOperatorConfigFromEnv({ ...base, ...env })).toThrow(ConfigError);
    expect(() => chainOperatorConfigFromEnv({ ...base, ...env })).toThrow(message);
  });

  it('test mode accepts the test stablecoins at their deterministic addresses', () => {
    const config = chainOperatorConfigFromEnv({ ...base, CHAIN_MODE: 'test' });
    const tokens = computeTestStablecoinAddresses();
    expect(config.chains[0]?.stablecoins.map((s) => [s.symbol, s.address])).toEqual([
      ['USDC', tokens.USDC],
      ['USDT', tokens.USDT],
      ['DAI', tokens.DAI],
    ]);
  });

  it('SUPPORTED_CHAINS narrows the chains; each one needs an RPC URL', () => {
    expect(
      chainOperatorConfigFromEnv({ ...base, SUPPORTED_CHAINS: 'eip155:8453' }).chains.map((c) => c.caip2),
    ).toEqual(['eip155:8453']);
    expect(() => chainOperatorConfigFromEnv({ ...base, SUPPORTED_CHAINS: 'eip155:8453,eip155:10' })).toThrow(
      /CHAIN_RPC_URLS has no URL for eip155:10/,
    );
  });

  it.each([
    [{ CHAIN_RPC_URLS: 'eip155:56=http://x' }, /CHAIN_RPC_URLS: eip155:56 is not a supported chain/],
    [{ CHAIN_RPC_URLS: 'eip155:8453=ftp://x' }, /CHAIN_RPC_URLS: eip155:8453 must use an http\(s\) URL/],
    [{ OPERATOR_PRIVATE_KEY: undefined }, /OPERATOR_PRIVATE_KEY is required/],
    [{ OPERATOR_PRIVATE_KEY: '0x1234' }, /OPERATOR_PRIVATE_KEY must be 0x followed by 64 hex/],
    [{ REGISTRY_ADMIN_ADDRESS: undefined }, /REGISTRY_ADMIN_ADDRESS is required/],
    [{ REGISTRY_ADMIN_ADDRESS: operator.address }, /REGISTRY_ADMIN_ADDRESS must not be the operator/],
    [{ OPERATOR_PAUSER_ADDRESS: 'nope' }, /OPERATOR_PAUSER_ADDRESS must be an EVM address/],
    [
      { CHAIN_CONFIRMATIONS: '0' },
      /CHAIN_CONFIRMATIONS: the default depth must be an integer between 1 and 10000/,
    ],
    [{ CHAIN_CONFIRMATIONS: 'eip155:10=3' }, /CHAIN_CONFIRMATIONS names eip155:10/],
    [{ CHAIN_MODE: 'prod' }, /CHAIN_MODE/],
    [{ SUPPORTED_CHAINS: 'eip155:8453,eip155:8453' }, /SUPPORTED_CHAINS lists eip155:8453 twice/],
  ])('refuses %p with a ConfigError naming the variable', (override, message) => {
    const env: Record<string, string | undefined> = { ...base, ...override };
    expect(() => chainOperatorConfigFromEnv(env)).toThrow(ConfigError);
    expect(() => chainOperatorConfigFromEnv(env)).toThrow(message);
  });

  it('never repeats the private key in an error', () => {
    const bad = '0x' + 'f'.repeat(64);
    expect(() => chainOperatorConfigFromEnv({ ...base, OPERATOR_PRIVATE_KEY: bad })).toThrow(/not a valid/);
    try {
      chainOperatorConfigFromEnv({ ...base, OPERATOR_PRIVATE_KEY: bad });
    } catch (error) {
      expect(String(error)).not.toContain(bad.slice(2));
    }
  });
});

describe('OPERATOR_ADDRESS: the operator as the gateway reads it (publicRolesFromEnv)', () => {
  it('a key holder starts when OPERATOR_ADDRESS is its own key (any case), and refuses another address naming both', () => {
    expect(
      chainOperatorConfigFromEnv({ ...base, OPERATOR_ADDRESS: operator.address.toLowerCase() }).operator
        ?.address,
    ).toBe(operator.address);
    const other = Wallet.createRandom().address;
    const env = { ...base, OPERATOR_ADDRESS: other };
    expect(() => chainOperatorConfigFromEnv(env)).toThrow(ConfigError);
    expect(() => chainOperatorConfigFromEnv(env)).toThrow(
      `OPERATOR_ADDRESS (${other}) is not the address of OPERATOR_PRIVATE_KEY (${operator.address})`,
    );
    expect(() => chainOperatorConfigFromEnv({ ...base, OPERATOR_ADDRESS: '0x12' })).toThrow(
      /OPERATOR_ADDRESS must be an EVM address/,
    );
  });

  it('gives the roles a key holder computes, without any key; none without OPERATOR_ADDRESS', () => {
    const { OPERATOR_PRIVATE_KEY: _key, ...keyless } = base;
    expect(publicRolesFromEnv({ ...keyless, OPERATOR_ADDRESS: operator.address })).toEqual(
      chainOperatorConfigFromEnv(base).roles,
    );
    expect(publicRolesFromEnv(keyless)).toBeNull();
    expect(publicRolesFromEnv({ ...keyless, OPERATOR_ADDRESS: '' })).toBeNull();
  });

  it.each([
    [{ REGISTRY_ADMIN_ADDRESS: undefined }, /REGISTRY_ADMIN_ADDRESS is required with OPERATOR_ADDRESS/],
    [{ OPERATOR_PAUSER_ADDRESS: undefined }, /OPERATOR_PAUSER_ADDRESS is required with OPERATOR_ADDRESS/],
    [{ REGISTRY_ADMIN_ADDRESS: operator.address }, /REGISTRY_ADMIN_ADDRESS must not be the operator/],
    [{ OPERATOR_ADDRESS: 'nope' }, /OPERATOR_ADDRESS must be an EVM address, got 'nope'/],
  ])('refuses %p with a ConfigError naming the variable', (override, message) => {
    const env = {
      REGISTRY_ADMIN_ADDRESS: admin,
      OPERATOR_PAUSER_ADDRESS: pauser,
      OPERATOR_ADDRESS: operator.address,
      ...override,
    };
    expect(() => publicRolesFromEnv(env)).toThrow(ConfigError);
    expect(() => publicRolesFromEnv(env)).toThrow(message);
  });
});
