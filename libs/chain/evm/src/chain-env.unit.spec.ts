import { ConfigError } from '@stablepay/util';
import { chainRpcUrlsFromEnv, parseChainMap } from './chain-env';

describe('chainRpcUrlsFromEnv (the one reading of CHAIN_RPC_URLS)', () => {
  it('reads CAIP-2 = URL pairs, canonical keys, spaces trimmed; empty when unset', () => {
    expect([
      ...chainRpcUrlsFromEnv({
        CHAIN_RPC_URLS: 'eip155:8453=http://127.0.0.1:1, eip155:137=https://rpc.example/key',
      }),
    ]).toEqual([
      ['eip155:8453', 'http://127.0.0.1:1'],
      ['eip155:137', 'https://rpc.example/key'],
    ]);
    expect(chainRpcUrlsFromEnv({}).size).toBe(0);
    expect(chainRpcUrlsFromEnv({ CHAIN_RPC_URLS: '' }).size).toBe(0);
  });

  it.each([
    ['http://x', /CHAIN_RPC_URLS: expected <caip2>=<value>/],
    ['base=http://x', /CHAIN_RPC_URLS: "base" is not a CAIP-2 chain id/],
    ['solana:1=http://x', /CHAIN_RPC_URLS: .*only eip155/],
    ['eip155:1=ws://x', /CHAIN_RPC_URLS: eip155:1 must use an http\(s\) URL/],
    ['eip155:1=not a url', /CHAIN_RPC_URLS: eip155:1 has an invalid URL/],
    ['eip155:1=', /CHAIN_RPC_URLS: eip155:1 has no value/],
    ['eip155:1=http://a,eip155:1=http://b', /CHAIN_RPC_URLS lists eip155:1 twice/],
  ])('refuses %p with a ConfigError naming the variable', (raw, message) => {
    expect(() => chainRpcUrlsFromEnv({ CHAIN_RPC_URLS: raw })).toThrow(ConfigError);
    expect(() => chainRpcUrlsFromEnv({ CHAIN_RPC_URLS: raw })).toThrow(message);
  });

  it('never repeats a URL in an error (provider keys live in them)', () => {
    const secret = 'wss://rpc.example/v2/SECRET-KEY';
    expect(() => chainRpcUrlsFromEnv({ CHAIN_RPC_URLS: `eip155:1=${secret}` })).toThrow(
      expect.objectContaining({ message: expect.not.stringContaining('SECRET-KEY') as string }),
    );
  });

  it('parseChainMap hands each value to its parser with the canonical chain', () => {
    const seen: string[] = [];
    parseChainMap({ X: 'eip155:10=a' }, 'X', (value, chain) => seen.push(`${chain}:${value}`));
    expect(seen).toEqual(['eip155:10:a']);
  });
});
