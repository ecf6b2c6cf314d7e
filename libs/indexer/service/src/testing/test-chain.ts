import { JsonRpcProvider, Network, Transaction, Wallet } from 'ethers';
import {
  connectTestStablecoin,
  deployTestStablecoin,
  type TestStablecoinContract,
} from '@stablepay/contracts';
import { ANVIL_DEV_PRIVATE_KEYS, startAnvil, type AnvilNode } from '@stablepay/local-chains';

/** A private anvil with one test stablecoin, for the indexer's tests and benchmark. */
export interface TestChain {
  readonly chainId: number;
  readonly caip2: string;
  readonly rpcUrl: string;
  readonly provider: JsonRpcProvider;
  readonly wallet: Wallet;
  readonly token: TestStablecoinContract;
  readonly tokenAddress: string;
  rpc<T = unknown>(method: string, params?: unknown[]): Promise<T>;
  head(): Promise<number>;
  /** anvil_mine: `blocks` empty blocks. */
  mine(blocks?: number): Promise<void>;
  snapshot(): Promise<string>;
  revert(id: string): Promise<void>;
  /** Mints to `to` in a transaction of its own (one block, automine); returns it with its raw form. */
  mint(to: string, amount: bigint): Promise<SentTransfer>;
  /** Broadcasts a raw transaction again (after a revert, it lands in another block). */
  resend(raw: string): Promise<SentTransfer>;
  /** Many mints mined into `blocks` blocks (automine off meanwhile): `perBlock` transactions per block. */
  mintMany(recipients: readonly string[], blocks: number, perBlock: number): Promise<SentTransfer[]>;
  stop(): Promise<void>;
}

export interface SentTransfer {
  readonly txHash: string;
  readonly blockNumber: number;
  readonly blockHash: string;
  readonly raw: string;
  readonly to: string;
  readonly amount: bigint;
}

interface RawReceipt {
  readonly blockNumber: string;
  readonly blockHash: string;
  readonly status: string;
}

export async function startTestChain(chainId: number): Promise<TestChain> {
  const node: AnvilNode = await startAnvil({ chainId });
  const network = new Network(`test-${chainId}`, chainId);
  const provider = new JsonRpcProvider(node.rpcUrl, network, {
    staticNetwork: network,
    cacheTimeout: -1,
    pollingInterval: 20,
  });
  const key = ANVIL_DEV_PRIVATE_KEYS[0];
  const wallet = new Wallet(key, provider);
  try {
    const deployed = await deployTestStablecoin(wallet, 'USD Coin (test)', 'USDC', 6);
    const tokenAddress = await deployed.getAddress();
    const token = connectTestStablecoin(tokenAddress, wallet);
    const rpc = async <T>(method: string, params: unknown[] = []): Promise<T> =>
      (await provider.send(method, params)) as T;

    const receiptOf = async (txHash: string): Promise<RawReceipt> => {
      for (let i = 0; i < 200; i++) {
        const receipt = await rpc<RawReceipt | null>('eth_getTransactionReceipt', [txHash]);
        if (receipt) {
          if (receipt.status !== '0x1') throw new Error(`transaction ${txHash} failed`);
          return receipt;
        }
        await new Promise((r) => setTimeout(r, 10));
      }
      throw new Error(`no receipt for ${txHash}`);
    };

    const sign = async (to: string, amount: bigint, nonce: number): Promise<string> =>
      wallet.signTransaction({
        to: tokenAddress,
        data: token.interface.encodeFunctionData('mint', [to, amount]),
        nonce,
        gasLimit: 100_000n,
        chainId,
        type: 2,
        maxFeePerGas: 50_000_000_000n,
        maxPriorityFeePerGas: 1n,
      });

    const broadcast = async (raw: string, to: string, amount: bigint): Promise<SentTransfer> => {
      const txHash = (await rpc<string>('eth_sendRawTransaction', [raw])).toLowerCase();
      const receipt = await receiptOf(txHash);
      return {
        txHash,
        blockNumber: Number(BigInt(receipt.blockNumber)),
        blockHash: receipt.blockHash.toLowerCase(),
        raw,
        to,
        amount,
      };
    };

    const nextNonce = async (): Promise<number> =>
      Number(BigInt(await rpc<string>('eth_getTransactionCount', [wallet.address, 'pending'])));

    const decodeMint = (raw: string): { to: string; amount: bigint } => {
      const parsed = token.interface.parseTransaction({ data: Transaction.from(raw).data });
      if (!parsed) throw new Error('not a mint');
      return { to: String(parsed.args[0]), amount: BigInt(String(parsed.args[1])) };
    };

    return {
      chainId,
      caip2: `eip155:${chainId}`,
      rpcUrl: node.rpcUrl,
      provider,
      wallet,
      token,
      tokenAddress,
      rpc,
      head: async () => Number(BigInt(await rpc<string>('eth_blockNumber'))),
      mine: async (blocks = 1) => {
        await rpc('anvil_mine', [`0x${blocks.toString(16)}`]);
      },
      snapshot: () => rpc<string>('evm_snapshot'),
      revert: async (id) => {
        if (!(await rpc<boolean>('evm_revert', [id]))) throw new Error(`evm_revert ${id} failed`);
      },
      mint: async (to, amount) => broadcast(await sign(to, amount, await nextNonce()), to, amount),
      resend: async (raw) => {
        const { to, amount } = decodeMint(raw);
        return broadcast(raw, to, amount);
      },
      mintMany: async (recipients, blocks, perBlock) => {
        await rpc('evm_setAutomine', [false]);
        const hashes: { hash: string; raw: string; to: string; amount: bigint }[] = [];
        try {
          let nonce = await nextNonce();
          let i = 0;
          for (let b = 0; b < blocks; b++) {
            const raws: { raw: string; to: string; amount: bigint }[] = [];
            for (let t = 0; t < perBlock; t++, i++) {
              const to = recipients[i % recipients.length];
              if (to === undefined) throw new Error('no recipients');
              const amount = BigInt(i + 1);
              raws.push({ raw: await sign(to, amount, nonce++), to, amount });
            }
            const sent = await Promise.all(raws.map((r) => rpc<string>('eth_sendRawTransaction', [r.raw])));
            sent.forEach((hash, k) => {
              const r = raws[k];
              if (r) hashes.push({ hash: hash.toLowerCase(), ...r });
            });
            await rpc('evm_mine');
          }
        } finally {
          await rpc('evm_setAutomine', [true]);
        }
        const receipts = await Promise.all(hashes.map((h) => receiptOf(h.hash)));
        return hashes.map((h, k) => {
          const receipt = receipts[k];
          if (!receipt) throw new Error('missing receipt');
          return {
            txHash: h.hash,
            blockNumber: Number(BigInt(receipt.blockNumber)),
            blockHash: receipt.blockHash.toLowerCase(),
            raw: h.raw,
            to: h.to,
            amount: h.amount,
          };
        });
      },
      stop: async () => {
        provider.destroy();
        await node.stop();
      },
    };
  } catch (error) {
    provider.destroy();
    await node.stop();
    throw error;
  }
}
