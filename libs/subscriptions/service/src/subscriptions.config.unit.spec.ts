import { computeTestStablecoinAddresses } from '@stablepay/contracts';
import { ConfigError } from '@stablepay/util';
import { subscriptionsConfigFromEnv } from './subscriptions.config';

describe('subscriptions configuration', () => {
  it('defaults: no HOSTED_URL (derived per request), 1 s expiry polling, every registry chain, ARS rates', () => {
    const config = subscriptionsConfigFromEnv({});
    expect(config).toMatchObject({ hostedUrl: null, expiryPollIntervalMs: 1000, supportedChains: null });
    expect(config.chains.live.list().map((c) => c.caip2)).toEqual([
      'eip155:1',
      'eip155:137',
      'eip155:42161',
      'eip155:8453',
      'eip155:10',
    ]);
    expect(config.chains.test).toBe(config.chains.live);
    expect(Object.keys(config.sandboxRates)).toEqual(['ARS']);
  });

  it('test mode offers the local chains’ tokens at their runtime addresses when the launcher passes them', () => {
    const config = subscriptionsConfigFromEnv(
      {},
      {
        localChains: [
          {
            chainId: 8453,
            rpcUrl: 'http://127.0.0.1:8545',
            stablecoins: [
              { symbol: 'DAI', decimals: 18, address: '0x1111111111111111111111111111111111111111' },
            ],
          },
        ],
      },
    );
    expect(
      config.chains.test.list().map((c) => [c.caip2, c.stablecoins.map((s) => `${s.symbol}/${s.decimals}`)]),
    ).toEqual([['eip155:8453', ['DAI/18']]]);
  });

  it('a test deployment (CHAIN_MODE=test, no local chains) offers the test stablecoins at their deterministic addresses', () => {
    const config = subscriptionsConfigFromEnv({
      CHAIN_RPC_URLS: 'eip155:8453=http://anvil:8545',
      CHAIN_MODE: 'test',
    });
    const tokens = computeTestStablecoinAddresses();
    expect(config.chains.test.list().map((c) => [c.caip2, c.rpcUrl])).toEqual([
      ['eip155:8453', 'http://anvil:8545'],
    ]);
    expect(config.chains.test.findStablecoin('eip155:8453', 'USDC')?.address).toBe(tokens.USDC);
    // Live merchants keep the mainnet registry.
    expect(config.chains.live.findStablecoin('eip155:8453', 'USDC')?.address).not.toBe(tokens.USDC);
    expect(() =>
      subscriptionsConfigFromEnv({ CHAIN_RPC_URLS: 'eip155:8453=ftp://anvil', CHAIN_MODE: 'test' }),
    ).toThrow(/CHAIN_RPC_URLS: eip155:8453 must use an http\(s\) URL/);
  });

  it('knows the mode of the chains the deployment runs (none without CHAIN_RPC_URLS)', () => {
    expect(subscriptionsConfigFromEnv({}).chainMode).toBeNull();
    expect(
      subscriptionsConfigFromEnv({ CHAIN_RPC_URLS: 'eip155:8453=http://anvil:8545', CHAIN_MODE: 'test' })
        .chainMode,
    ).toBe('test');
    expect(subscriptionsConfigFromEnv({ CHAIN_RPC_URLS: 'eip155:8453=http://anvil:8545' }).chainMode).toBe(
      'live',
    );
  });

  it('reads and validates HOSTED_URL, SUBSCRIPTION_EXPIRY_POLL_MS and SUPPORTED_CHAINS', () => {
    expect(
      subscriptionsConfigFromEnv({
        HOSTED_URL: 'https://pay.example.com/',
        SUPPORTED_CHAINS: 'eip155:8453, eip155:10',
      }),
    ).toMatchObject({
      hostedUrl: 'https://pay.example.com',
      supportedChains: ['eip155:8453', 'eip155:10'],
    });
    expect(() => subscriptionsConfigFromEnv({ HOSTED_URL: 'pay.example.com' })).toThrow(ConfigError);
    expect(() => subscriptionsConfigFromEnv({ SUBSCRIPTION_EXPIRY_POLL_MS: '0' })).toThrow(ConfigError);
    expect(() => subscriptionsConfigFromEnv({ SUPPORTED_CHAINS: 'eip155:56' })).toThrow(/SUPPORTED_CHAINS/);
  });
});
