import { JsonRpcProvider, Network } from 'ethers';
import type { ChainRelayer } from '@stablepay/relayer';
import { RangeLimitedRpc, type RpcLog } from '@stablepay/testing';
import { DepositChain } from './deposit-chain';

/**
 * A payment action replayed after its answer was lost reconciles from every transaction that touched the deposit
 * since its deployment, on a node as Alchemy serves a real chain: eth_getLogs over more than 2,000 blocks is
 * refused. The deposit was deployed at block 7,000,000; the head is 7,050,000.
 */
const deposit = '0x00000000000000000000000000000000000000dd';
const deployTx = `0x${'d'.repeat(64)}`;
const tx = (n: number) => `0x${n.toString(16).padStart(64, '0')}`;
const log = (blockNumber: number): RpcLog => ({
  address: deposit,
  topics: [`0x${'1'.repeat(64)}`],
  data: '0x',
  blockNumber,
  transactionHash: tx(blockNumber),
  logIndex: 0,
});

describe('DepositChain.transactionsFrom on a node that refuses wide eth_getLogs ranges', () => {
  const rpc = new RangeLimitedRpc(
    8453,
    7_050_000,
    2_000,
    [log(7_000_000), log(7_031_234), log(7_049_999)],
    new Map([[deployTx, { blockNumber: 7_000_000, logs: [] }]]),
  );
  let provider: JsonRpcProvider;

  beforeAll(async () => {
    const network = new Network('base', 8453n);
    provider = new JsonRpcProvider(await rpc.start(), network, { staticNetwork: network });
  });
  afterAll(async () => {
    provider.destroy();
    await rpc.stop();
  });

  it("finds every transaction of the deposit from its deployment's block, in windows the node accepts", async () => {
    const chain = new DepositChain({ provider } as unknown as ChainRelayer, deposit, 2_000);
    expect(await chain.transactionsFrom(deposit, deployTx)).toEqual([
      tx(7_000_000),
      tx(7_031_234),
      tx(7_049_999),
    ]);
    expect(rpc.asked.every(({ from, to }) => from >= 7_000_000 && to - from < 2_000)).toBe(true);
  });
});
