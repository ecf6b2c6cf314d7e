import { type JsonRpcProvider, Signature, type TypedDataField, Wallet, getAddress, toBeHex } from 'ethers';
import type { Page } from 'playwright-core';
import { localChainProvider } from '@stablepay/local-chains';

/**
 * An EIP-1193 wallet injected into a page (`window.ethereum`), backed by an anvil key held in Node: the page asks
 * through `window.ethereum.request`, the call crosses to Node (`page.exposeFunction`), Node signs with the key and
 * sends to the local anvil of the wallet's current chain. The page's own code sees what it would see with any
 * injected wallet, and its strict CSP is untouched (init scripts and exposed bindings are added by the browser
 * protocol, not by the page).
 */
export interface TestWalletChain {
  readonly chainId: number;
  readonly rpcUrl: string;
}

export interface TestWalletOptions {
  readonly privateKey: string;
  readonly chains: readonly TestWalletChain[];
  /** The chain the wallet is on when the page loads (default: the first). */
  readonly chainId?: number;
}

export interface WalletRequest {
  readonly method: string;
  readonly params: unknown;
}

export interface TestWallet {
  readonly address: string;
  /** Every request the page made, in order (what the page asked the wallet to do). */
  readonly requests: WalletRequest[];
  /** Transaction hashes the wallet broadcast, in order. */
  readonly sentTransactions: string[];
  /** The chain the wallet is on now. */
  chainId(): number;
  /** The next request of this method is refused as a user would refuse it (EIP-1193 code 4001). */
  rejectNext(method: string): void;
}

interface RpcError {
  readonly code: number;
  readonly message: string;
}
type Reply = { readonly result: unknown } | { readonly error: RpcError };

/** Read-only methods the wallet forwards to the current chain's node, as a wallet's own RPC would. */
const PASS_THROUGH = new Set([
  'eth_blockNumber',
  'eth_call',
  'eth_estimateGas',
  'eth_gasPrice',
  'eth_getBalance',
  'eth_getBlockByNumber',
  'eth_getCode',
  'eth_getLogs',
  'eth_getTransactionByHash',
  'eth_getTransactionCount',
  'eth_getTransactionReceipt',
  'eth_maxPriorityFeePerGas',
  'eth_feeHistory',
  'net_version',
]);

const BINDING = '__stablepayTestWallet';

/** The page side: a minimal EIP-1193 provider with events, forwarding every request to the Node binding. */
const PROVIDER_SCRIPT = `(() => {
  const binding = window.${BINDING};
  const listeners = {};
  const emit = (event, value) => (listeners[event] || []).slice().forEach((fn) => { try { fn(value); } catch (e) { console.error(e); } });
  const provider = {
    isStablepayTestWallet: true,
    async request(args) {
      if (!args || typeof args.method !== 'string') throw Object.assign(new Error('invalid request'), { code: -32600 });
      const reply = await binding(args.method, args.params === undefined ? [] : args.params);
      if (reply.error) throw Object.assign(new Error(reply.error.message), { code: reply.error.code });
      if (reply.events) reply.events.forEach((e) => emit(e.event, e.value));
      return reply.result;
    },
    on(event, fn) { (listeners[event] = listeners[event] || []).push(fn); return provider; },
    removeListener(event, fn) { listeners[event] = (listeners[event] || []).filter((f) => f !== fn); return provider; },
  };
  Object.defineProperty(window, 'ethereum', { value: provider, configurable: false, writable: false });
  window.dispatchEvent(new Event('ethereum#initialized'));
})();`;

function rpcError(code: number, message: string): { error: RpcError } {
  return { error: { code, message } };
}

function first<T>(params: unknown): T {
  return (Array.isArray(params) ? params[0] : undefined) as T;
}

/** Installs the wallet on `page` (before its first navigation, or it applies from the next one). */
export async function installTestWallet(page: Page, options: TestWalletOptions): Promise<TestWallet> {
  const signer = new Wallet(options.privateKey);
  const providers = new Map<number, JsonRpcProvider>(
    options.chains.map((c) => [c.chainId, localChainProvider(c.rpcUrl, c.chainId)]),
  );
  let current = options.chainId ?? options.chains[0]?.chainId;
  if (current === undefined || !providers.has(current)) throw new Error('installTestWallet: unknown chain');
  let connected = false;
  const requests: WalletRequest[] = [];
  const sentTransactions: string[] = [];
  const rejections = new Set<string>();
  const provider = () => providers.get(current as number) as JsonRpcProvider;

  const handle = async (
    method: string,
    params: unknown,
  ): Promise<Reply & { events?: { event: string; value: unknown }[] }> => {
    requests.push({ method, params });
    if (rejections.delete(method)) return rpcError(4001, 'User rejected the request.');
    switch (method) {
      case 'eth_requestAccounts':
        connected = true;
        return {
          result: [signer.address],
          events: [{ event: 'connect', value: { chainId: toBeHex(current as number) } }],
        };
      case 'eth_accounts':
        return { result: connected ? [signer.address] : [] };
      case 'eth_chainId':
        return { result: toBeHex(current as number) };
      case 'wallet_switchEthereumChain': {
        const target = Number(first<{ chainId?: string }>(params)?.chainId);
        if (!providers.has(target)) return rpcError(4902, `Unrecognized chain ID ${String(target)}.`);
        const changed = target !== current;
        current = target;
        return { result: null, events: changed ? [{ event: 'chainChanged', value: toBeHex(target) }] : [] };
      }
      case 'eth_sendTransaction': {
        if (!connected) return rpcError(4100, 'The requested account has not been authorized.');
        const tx = first<{ from?: string; to?: string; data?: string; value?: string; gas?: string }>(params);
        if (tx?.from && getAddress(tx.from) !== signer.address)
          return rpcError(4100, `The wallet holds ${signer.address}, not ${tx.from}.`);
        try {
          const sent = await signer.connect(provider()).sendTransaction({
            ...(tx?.to ? { to: tx.to } : {}),
            ...(tx?.data ? { data: tx.data } : {}),
            ...(tx?.value ? { value: BigInt(tx.value) } : {}),
            ...(tx?.gas ? { gasLimit: BigInt(tx.gas) } : {}),
          });
          sentTransactions.push(sent.hash);
          return { result: sent.hash };
        } catch (error) {
          return rpcError(-32603, error instanceof Error ? error.message : String(error));
        }
      }
      case 'personal_sign': {
        if (!connected) return rpcError(4100, 'The requested account has not been authorized.');
        const [message] = params as [string, string];
        const bytes = message.startsWith('0x') ? Buffer.from(message.slice(2), 'hex') : message;
        return { result: await signer.signMessage(bytes) };
      }
      case 'eth_signTypedData_v4': {
        if (!connected) return rpcError(4100, 'The requested account has not been authorized.');
        const [, json] = params as [string, string];
        const typed = JSON.parse(json) as {
          domain: Record<string, unknown>;
          types: Record<string, TypedDataField[]>;
          message: Record<string, unknown>;
        };
        // ethers derives the domain type itself and refuses it among the types.
        const types = { ...typed.types };
        delete types['EIP712Domain'];
        return {
          result: Signature.from(await signer.signTypedData(typed.domain, types, typed.message)).serialized,
        };
      }
      default:
        if (PASS_THROUGH.has(method)) {
          try {
            return { result: await provider().send(method, Array.isArray(params) ? params : []) };
          } catch (error) {
            return rpcError(-32603, error instanceof Error ? error.message : String(error));
          }
        }
        return rpcError(4200, `The test wallet does not support ${method}.`);
    }
  };

  await page.exposeFunction(BINDING, handle);
  await page.addInitScript(PROVIDER_SCRIPT);
  page.once('close', () => providers.forEach((p) => p.destroy()));
  return {
    address: signer.address,
    requests,
    sentTransactions,
    chainId: () => current as number,
    rejectNext: (method) => void rejections.add(method),
  };
}
