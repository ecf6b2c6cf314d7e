import { getAddress } from 'ethers';
import { DomainError } from '@stablepay/util';
import { LIVE_CHAINS, createChainRegistry } from './chains';

const LOCAL_USDC = '0x5FbDB2315678afecb367f032d93F642f64180aa3';
const LOCAL_DAI18 = '0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512';

function domainErrorOf(fn: () => unknown): DomainError {
  try {
    fn();
  } catch (error) {
    if (error instanceof DomainError) return error;
    throw error;
  }
  throw new Error('expected a DomainError');
}

describe('live chain registry', () => {
  const registry = createChainRegistry({ mode: 'live', rpcUrls: { 'eip155:8453': 'https://base.example' } });

  it('lists the five chains of SPEC.md in its order', () => {
    expect(registry.list().map((c) => [c.caip2, c.name])).toEqual([
      ['eip155:1', 'Ethereum'],
      ['eip155:137', 'Polygon'],
      ['eip155:42161', 'Arbitrum One'],
      ['eip155:8453', 'Base'],
      ['eip155:10', 'Optimism'],
    ]);
  });

  it('carries every built-in token address in valid EIP-55 checksum form', () => {
    // A transcription error in a mixed-case address almost surely breaks its checksum, so this guards the literals.
    for (const chain of LIVE_CHAINS) {
      for (const token of chain.stablecoins) expect(getAddress(token.address)).toBe(token.address);
    }
  });

  it('accepts USDC on every chain with 6 decimals and a canonical CAIP-19 id', () => {
    for (const chain of registry.list()) {
      const usdc = registry.findStablecoin(chain.caip2, 'USDC');
      expect(usdc?.decimals).toBe(6);
      expect(usdc?.assetId).toBe(`${chain.caip2}/erc20:${usdc?.address}`);
    }
  });

  it('uses the configured RPC URL and null where none was configured', () => {
    expect(registry.get('eip155:8453').rpcUrl).toBe('https://base.example');
    expect(registry.get('eip155:1').rpcUrl).toBeNull();
  });

  it('rejects an RPC URL for a chain it does not support', () => {
    expect(() =>
      createChainRegistry({ mode: 'live', rpcUrls: { 'eip155:56': 'https://bsc.example' } }),
    ).toThrow('eip155:56 is not a supported chain');
  });

  it('rejects an EVM chain outside the table with unsupported_chain on the param', () => {
    const error = domainErrorOf(() => registry.get('eip155:56', 'supported_chains[0]'));
    expect(error.code).toBe('unsupported_chain');
    expect(error.param).toBe('supported_chains[0]');
  });

  it('rejects a non-EVM namespace with unsupported_chain_namespace', () => {
    expect(domainErrorOf(() => registry.get('solana:mainnet')).code).toBe('unsupported_chain_namespace');
  });

  it('resolves an accepted asset id in any address case', () => {
    const { chain, stablecoin } = registry.getAsset(
      'eip155:1/erc20:0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48',
    );
    expect(chain.caip2).toBe('eip155:1');
    expect(stablecoin.symbol).toBe('USDC');
  });

  it('rejects a token that is not an accepted stablecoin with unsupported_asset', () => {
    const error = domainErrorOf(() =>
      registry.getAsset('eip155:1/erc20:0x6B175474E89094C44Da98b954EedeAC495271d0F'),
    );
    expect(error.code).toBe('unsupported_asset');
    expect(error.param).toBe('asset');
  });
});

describe('test chain registry', () => {
  const registry = createChainRegistry({
    mode: 'test',
    localChains: [
      {
        chainId: 8453,
        rpcUrl: 'http://127.0.0.1:61001',
        stablecoins: [
          { symbol: 'USDC', decimals: 6, address: LOCAL_USDC.toLowerCase() },
          { symbol: 'TUSD18', decimals: 18, address: LOCAL_DAI18 },
        ],
      },
      {
        chainId: 137n,
        rpcUrl: 'http://127.0.0.1:61002',
        stablecoins: [{ symbol: 'USDC', decimals: 6, address: LOCAL_USDC }],
      },
    ],
  });

  it('supports exactly the chains a local node was supplied for, keeping their mainnet CAIP ids', () => {
    expect(registry.mode).toBe('test');
    expect(registry.list().map((c) => c.caip2)).toEqual(['eip155:137', 'eip155:8453']);
    expect(registry.isSupported('eip155:1')).toBe(false);
  });

  it('uses the injected RPC URL and token addresses instead of the mainnet ones', () => {
    const base = registry.get('eip155:8453');
    expect(base.rpcUrl).toBe('http://127.0.0.1:61001');
    expect(base.stablecoins.map((s) => [s.symbol, s.decimals, s.address])).toEqual([
      ['USDC', 6, LOCAL_USDC],
      ['TUSD18', 18, LOCAL_DAI18],
    ]);
    expect(registry.getAsset(`eip155:8453/erc20:${LOCAL_DAI18}`).stablecoin.decimals).toBe(18);
  });

  it('does not accept mainnet token addresses in test mode', () => {
    const error = domainErrorOf(() =>
      registry.getAsset('eip155:8453/erc20:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913'),
    );
    expect(error.code).toBe('unsupported_asset');
  });

  it('rejects a local chain that stands in for no supported chain', () => {
    expect(() =>
      createChainRegistry({
        mode: 'test',
        localChains: [{ chainId: 31337, rpcUrl: 'http://127.0.0.1:1', stablecoins: [] }],
      }),
    ).toThrow('eip155:31337 does not stand in for a supported chain');
  });

  it('rejects a local chain given twice', () => {
    const local = { chainId: 10, rpcUrl: 'http://127.0.0.1:1', stablecoins: [] };
    expect(() => createChainRegistry({ mode: 'test', localChains: [local, local] })).toThrow('given twice');
  });

  it('rejects the same token listed twice on one chain', () => {
    expect(() =>
      createChainRegistry({
        mode: 'test',
        localChains: [
          {
            chainId: 10,
            rpcUrl: 'http://127.0.0.1:1',
            stablecoins: [
              { symbol: 'USDC', decimals: 6, address: LOCAL_USDC },
              { symbol: 'USDT', decimals: 6, address: LOCAL_USDC.toLowerCase() },
            ],
          },
        ],
      }),
    ).toThrow('listed twice');
  });

  it('rejects fractional decimals', () => {
    expect(() =>
      createChainRegistry({
        mode: 'test',
        localChains: [
          {
            chainId: 10,
            rpcUrl: 'http://127.0.0.1:1',
            stablecoins: [{ symbol: 'USDC', decimals: 6.5, address: LOCAL_USDC }],
          },
        ],
      }),
    ).toThrow('decimals must be an integer');
  });
});
