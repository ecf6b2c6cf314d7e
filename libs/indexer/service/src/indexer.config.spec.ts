import { AbiCoder, id, Interface, zeroPadValue } from 'ethers';
import { SubscriptionManagerAbi } from '@stablepay/contracts';
import { ConfigError } from '@stablepay/util';
import type { ChainLog } from './chain-rpc';
import { DEFAULT_CONFIRMATIONS, indexerConfigFromEnv } from './indexer.config';
import { ERC20_TRANSFER_TOPIC, addressTopic, decodeContractEvent, decodeErc20Transfer } from './log-decoder';

describe('indexerConfigFromEnv', () => {
  it('follows no chain when CHAIN_RPC_URLS is absent (embedded mode idles)', () => {
    expect(indexerConfigFromEnv({})).toEqual({
      chains: [],
      pollMs: 2000,
      batchBlocks: 500,
      reorgWindow: 256,
      stalledAfterMs: 30_000,
    });
  });

  it('reads chains, per-chain confirmations with a default, start blocks and the tuning knobs', () => {
    const config = indexerConfigFromEnv({
      CHAIN_RPC_URLS: 'eip155:8453=http://127.0.0.1:8545, eip155:137=https://polygon.example/rpc',
      INDEXER_CONFIRMATIONS: '3,eip155:137=64',
      INDEXER_START_BLOCKS: 'eip155:8453=1200,eip155:137=latest',
      INDEXER_POLL_MS: '250',
      INDEXER_BATCH_BLOCKS: '100',
      INDEXER_REORG_WINDOW: '512',
      INDEXER_STALLED_AFTER_MS: '5000',
    });
    expect(config).toEqual({
      chains: [
        {
          caip2: 'eip155:8453',
          chainId: 8453n,
          rpcUrl: 'http://127.0.0.1:8545',
          confirmations: 3,
          startBlock: 1200,
        },
        {
          caip2: 'eip155:137',
          chainId: 137n,
          rpcUrl: 'https://polygon.example/rpc',
          confirmations: 64,
          startBlock: 'latest',
        },
      ],
      pollMs: 250,
      batchBlocks: 100,
      reorgWindow: 512,
      stalledAfterMs: 5000,
    });
    expect(indexerConfigFromEnv({ CHAIN_RPC_URLS: 'eip155:1=http://n' }).chains[0]?.confirmations).toBe(
      DEFAULT_CONFIRMATIONS,
    );
    // Slow polls stretch the default stall threshold to three of them.
    expect(indexerConfigFromEnv({ INDEXER_POLL_MS: '20000' }).stalledAfterMs).toBe(60_000);
  });

  it('takes a stable lease owner from INDEXER_LEASE_OWNER and refuses a blank or spaced one', () => {
    expect(indexerConfigFromEnv({ INDEXER_LEASE_OWNER: 'embedded-0a1b' }).leaseOwner).toBe('embedded-0a1b');
    expect(indexerConfigFromEnv({ INDEXER_LEASE_OWNER: '' }).leaseOwner).toBeUndefined();
    expect(() => indexerConfigFromEnv({ INDEXER_LEASE_OWNER: '  ' })).toThrow(/INDEXER_LEASE_OWNER/);
    expect(() => indexerConfigFromEnv({ INDEXER_LEASE_OWNER: 'two words' })).toThrow(/INDEXER_LEASE_OWNER/);
  });

  it.each([
    [{ CHAIN_RPC_URLS: 'http://x' }, /CHAIN_RPC_URLS: expected <caip2>=<value>/],
    [{ CHAIN_RPC_URLS: 'base=http://x' }, /CHAIN_RPC_URLS: "base" is not a CAIP-2 chain id/],
    [{ CHAIN_RPC_URLS: 'cosmos:hub=http://x' }, /CHAIN_RPC_URLS: .*only eip155/],
    [{ CHAIN_RPC_URLS: 'eip155:1=ws://x' }, /CHAIN_RPC_URLS: eip155:1 must use an http\(s\) URL/],
    [{ CHAIN_RPC_URLS: 'eip155:1=http://a,eip155:1=http://b' }, /CHAIN_RPC_URLS lists eip155:1 twice/],
    [
      { CHAIN_RPC_URLS: 'eip155:1=http://a', INDEXER_CONFIRMATIONS: 'many' },
      /INDEXER_CONFIRMATIONS: the default depth must be an integer/,
    ],
    [
      { CHAIN_RPC_URLS: 'eip155:1=http://a', INDEXER_CONFIRMATIONS: 'eip155:10=1' },
      /INDEXER_CONFIRMATIONS names eip155:10, which CHAIN_RPC_URLS does not list/,
    ],
    [
      { CHAIN_RPC_URLS: 'eip155:1=http://a', INDEXER_START_BLOCKS: 'eip155:1=-5' },
      /INDEXER_START_BLOCKS: eip155:1 must be a block number or 'latest'/,
    ],
    [{ INDEXER_POLL_MS: '0' }, /INDEXER_POLL_MS must be between 10 and/],
    [{ INDEXER_BATCH_BLOCKS: 'lots' }, /INDEXER_BATCH_BLOCKS must be an integer/],
    [
      { INDEXER_POLL_MS: '2000', INDEXER_STALLED_AFTER_MS: '2000' },
      /INDEXER_STALLED_AFTER_MS \(2000\) must exceed INDEXER_POLL_MS \(2000\)/,
    ],
  ])('rejects %j naming the variable', (env, message) => {
    expect(() => indexerConfigFromEnv(env)).toThrow(ConfigError);
    expect(() => indexerConfigFromEnv(env)).toThrow(message);
  });
});

describe('log decoding', () => {
  const coder = AbiCoder.defaultAbiCoder();
  const token = '0x833589fcd6edb6e08f4c7c32d4f71b54bda02913';
  const from = '0x1111111111111111111111111111111111111111';
  const to = '0x2222222222222222222222222222222222222222';
  const base: Omit<ChainLog, 'topics' | 'data'> = {
    address: token,
    blockNumber: 10,
    blockHash: `0x${'ab'.repeat(32)}`,
    txHash: `0x${'cd'.repeat(32)}`,
    logIndex: 4,
  };

  it('decodes an ERC-20 Transfer with the amount as a decimal string beyond 2^53', () => {
    const log: ChainLog = {
      ...base,
      topics: [ERC20_TRANSFER_TOPIC, addressTopic(from), addressTopic(to)],
      data: coder.encode(['uint256'], [2n ** 70n]),
    };
    expect(decodeErc20Transfer('eip155:8453', 8453n, log)).toEqual({
      type: 'Erc20TransferObserved.v1',
      data: {
        chain: 'eip155:8453',
        blockNumber: '10',
        blockHash: base.blockHash,
        txHash: base.txHash,
        logIndex: 4,
        contract: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
        asset: 'eip155:8453/erc20:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
        from: '0x1111111111111111111111111111111111111111',
        to: '0x2222222222222222222222222222222222222222',
        amount: (2n ** 70n).toString(),
      },
    });
  });

  it('ignores an ERC-721 Transfer (same signature, the token id indexed)', () => {
    const log: ChainLog = {
      ...base,
      topics: [ERC20_TRANSFER_TOPIC, addressTopic(from), addressTopic(to), zeroPadValue('0x07', 32)],
      data: '0x',
    };
    expect(decodeErc20Transfer('eip155:8453', 8453n, log)).toBeNull();
  });

  it('decodes a subscription manager event with every argument as a string', () => {
    const manager = new Interface(SubscriptionManagerAbi);
    const subscriptionId = id('sub_1');
    const encoded = manager.encodeEventLog('CapUpdated', [subscriptionId, to, 5n, 2n ** 64n, 1_700_000_000n]);
    const decoded = decodeContractEvent('subscription_manager', 'eip155:8453', { ...base, ...encoded });
    expect(decoded).toMatchObject({
      type: 'SubscriptionManagerEventObserved.v1',
      data: {
        event: 'CapUpdated',
        args: {
          subscriptionId,
          subscriber: '0x2222222222222222222222222222222222222222',
          oldCap: '5',
          newCap: (2n ** 64n).toString(),
          timestamp: '1700000000',
        },
      },
    });
    expect(
      decodeContractEvent('subscription_manager', 'eip155:8453', {
        ...base,
        topics: [id('Unknown()')],
        data: '0x',
      }),
    ).toBeNull();
  });
});
