import { ConfigError, DomainError } from '@stablepay/util';
import { assertChainModeServed, chainModeFromEnv, servedChainMode } from './chain-mode';
import { chainsFromEnv } from './chain-operator.config';

describe('CHAIN_MODE, read once for every scope', () => {
  it('is live when unset, and what it names otherwise', () => {
    expect(chainModeFromEnv({})).toBe('live');
    expect(chainModeFromEnv({ CHAIN_MODE: '' })).toBe('live');
    expect(chainModeFromEnv({ CHAIN_MODE: 'test' })).toBe('test');
    expect(chainModeFromEnv({ CHAIN_MODE: 'live' })).toBe('live');
  });

  it('refuses any other value, naming the variable', () => {
    expect(() => chainModeFromEnv({ CHAIN_MODE: 'prod' })).toThrow(ConfigError);
    expect(() => chainModeFromEnv({ CHAIN_MODE: 'prod' })).toThrow(/CHAIN_MODE/);
  });

  it('the chain layer reads the same mode whether or not local chains are passed (they do not choose it)', () => {
    const env = { CHAIN_RPC_URLS: 'eip155:8453=http://127.0.0.1:8545' };
    const localChains = [{ chainId: 8453, rpcUrl: 'http://127.0.0.1:8545', stablecoins: [] }];
    expect(chainsFromEnv(env, { localChains }).mode).toBe(chainModeFromEnv(env));
    expect(chainsFromEnv({ ...env, CHAIN_MODE: 'test' }, { localChains }).mode).toBe('test');
  });
});

describe('the chains’ mode a deployment serves', () => {
  it('is CHAIN_MODE when chains are configured, none without chains', () => {
    expect(servedChainMode({ enabled: true, mode: 'test' })).toBe('test');
    expect(servedChainMode({ enabled: true, mode: 'live' })).toBe('live');
    expect(servedChainMode({ enabled: false, mode: 'live' })).toBeNull();
  });

  it('admits a merchant of the chains’ mode, and any merchant on a deployment without chains', () => {
    expect(() => assertChainModeServed('test', 'test')).not.toThrow();
    expect(() => assertChainModeServed('live', 'live')).not.toThrow();
    expect(() => assertChainModeServed(null, 'live')).not.toThrow();
    expect(() => assertChainModeServed(null, 'test')).not.toThrow();
  });

  it.each([
    ['test', 'live'],
    ['live', 'test'],
  ] as const)(
    'refuses a %s deployment’s chains to a %s merchant with 409 chain_mode_mismatch',
    (served, mode) => {
      let thrown: unknown;
      try {
        assertChainModeServed(served, mode);
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toBeInstanceOf(DomainError);
      expect(thrown).toMatchObject({ status: 409, code: 'chain_mode_mismatch', type: 'invalid_request' });
    },
  );
});
