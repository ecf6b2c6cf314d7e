import { Interface, JsonRpcProvider, Network } from 'ethers';
import { PayoutDepositAbi, payoutDepositAddress, toOnChainId } from '@stablepay/contracts';
import { initialPayoutState, type PayoutState } from '@stablepay/payouts-domain';
import type { RelayerSet } from '@stablepay/relayer';
import { RangeLimitedRpc, type RpcLog } from '@stablepay/testing';
import { register } from 'prom-client';
import { PayoutSweeper } from './payout-sweep';

/**
 * A retried sweep (its first answer lost) finds its own PayoutSwept on a node as Alchemy serves a real chain:
 * eth_getLogs over more than 2,000 blocks is refused. The chain is 5 million blocks long; the customer's two payouts
 * of the same amount were deposited at block 4,990,000 and swept at 4,991,000 (the other payout) and 4,996,500
 * (this one).
 */
const DEPOSIT = new Interface(PayoutDepositAbi);
const BASE = 'eip155:8453';
const factory = '0x00000000000000000000000000000000000000fa';
const offRamp = '0x00000000000000000000000000000000000000fb';
const token = '0x0000000000000000000000000000000000000033';
const merchantId = 'mer_sweep_logscan';
const customerId = 'cus_sweep_logscan';
const address = payoutDepositAddress({ factory, offRamp, merchantId, customerId });
const depositTx = `0x${'d'.repeat(64)}`;
const otherSweepTx = `0x${'a'.repeat(64)}`;
const ownSweepTx = `0x${'b'.repeat(64)}`;

const swept = (payoutId: string, blockNumber: number, transactionHash: string): RpcLog => ({
  address,
  ...DEPOSIT.encodeEventLog('PayoutSwept', [
    toOnChainId(customerId),
    token,
    toOnChainId(payoutId),
    offRamp,
    5_000_000n,
    5_000_000n,
  ]),
  blockNumber,
  transactionHash,
  logIndex: 0,
});

const payout: PayoutState = {
  ...initialPayoutState(),
  exists: true,
  id: 'po_own',
  customerId,
  depositAddress: address,
  token: { chain: BASE, symbol: 'USDC', asset: `${BASE}/erc20:${token}`, decimals: 6 },
  status: 'deposit_detected',
  deposit: { txHash: depositTx, from: offRamp, amount: '5000000', detectedAt: new Date(0).toISOString() },
};

describe('PayoutSweeper retry on a node that refuses wide log ranges', () => {
  const rpc = new RangeLimitedRpc(
    8453,
    5_000_000,
    2_000,
    [swept('po_other', 4_991_000, otherSweepTx), swept('po_own', 4_996_500, ownSweepTx)],
    new Map([[depositTx, { blockNumber: 4_990_000, logs: [] }]]),
  );
  let provider: JsonRpcProvider;
  let sweeper: PayoutSweeper;
  const submitted: unknown[] = [];

  beforeAll(async () => {
    const network = new Network('base', 8453n);
    provider = new JsonRpcProvider(await rpc.start(), network, { staticNetwork: network });
    // The deposit refuses the sweep at simulation: this payout was swept already.
    const relayers = {
      for: () => ({
        provider,
        submit: (request: unknown) => {
          submitted.push(request);
          return Promise.resolve({
            kind: 'simulation_rejected',
            errorName: 'AlreadySwept',
            args: [toOnChainId('po_own')],
            selector: null,
            data: '0x',
          });
        },
      }),
    } as unknown as RelayerSet;
    sweeper = new PayoutSweeper(relayers, { factory, offRamp }, () => 2_000);
  });
  afterAll(async () => {
    provider.destroy();
    await rpc.stop();
  });

  it("answers this payout's sweep, not the other same-amount sweep after the deposit, reading in accepted windows", async () => {
    expect(await sweeper.sweep(payout, merchantId)).toBe(ownSweepTx);
    expect(submitted).toHaveLength(1);
    expect(rpc.asked.length).toBeGreaterThan(1);
    expect(rpc.asked.every(({ from, to }) => from >= 4_990_000 && to - from < 2_000)).toBe(true);
  });
});

describe('PayoutSweeper metrics', () => {
  it("starts every chain's sweep series at 0, so the alert's increase() counts the first failure", async () => {
    const chain = 'eip155:424242';
    new PayoutSweeper({} as RelayerSet, { factory, offRamp }, () => 2_000, [chain]);
    const metric = await register.getSingleMetric('stablepay_payout_sweeps_total')?.get();
    const series = metric?.values.filter((v) => v.labels.chain === chain);
    expect(series?.map((v) => [v.labels.outcome, v.value]).sort()).toEqual([
      ['failed', 0],
      ['found', 0],
      ['swept', 0],
    ]);
  });
});

describe('PayoutSweeper.cancelInFlight', () => {
  const pendingSweep = `0x${'c'.repeat(64)}`;
  const noop = `0x${'e'.repeat(64)}`;
  const sweeperOnChain = (depositOnChain: boolean) => {
    const cancelled: string[] = [];
    const relayers = {
      for: () => ({
        provider: {
          getTransactionReceipt: (hash: string) =>
            Promise.resolve(hash === depositTx && depositOnChain ? { status: 1 } : null),
        },
        cancel: (hash: string) => {
          cancelled.push(hash);
          return Promise.resolve({ kind: 'replaced', nonce: 7, txHash: noop });
        },
      }),
    } as unknown as RelayerSet;
    return { sweeper: new PayoutSweeper(relayers, { factory, offRamp }), cancelled };
  };

  it('replaces the pending sweep by a no-op when its deposit transaction is not on chain', async () => {
    const { sweeper, cancelled } = sweeperOnChain(false);
    expect(await sweeper.cancelInFlight(payout, pendingSweep, depositTx)).toBe(noop);
    expect(cancelled).toEqual([pendingSweep]);
  });

  it('leaves it pending when its deposit transaction is on chain again (re-included): it moves the right funds', async () => {
    const { sweeper, cancelled } = sweeperOnChain(true);
    expect(await sweeper.cancelInFlight(payout, pendingSweep, depositTx)).toBeNull();
    expect(cancelled).toEqual([]);
  });
});
