import { startAnvil } from './anvil';
import { localChainProvider } from './local-chains';

describe('localChainProvider on a node this process started', () => {
  it('is destroyed when the node stops, so a confirmation wait the node never answered stops polling', async () => {
    const node = await startAnvil({ chainId: 31337 });
    const provider = localChainProvider(node.rpcUrl, 31337);
    // A hash no block holds: ethers waits by listening for blocks, and so polls until it is destroyed.
    void provider.waitForTransaction(`0x${'11'.repeat(32)}`);
    while ((await provider.listenerCount('block')) === 0)
      await new Promise((resolve) => setImmediate(resolve));

    await node.stop();

    expect(provider.destroyed).toBe(true);
    expect(await provider.listenerCount()).toBe(0);
  });
});
