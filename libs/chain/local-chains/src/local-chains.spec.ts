import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectStablepayRegistry, connectTestStablecoin } from '@stablepay/contracts';
import { localChainProvider, startLocalChains, type LocalChain } from './local-chains';

const ROOT = join(__dirname, '..', '..', '..', '..');

async function chainIdAt(rpcUrl: string): Promise<bigint> {
  const res = await fetch(rpcUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }),
  });
  const body = (await res.json()) as { result: string };
  return BigInt(body.result);
}

async function isDown(rpcUrl: string, withinMs: number): Promise<boolean> {
  const deadline = Date.now() + withinMs;
  for (;;) {
    try {
      await chainIdAt(rpcUrl);
    } catch {
      return true;
    }
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('startLocalChains', () => {
  it('starts one anvil per chain id with the deployer, both factories and the test stablecoins at identical addresses', async () => {
    const local = await startLocalChains();
    try {
      expect(local.chains.map((c) => [c.chainId, c.caip2])).toEqual([
        [8453, 'eip155:8453'],
        [137, 'eip155:137'],
      ]);
      const [first, second] = local.chains;
      expect(second?.addresses).toEqual(first?.addresses);
      for (const chain of local.chains) {
        expect(await chainIdAt(chain.rpcUrl)).toBe(BigInt(chain.chainId));
        const provider = localChainProvider(chain.rpcUrl, chain.chainId);
        try {
          const { stablecoins, ...contracts } = chain.addresses;
          for (const address of Object.values(contracts))
            expect(await provider.getCode(address)).not.toBe('0x');
          const decimals: Record<string, bigint> = {};
          for (const [symbol, address] of Object.entries(stablecoins)) {
            decimals[symbol] = await connectTestStablecoin(address, provider).decimals();
          }
          expect(decimals).toEqual({ USDC: 6n, USDT: 6n, DAI: 18n });
          expect(chain.stablecoins.map((t) => t.address)).toEqual(Object.values(stablecoins));
          // The registry admin (cold) and the operator (hot relayer key) are separate keys.
          const registry = connectStablepayRegistry(contracts.registry, provider);
          expect(await registry.admin()).toBe(local.admin.address);
          expect(await registry.operator()).toBe(local.operator.address);
          expect(local.admin.address).not.toBe(local.operator.address);
        } finally {
          provider.destroy();
        }
      }
    } finally {
      await local.stop();
    }
    for (const chain of local.chains) expect(await isDown(chain.rpcUrl, 2_000)).toBe(true);
  });

  it('takes other chain ids, and rejects duplicates', async () => {
    await expect(startLocalChains({ chainIds: [1, 1] })).rejects.toThrow('distinct');
    const local = await startLocalChains({ chainIds: [42161] });
    try {
      expect(local.chains.map((c) => c.caip2)).toEqual(['eip155:42161']);
    } finally {
      await local.stop();
    }
  });
});

describe('tools/local-chains/cli.ts', () => {
  it('prints the chains and addresses as JSON, and its nodes die with it even when it is SIGKILLed', async () => {
    const child = spawn(
      process.execPath,
      ['-r', '@swc-node/register', join(ROOT, 'tools/local-chains/cli.ts'), '--chain-ids', '8453,10'],
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    let err = '';
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const printed = await new Promise<{ chains: LocalChain[] }>((resolve, reject) => {
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        try {
          resolve(JSON.parse(out) as { chains: LocalChain[] });
        } catch {
          // not complete yet
        }
      });
      child.once('exit', (code) => reject(new Error(`cli exited (${code}): ${err}`)));
    });
    try {
      expect(printed.chains.map((c) => c.caip2)).toEqual(['eip155:8453', 'eip155:10']);
      expect(printed.chains[0]?.addresses).toEqual(printed.chains[1]?.addresses);
      for (const c of printed.chains) expect(await chainIdAt(c.rpcUrl)).toBe(BigInt(c.chainId));
    } finally {
      child.kill('SIGKILL');
    }
    for (const c of printed.chains) expect(await isDown(c.rpcUrl, 5_000)).toBe(true);
  });

  it('keeps each chain in its state directory: a restart resumes the same blocks; an unreadable file is set aside', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'stablepay-chain-state-'));
    const rpc = async (url: string, method: string, params: unknown[] = []) => {
      const res = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
      });
      return ((await res.json()) as { result: unknown }).result;
    };
    try {
      const first = await startLocalChains({ chainIds: [31337], stateDir });
      const url = first.chains[0]?.rpcUrl ?? '';
      expect(first.chains[0]?.restoredState).toBe(false);
      await rpc(url, 'anvil_mine', ['0x7']);
      const head = (await rpc(url, 'eth_getBlockByNumber', ['latest', false])) as {
        number: string;
        hash: string;
      };
      await first.stop();

      const second = await startLocalChains({ chainIds: [31337], stateDir });
      try {
        expect(second.chains[0]?.restoredState).toBe(true);
        const again = (await rpc(second.chains[0]?.rpcUrl ?? '', 'eth_getBlockByNumber', [
          head.number,
          false,
        ])) as {
          hash: string;
        };
        expect(again.hash).toBe(head.hash);
      } finally {
        await second.stop();
      }

      writeFileSync(join(stateDir, 'chain-31337.json'), '{"cut short');
      const third = await startLocalChains({ chainIds: [31337], stateDir });
      try {
        expect(third.chains[0]?.restoredState).toBe(false);
        expect(readdirSync(stateDir).some((f) => f.startsWith('chain-31337.json.unreadable-'))).toBe(true);
      } finally {
        await third.stop();
      }
    } finally {
      rmSync(stateDir, { recursive: true, force: true });
    }
  }, 120_000);
});
