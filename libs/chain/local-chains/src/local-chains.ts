import { existsSync, mkdirSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { JsonRpcProvider, Network, Wallet, getAddress, id } from 'ethers';
import {
  DETERMINISTIC_DEPLOYER,
  DETERMINISTIC_DEPLOYER_RUNTIME_CODE,
  TEST_STABLECOINS,
  computeStablepayAddresses,
  computeTestStablecoinAddresses,
  deployStablepay,
  type StablepayAddresses,
  type StablepayRoles,
  type TestStablecoinSymbol,
} from '@stablepay/contracts';
import { ANVIL_DEV_PRIVATE_KEYS, destroyWithNode, startAnvil, type AnvilNode } from './anvil';

/** Where everything sits on a local chain: the same on every local chain of a run (and of every run). */
export interface LocalChainAddresses extends StablepayAddresses {
  /** The test stablecoins by symbol (USDC 6, USDT 6, DAI 18 decimals; anyone can mint). */
  readonly stablecoins: Readonly<Record<TestStablecoinSymbol, string>>;
}

export interface LocalStablecoin {
  readonly symbol: TestStablecoinSymbol;
  readonly name: string;
  readonly decimals: number;
  readonly address: string;
}

export interface LocalChain {
  readonly chainId: number;
  readonly caip2: `eip155:${number}`;
  readonly rpcUrl: string;
  readonly addresses: LocalChainAddresses;
  /** The same tokens as a list (the shape the chain registry's test mode takes). */
  readonly stablecoins: readonly LocalStablecoin[];
  /** With a state directory: whether the chain resumed from its saved state (false: it started empty). */
  readonly restoredState: boolean;
}

export interface LocalChainKey {
  readonly address: string;
  /** An anvil dev key: public knowledge, for local chains only. */
  readonly privateKey: string;
}

export interface LocalChains {
  readonly chains: readonly LocalChain[];
  /**
   * The operator: the hot relayer key (registers new merchants, deploys deposits and managers, flags, recovers,
   * submits rescues, signs subscribe authorizations).
   */
  readonly operator: LocalChainKey;
  /**
   * The registry admin: the cold key, never the operator (sets the operator and pauser, proposes delayed changes of
   * a registered merchant, re-attests a disputed payer). Nothing in the service signs with it.
   */
  readonly admin: LocalChainKey;
  readonly operatorPauser: LocalChainKey;
  /**
   * The processes that own the nodes (their watchdogs). If this process dies, each node still writes its state on
   * its way out; a new run on the same state directory waits for these to be gone.
   */
  readonly pids: readonly number[];
  /** Stops every node; resolves when all have exited. Idempotent. */
  stop(): Promise<void>;
}

export interface StartLocalChainsOptions {
  /** One anvil per chain id, each running with that id. Default: Base and Polygon. */
  readonly chainIds?: readonly number[];
  /** Default: anvil dev key 0. */
  readonly operatorPrivateKey?: string;
  /** Default: anvil dev key 8. Must differ from the operator key. */
  readonly adminPrivateKey?: string;
  /** Default: anvil dev key 1. */
  readonly operatorPauserPrivateKey?: string;
  /** Fixed ports, one per chain id (default: free ports). */
  readonly ports?: readonly number[];
  /**
   * Keep each chain's state in this directory (`chain-<id>.json`) across restarts (default: in memory only). A file
   * anvil cannot load is set aside (`.unreadable-<time>`) and the chain starts afresh: `restoredState` says which.
   */
  readonly stateDir?: string;
}

/**
 * An ethers provider for a local node. Pass the chain id as a plain Network: ethers' built-in network for a known id
 * carries plugins (137 resolves to Polygon, whose fee data comes from the Polygon gas station over the internet).
 * For a node this process started (startAnvil, startLocalChains), the provider is destroyed when the node stops:
 * a wait for a transaction the stopped node never mined would otherwise poll, and hold the process, forever.
 */
export function localChainProvider(rpcUrl: string, chainId: number): JsonRpcProvider {
  const network = new Network(`local-${chainId}`, chainId);
  const provider = new JsonRpcProvider(rpcUrl, network, {
    staticNetwork: network,
    cacheTimeout: -1,
    pollingInterval: 50,
  });
  destroyWithNode(rpcUrl, provider);
  return provider;
}

/**
 * The off-ramp address of local runs (PAYOUT_OFF_RAMP_ADDRESS under `npm start`): a fixed address nobody holds a key
 * to, so what payout sweeps forward there stays visible and can never move on (the off-ramp sandbox pays out in fiat
 * on paper only).
 */
export const LOCAL_PAYOUT_OFF_RAMP = getAddress(id('stablepay.local.payout-off-ramp').slice(0, 42));

/** Makes sure the deterministic deployment proxy is at its well-known address (anvil ships it; forks may not). */
export async function installDeterministicDeployer(provider: JsonRpcProvider): Promise<void> {
  if ((await provider.getCode(DETERMINISTIC_DEPLOYER)) === DETERMINISTIC_DEPLOYER_RUNTIME_CODE) return;
  await provider.send('anvil_setCode', [DETERMINISTIC_DEPLOYER, DETERMINISTIC_DEPLOYER_RUNTIME_CODE]);
}

function devKey(index: number): string {
  const key = ANVIL_DEV_PRIVATE_KEYS[index];
  if (!key) throw new Error(`no anvil dev key ${index}`);
  return key;
}

/**
 * Puts Stablepay on a chain that is already running (idempotent): the deterministic deployment proxy where it is
 * missing (anvil_setCode: local nodes only), the registry, both factories and, with `testStablecoins`, the test
 * tokens, each checked to sit at its computed address (the factories: payment, subscription manager, payout deposit). What the embedded run does to the nodes it starts, and what
 * docker-compose's one-shot `contracts` job does to its anvil (tools/local-chains/deploy.ts). `deployer` only pays
 * for gas.
 */
export async function bootstrapStablepay(
  deployer: Wallet,
  roles: StablepayRoles,
  options: { readonly testStablecoins?: boolean } = {},
): Promise<LocalChainAddresses> {
  const provider = deployer.provider;
  if (!(provider instanceof JsonRpcProvider))
    throw new Error('bootstrapStablepay: the deployer needs a JSON-RPC provider');
  await installDeterministicDeployer(provider);
  const expected = computeStablepayAddresses(roles);
  const tokens = computeTestStablecoinAddresses();
  const deployment = await deployStablepay(deployer, roles, {
    testStablecoins: options.testStablecoins ?? false,
  });
  if (JSON.stringify(deployment.addresses) !== JSON.stringify(expected)) {
    throw new Error('deployed addresses differ from the computed ones');
  }
  if (options.testStablecoins) {
    for (const t of TEST_STABLECOINS) {
      if (getAddress(deployment.testStablecoins?.[t.symbol] ?? '0x') !== tokens[t.symbol]) {
        throw new Error(`${t.symbol} is not at its computed address`);
      }
    }
  }
  return { ...expected, stablecoins: tokens };
}

/**
 * Starts one anvil per chain id and deploys, at identical addresses on each: the deterministic deployment proxy, the
 * StablepayRegistry (admin, operator and operator pauser are three distinct keys), the PaymentFactory (with its deposit
 * implementation), the SubscriptionManagerFactory, the PayoutDepositFactory (with its implementation) and the test
 * stablecoins. The nodes die with this process.
 */
export async function startLocalChains(options: StartLocalChainsOptions = {}): Promise<LocalChains> {
  const chainIds = options.chainIds ?? [8453, 137];
  if (chainIds.length === 0) throw new Error('startLocalChains: give at least one chain id');
  if (new Set(chainIds).size !== chainIds.length)
    throw new Error('startLocalChains: chain ids must be distinct');
  if (options.ports && options.ports.length !== chainIds.length) {
    throw new Error('startLocalChains: give one port per chain id');
  }
  const operatorKey = options.operatorPrivateKey ?? devKey(0);
  const adminKey = options.adminPrivateKey ?? devKey(8);
  const pauserKey = options.operatorPauserPrivateKey ?? devKey(1);
  const operator = new Wallet(operatorKey);
  const admin = new Wallet(adminKey);
  const operatorPauser = new Wallet(pauserKey);
  if (admin.address === operator.address) {
    throw new Error('startLocalChains: the admin key must differ from the operator key');
  }
  const roles = { admin: admin.address, operator: operator.address, operatorPauser: operatorPauser.address };
  const expected = computeStablepayAddresses(roles);
  const tokens = computeTestStablecoinAddresses();

  const restored = new Set<number>();
  const started = await Promise.allSettled(
    chainIds.map(async (chainId, i) => {
      const port = options.ports?.[i];
      const base = port === undefined ? { chainId } : { chainId, port };
      if (options.stateDir === undefined) return startAnvil(base);
      mkdirSync(options.stateDir, { recursive: true });
      const stateFile = join(options.stateDir, `chain-${chainId}.json`);
      const saved = existsSync(stateFile);
      try {
        const node = await startAnvil({ ...base, stateFile });
        if (saved) restored.add(chainId);
        return node;
      } catch (error) {
        if (!saved) throw error;
        // A state file cut short (the machine died mid-write) must not keep the chain down: it is local test data.
        renameSync(stateFile, `${stateFile}.unreadable-${Date.now()}`);
        return startAnvil({ ...base, stateFile });
      }
    }),
  );
  const nodes = started.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopping ??= Promise.all(nodes.map((n) => n.stop())).then(() => undefined));
  const failed = started.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) {
    await stop();
    throw failed.reason;
  }

  try {
    const chains = await Promise.all(
      nodes.map(async (node: AnvilNode): Promise<LocalChain> => {
        const provider = localChainProvider(node.rpcUrl, node.chainId);
        try {
          await bootstrapStablepay(operator.connect(provider), roles, { testStablecoins: true });
          return {
            chainId: node.chainId,
            caip2: `eip155:${node.chainId}`,
            rpcUrl: node.rpcUrl,
            addresses: { ...expected, stablecoins: tokens },
            stablecoins: TEST_STABLECOINS.map((t) => ({
              symbol: t.symbol,
              name: t.name,
              decimals: t.decimals,
              address: tokens[t.symbol],
            })),
            restoredState: restored.has(node.chainId),
          };
        } finally {
          provider.destroy();
        }
      }),
    );
    return {
      chains,
      operator: { address: operator.address, privateKey: operatorKey },
      admin: { address: admin.address, privateKey: adminKey },
      operatorPauser: { address: operatorPauser.address, privateKey: pauserKey },
      pids: nodes.flatMap((n) => (n.pid === undefined ? [] : [n.pid])),
      stop,
    };
  } catch (e) {
    await stop();
    throw e;
  }
}
