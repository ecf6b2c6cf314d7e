import { startAnvil } from './anvil';

describe('startAnvil', () => {
  it('starts a node on loopback that reports the requested chain id, and stops it', async () => {
    const node = await startAnvil({ chainId: 8453 });
    try {
      const res = await fetch(node.rpcUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }),
      });
      const body = (await res.json()) as { result: string };
      expect(BigInt(body.result)).toBe(8453n);
    } finally {
      await node.stop();
    }
    await expect(fetch(node.rpcUrl, { method: 'POST', body: '{}' })).rejects.toThrow();
  });
});
