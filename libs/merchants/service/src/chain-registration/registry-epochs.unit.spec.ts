import type { JsonRpcProvider } from 'ethers';
import { RegistryEpochs } from './registry-epochs';

const REGISTRY = '0x3333333333333333333333333333333333333333';

describe('RegistryEpochs: the epoch settings show never fails the settings', () => {
  it('is null on a chain without an RPC URL or without a registry address, asking nothing', async () => {
    const none = new RegistryEpochs({}, REGISTRY);
    expect([...(await none.read('mer_1', ['eip155:8453'])).entries()]).toEqual([['eip155:8453', null]]);
    const noRegistry = new RegistryEpochs({ 'eip155:8453': 'http://127.0.0.1:1' }, null);
    expect((await noRegistry.read('mer_1', ['eip155:8453'])).get('eip155:8453')).toBeNull();
    noRegistry.onModuleDestroy();
  });

  it('is null when the chain cannot be read (the node refuses the connection)', async () => {
    // Port 1 on loopback: nothing listens there.
    const epochs = new RegistryEpochs({ 'eip155:8453': 'http://127.0.0.1:1' }, REGISTRY);
    try {
      expect((await epochs.read('mer_1', ['eip155:8453'])).get('eip155:8453')).toBeNull();
    } finally {
      epochs.onModuleDestroy();
    }
  });

  it('sends its read at once: every settings answer waits for it, so no 10 ms batching stall', () => {
    const epochs = new RegistryEpochs({ 'eip155:8453': 'http://127.0.0.1:1' }, REGISTRY);
    try {
      const provider = (epochs as unknown as { provider(chain: string): JsonRpcProvider }).provider(
        'eip155:8453',
      );
      expect(provider._getOption('batchStallTime')).toBe(0);
    } finally {
      epochs.onModuleDestroy();
    }
  });
});
