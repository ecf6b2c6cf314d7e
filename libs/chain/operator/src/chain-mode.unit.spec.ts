import { DomainError } from '@stablepay/util';
import { assertChainModeServed, servedChainMode } from './chain-mode';

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
