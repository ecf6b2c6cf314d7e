import { Interface, JsonRpcProvider, Network } from 'ethers';
import { PaymentDepositAbi, PaymentFactoryAbi, toOnChainId } from '@stablepay/contracts';
import type { RelayerSet } from '@stablepay/relayer';
import { RangeLimitedRpc, type RpcLog } from '@stablepay/testing';
import { DepositContracts, type DeployRequest } from './deposit-contracts';

/**
 * A deploy whose earlier attempt already landed (its answer lost) reads the deployment back from the factory's
 * DepositDeployed log, on a node as Alchemy serves a real chain: eth_getLogs over more than 2,000 blocks is
 * refused. The chain is 5 million blocks long; the payment was funded at block 4,990,000 and deployed at 4,996,500.
 */
const FACTORY = new Interface(PaymentFactoryAbi);
const DEPOSIT = new Interface(PaymentDepositAbi);
const factory = '0x00000000000000000000000000000000000000fa';
const registry = '0x00000000000000000000000000000000000000fb';
const deposit = '0x00000000000000000000000000000000000000dd';
const payer = '0x0000000000000000000000000000000000000011';
const settlement = '0x0000000000000000000000000000000000000022';
const token = '0x0000000000000000000000000000000000000033';
const merchantId = 'mer_logscan';
const paymentId = `0x${'7'.repeat(64)}`;
const deployTx = `0x${'d'.repeat(64)}`;

const log = (address: string, encoded: { topics: string[]; data: string }, logIndex: number): RpcLog => ({
  address,
  ...encoded,
  blockNumber: 4_996_500,
  transactionHash: deployTx,
  logIndex,
});
const deployed = log(
  factory,
  FACTORY.encodeEventLog('DepositDeployed', [
    toOnChainId(merchantId),
    paymentId,
    deposit,
    1,
    token,
    payer,
    settlement,
    5_000_000n,
    5_000_000n,
    0n,
  ]),
  0,
);
const attested = log(deposit, DEPOSIT.encodeEventLog('PayerAttested', [paymentId, payer, 1_700_000_000n]), 1);

describe('DepositContracts.deploy when the deposit is already deployed, on a node that refuses wide ranges', () => {
  const rpc = new RangeLimitedRpc(
    8453,
    5_000_000,
    2_000,
    [deployed],
    new Map([[deployTx, { blockNumber: 4_996_500, logs: [deployed, attested] }]]),
  );
  let provider: JsonRpcProvider;
  let contracts: DepositContracts;
  const request: DeployRequest = {
    chain: 'eip155:8453',
    merchantId,
    onChainPaymentId: paymentId,
    method: 'DIRECT',
    token,
    payer,
    amount: 5_000_000n,
    authorizationPeriodSeconds: null,
    fundedFromBlock: 4_990_000,
  };

  beforeAll(async () => {
    const network = new Network('base', 8453n);
    provider = new JsonRpcProvider(await rpc.start(), network, { staticNetwork: network });
    // The factory refuses the deploy at simulation: this deposit exists already.
    const relayers = {
      for: () => ({
        provider,
        submit: () =>
          Promise.resolve({ kind: 'simulation_rejected', errorName: 'DepositAlreadyDeployed', args: [] }),
      }),
    } as unknown as RelayerSet;
    contracts = new DepositContracts(relayers, factory, registry, () => 2_000);
  });
  afterAll(async () => {
    provider.destroy();
    await rpc.stop();
  });

  it('reads the deployment from the DepositDeployed log, searching from the funding block in accepted windows', async () => {
    expect(await contracts.deploy(request)).toMatchObject({
      kind: 'deployed',
      txHash: deployTx,
      payer,
      settlement,
      amount: 5_000_000n,
    });
    expect(rpc.asked.every(({ from, to }) => from >= 4_990_000 && to - from < 2_000)).toBe(true);
  });

  it('without a recorded funding block reads a bounded lookback below the head, not the chain from block 0', async () => {
    rpc.asked.length = 0;
    expect(await contracts.deploy({ ...request, fundedFromBlock: null })).toMatchObject({
      kind: 'deployed',
      txHash: deployTx,
    });
    expect(Math.min(...rpc.asked.map(({ from }) => from))).toBe(5_000_000 - 200_000);
  });
});
