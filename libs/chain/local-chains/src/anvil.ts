import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { freeLoopbackPort } from '@stablepay/node-util';

export interface AnvilNode {
  readonly chainId: number;
  readonly port: number;
  readonly rpcUrl: string;
  /** The watchdog process that owns the node (see startAnvil). */
  readonly pid: number | undefined;
  /** Stops the node and resolves once it has exited. Idempotent. */
  stop(): Promise<void>;
}

/**
 * The providers localChainProvider built for each node this process started, by RPC URL: stop() destroys them.
 * A provider polls (a ref'd 50 ms timer) for as long as anything listens, and a confirmation wait that no block
 * will ever answer (its node stopped) listens forever: one such provider, never destroyed, kept a whole Jest run
 * from exiting after every suite had passed.
 */
const nodeProviders = new Map<string, Set<{ destroy(): void }>>();

/** Has `provider` destroyed when the node at `rpcUrl` stops, if this process started that node. */
export function destroyWithNode(rpcUrl: string, provider: { destroy(): void }): void {
  nodeProviders.get(rpcUrl)?.add(provider);
}

/** anvil's deterministic dev accounts (mnemonic "test test ... junk"), for local chains and tests only. */
export const ANVIL_DEV_PRIVATE_KEYS = [
  '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80',
  '0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d',
  '0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a',
  '0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6',
  '0x47e179ec197488593b187f80a00eb0da91f1b9d0b13f8733639f19c30a34926a',
  '0x8b3a350cf5c34c9194ca85829a2df0ec3153be0318b5e2d3348e872092edffba',
  '0x92db14e403b83dfe3df233f83dfa3a0d7096f21ca9b0d6d6b8d88b2b4ec1564e',
  '0x4bbbf85ce3377467afe5d46f804f221813b2bb87f24d81f60f1fcdbf7cbf4356',
  '0xdbda1821b80551c9d65939329250298aa3472ba22feea921c0cf5d620ea67b97',
  '0x2a871d0798f97d79848a013d4936a73bf4cc922c825d33c1cf7073dff6d409c6',
] as const;

function anvilBinary(): string {
  if (process.env['ANVIL_BIN']) return process.env['ANVIL_BIN'];
  const pkg = `@foundry-rs/anvil-${process.platform === 'darwin' ? 'darwin' : 'linux'}-${process.arch === 'arm64' ? 'arm64' : 'amd64'}`;
  return join(require.resolve(`${pkg}/package.json`), '..', 'bin', 'anvil');
}

async function rpcReady(url: string, deadline: number): Promise<void> {
  for (;;) {
    try {
      const res = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }),
      });
      if (res.ok) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`anvil at ${url} did not answer in time`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * A POSIX sh watchdog between us and anvil: it starts anvil, then blocks reading its stdin, a pipe from this
 * process. When the pipe closes (stop(), our normal exit, or our death by any signal including SIGKILL, since the
 * kernel closes our end) it kills anvil and reaps it. So an anvil never outlives the process that started it.
 */
const WATCHDOG = [
  'exec 3<&0',
  '"$@" 3<&- </dev/null &',
  'pid=$!',
  '{ read -r _ <&3; kill -TERM "$pid" 2>/dev/null; } &',
  'wait "$pid"',
].join('\n');

/**
 * Starts one anvil node on 127.0.0.1 (a free port unless given). The child dies with us: it is killed on stop(),
 * and whenever this process ends, however it ends (see WATCHDOG).
 */
export async function startAnvil(options: {
  chainId: number;
  port?: number;
  blockTime?: number;
  /**
   * Keep the chain in this file: loaded at start when it exists, written every `stateIntervalSeconds` (default 1)
   * and on exit, so a restart (even after kill -9 of the process that started the node) resumes the same chain.
   */
  stateFile?: string;
  stateIntervalSeconds?: number;
}): Promise<AnvilNode> {
  const port = options.port ?? (await freeLoopbackPort());
  const args = [
    '--host',
    '127.0.0.1',
    '--port',
    String(port),
    '--chain-id',
    String(options.chainId),
    '--silent',
  ];
  if (options.blockTime !== undefined) args.push('--block-time', String(options.blockTime));
  if (options.stateFile !== undefined) {
    args.push('--state', options.stateFile, '--state-interval', String(options.stateIntervalSeconds ?? 1));
  }
  // detached: its own process group, so a terminal's Ctrl+C reaches only us; the watchdog alone ends the node,
  // and always reaps it.
  const child: ChildProcess = spawn('/bin/sh', ['-c', WATCHDOG, 'anvil-watchdog', anvilBinary(), ...args], {
    stdio: ['pipe', 'ignore', 'pipe'],
    detached: true,
  });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  // An EPIPE on the watchdog's stdin after it exited is expected; never let it crash us.
  child.stdin?.on('error', () => undefined);
  const release = (): void => {
    child.stdin?.destroy();
  };
  process.once('exit', release);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const rpcUrl = `http://127.0.0.1:${port}`;
  let ready = false;
  const diedEarly = exited.then(() => {
    if (!ready) throw new Error(`anvil exited with code ${child.exitCode}: ${stderr.trim()}`);
  });
  diedEarly.catch(() => undefined); // observed through the race below; never an unhandled rejection
  try {
    await Promise.race([rpcReady(rpcUrl, Date.now() + 20_000), diedEarly]);
    ready = true;
  } catch (e) {
    process.removeListener('exit', release);
    release();
    await exited;
    throw e;
  }
  nodeProviders.set(rpcUrl, new Set());
  return {
    chainId: options.chainId,
    port,
    rpcUrl,
    pid: child.pid,
    stop: async () => {
      const providers = nodeProviders.get(rpcUrl);
      nodeProviders.delete(rpcUrl);
      providers?.forEach((p) => p.destroy());
      process.removeListener('exit', release);
      if (child.exitCode === null && child.signalCode === null) release();
      await exited;
    },
  };
}
