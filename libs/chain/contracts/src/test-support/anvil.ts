import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { HDNodeWallet, JsonRpcProvider, Mnemonic, Network, type Wallet } from 'ethers';

/**
 * A private anvil for one test file. (libs/chain/local-chains has the full launcher; this lib cannot depend on it,
 * since local-chains depends on these artifacts, so the contract tests carry this small copy.)
 */
export interface TestChain {
  readonly chainId: number;
  readonly rpcUrl: string;
  readonly provider: JsonRpcProvider;
  /** anvil's funded dev accounts (mnemonic "test ... junk"), connected to the provider. */
  readonly accounts: readonly HDNodeWallet[];
  account(index: number): HDNodeWallet;
  snapshot(): Promise<string>;
  revert(id: string): Promise<void>;
  /** Latest block timestamp. */
  now(): Promise<bigint>;
  /** evm_increaseTime + evm_mine. */
  increaseTime(seconds: bigint | number): Promise<void>;
  /** The next mined block (the next transaction) gets exactly this timestamp. */
  setNextTimestamp(timestamp: bigint): Promise<void>;
  /** Mines one block at exactly this timestamp. */
  mineAt(timestamp: bigint): Promise<void>;
  stop(): Promise<void>;
}

const ANVIL_MNEMONIC = 'test test test test test test test test test test test junk';

function anvilBinary(): string {
  const fromEnv = process.env['ANVIL_BIN'];
  if (fromEnv) return fromEnv;
  const platform = process.platform === 'darwin' ? 'darwin' : 'linux';
  const arch = process.arch === 'arm64' ? 'arm64' : 'amd64';
  return join(require.resolve(`@foundry-rs/anvil-${platform}-${arch}/package.json`), '..', 'bin', 'anvil');
}

const WATCHDOG = [
  'exec 3<&0',
  '"$@" 3<&- </dev/null &',
  'pid=$!',
  '{ read -r _ <&3; kill -TERM "$pid" 2>/dev/null; } &',
  'wait "$pid"',
].join('\n');

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.unref();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      if (a === null || typeof a === 'string') return reject(new Error('no port'));
      s.close(() => resolve(a.port));
    });
  });
}

export async function startTestChain(chainId = 31337, accountCount = 10): Promise<TestChain> {
  const port = await freePort();
  const args = [
    '--host',
    '127.0.0.1',
    '--port',
    String(port),
    '--chain-id',
    String(chainId),
    '--silent',
    '--accounts',
    String(accountCount),
  ];
  // Same watchdog as @stablepay/local-chains: anvil dies when our end of the watchdog's stdin closes, even if this
  // test worker is killed.
  const child = spawn('/bin/sh', ['-c', WATCHDOG, 'anvil-watchdog', anvilBinary(), ...args], {
    stdio: ['pipe', 'ignore', 'pipe'],
    detached: true,
  });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  child.stdin?.on('error', () => undefined);
  const release = (): void => {
    child.stdin?.destroy();
  };
  process.once('exit', release);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const rpcUrl = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`anvil exited (${child.exitCode}): ${stderr}`);
    try {
      const res = await fetch(rpcUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }),
      });
      if (res.ok) break;
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) {
      release();
      throw new Error('anvil did not start in time');
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  // A plain Network object: ethers' built-in network for a known chain id (137 = matic) carries plugins such as
  // the Polygon gas station, which a local chain must not call.
  const network = new Network(`anvil-${chainId}`, chainId);
  const provider = new JsonRpcProvider(rpcUrl, network, {
    staticNetwork: network,
    cacheTimeout: -1,
    pollingInterval: 50,
  });
  const mnemonic = Mnemonic.fromPhrase(ANVIL_MNEMONIC);
  const accounts = Array.from({ length: accountCount }, (_, i) =>
    HDNodeWallet.fromMnemonic(mnemonic, `m/44'/60'/0'/0/${i}`).connect(provider),
  );
  const send = (method: string, params: unknown[]): Promise<unknown> => provider.send(method, params);
  return {
    chainId,
    rpcUrl,
    provider,
    accounts,
    account(index: number): HDNodeWallet {
      const a = accounts[index];
      if (!a) throw new Error(`no dev account ${index}`);
      return a;
    },
    snapshot: async () => String(await send('evm_snapshot', [])),
    revert: async (id: string) => {
      const ok = await send('evm_revert', [id]);
      if (ok !== true) throw new Error(`evm_revert ${id} failed`);
    },
    now: async () => {
      const block = await provider.getBlock('latest');
      if (!block) throw new Error('no latest block');
      return BigInt(block.timestamp);
    },
    increaseTime: async (seconds: bigint | number) => {
      await send('evm_increaseTime', [Number(seconds)]);
      await send('evm_mine', []);
    },
    setNextTimestamp: async (timestamp: bigint) => {
      await send('evm_setNextBlockTimestamp', [Number(timestamp)]);
    },
    mineAt: async (timestamp: bigint) => {
      await send('evm_mine', [Number(timestamp)]);
    },
    stop: async () => {
      provider.destroy();
      process.removeListener('exit', release);
      release();
      await exited;
    },
  };
}

export type { Wallet };
