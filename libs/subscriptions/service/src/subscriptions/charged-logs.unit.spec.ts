import { Interface, JsonRpcProvider, Network } from 'ethers';
import { SubscriptionManagerAbi } from '@stablepay/contracts';
import { RangeLimitedRpc, type RpcLog } from '@stablepay/testing';
import { findChargedLogs } from './charged-logs';

/**
 * The charge call and the merchant cancel's nonce_mismatch path read a subscription's SubscriptionCharged logs
 * from a node as Alchemy serves Base: eth_getLogs over more than 2,000 blocks is refused. The chain is 3 million
 * blocks long; the subscription was created at block 2,990,000.
 */
const MANAGER = new Interface(SubscriptionManagerAbi);
const manager = '0x00000000000000000000000000000000000000aa';
const subscriptionId = `0x${'5'.repeat(64)}`;
const other = `0x${'6'.repeat(64)}`;
const subscribeTx = `0x${'e'.repeat(64)}`;
const address = (n: number) => `0x${n.toString(16).padStart(40, '0')}`;

function charged(id: string, nonce: number, blockNumber: number): RpcLog {
  const { topics, data } = MANAGER.encodeEventLog('SubscriptionCharged', [
    id,
    address(1),
    address(2),
    address(3),
    1_000_000n,
    1_000_000n,
    BigInt(nonce),
    0n,
    1_000_000n,
    `0x${'0'.repeat(64)}`,
    1_700_000_000n + BigInt(nonce),
  ]);
  return {
    address: manager,
    topics,
    data,
    blockNumber,
    transactionHash: `0x${blockNumber.toString(16).padStart(64, '0')}`,
    logIndex: 0,
  };
}

describe('findChargedLogs on a node that refuses wide eth_getLogs ranges', () => {
  const rpc = new RangeLimitedRpc(
    8453,
    3_000_000,
    2_000,
    [
      charged(subscriptionId, 0, 2_990_000),
      charged(other, 0, 2_995_000),
      charged(subscriptionId, 1, 2_999_990),
    ],
    new Map([[subscribeTx, { blockNumber: 2_990_000, logs: [] }]]),
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

  it("finds the subscription's charges from its subscribe block, in windows the node accepts", async () => {
    const found = await findChargedLogs(
      provider,
      manager,
      { subscriptionId, txHash: subscribeTx },
      'eip155:8453',
      2_000,
    );
    expect(found.map((c) => [c.nonce, c.blockNumber])).toEqual([
      [0, '2990000'],
      [1, '2999990'],
    ]);
    expect(rpc.asked.every(({ from, to }) => from >= 2_990_000 && to - from < 2_000)).toBe(true);
  });

  it('halves the configured window when the node refuses it (CHAIN_LOG_RANGE above what the provider allows)', async () => {
    rpc.asked.length = 0;
    const found = await findChargedLogs(
      provider,
      manager,
      { subscriptionId, txHash: subscribeTx },
      'eip155:8453',
      10_000,
    );
    expect(found.map((c) => c.nonce)).toEqual([0, 1]);
    expect(rpc.asked.some(({ from, to }) => to - from + 1 === 10_000)).toBe(true);
  });
});
