import { Interface, JsonRpcProvider, Network } from 'ethers';
import {
  PaymentDepositAbi,
  PaymentFactoryAbi,
  computeDepositAddress,
  toOnChainId,
} from '@stablepay/contracts';
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
const payer = '0x0000000000000000000000000000000000000011';
const settlement = '0x0000000000000000000000000000000000000022';
const token = '0x0000000000000000000000000000000000000033';
const merchantId = 'mer_logscan';
const paymentId = `0x${'7'.repeat(64)}`;
const deployTx = `0x${'d'.repeat(64)}`;
const deposit = computeDepositAddress(factory, toOnChainId(merchantId), paymentId);

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
    depositAddress: deposit,
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

/**
 * CREATE2 binds a deposit address to its factory: a payment whose address another PaymentFactory computed (an
 * override, rotated roles, a new contract version) deploys elsewhere through this one. Before, the deploy was sent
 * anyway: a DIRECT/TWO_STEP deploy reverted for ever (no funds there), a NONE deploy put an empty clone at another
 * address and was recorded as the payment's deployment, and the flag marked another address done.
 */
describe("DepositContracts refuses a payment whose deposit address is not its factory's", () => {
  const otherFactory = '0x00000000000000000000000000000000000000fc';
  const foreign = computeDepositAddress(otherFactory, toOnChainId(merchantId), paymentId);
  const request: DeployRequest = {
    chain: 'eip155:8453',
    merchantId,
    onChainPaymentId: paymentId,
    depositAddress: foreign,
    method: 'NONE',
    token,
    payer,
    amount: 0n,
    authorizationPeriodSeconds: null,
    fundedFromBlock: 1,
  };
  const sent: unknown[] = [];
  const relayers = {
    for: () => ({
      provider: {
        getBlock: () => Promise.resolve({ timestamp: 1_700_000_000 }),
      },
      submit: (tx: unknown) => {
        sent.push(tx);
        return Promise.resolve({
          kind: 'confirmed',
          txHash: deployTx,
          receipt: { logs: [deployed, attested] },
        });
      },
    }),
  } as unknown as RelayerSet;
  const contracts = new DepositContracts(relayers, factory, registry, () => 2_000);

  beforeEach(() => {
    sent.length = 0;
  });

  it('sends no deploy and answers retry naming both addresses', async () => {
    const outcome = await contracts.deploy(request);
    expect(outcome).toMatchObject({ kind: 'retry' });
    expect(outcome.kind === 'retry' && outcome.error).toContain(foreign);
    expect(outcome.kind === 'retry' && outcome.error).toContain(deposit);
    expect(sent).toEqual([]);
  });

  it('sends no flag (flagging another address would answer done)', async () => {
    expect(await contracts.flag('eip155:8453', merchantId, paymentId, foreign)).toMatchObject({
      done: false,
    });
    expect(sent).toEqual([]);
  });

  it("does not record a receipt whose DepositDeployed names another deposit than the payment's", async () => {
    const elsewhere = log(
      factory,
      FACTORY.encodeEventLog('DepositDeployed', [
        toOnChainId(merchantId),
        paymentId,
        foreign,
        2,
        token,
        payer,
        settlement,
        0n,
        0n,
        0n,
      ]),
      0,
    );
    const lying = new DepositContracts(
      {
        for: () => ({
          provider: {},
          submit: () =>
            Promise.resolve({
              kind: 'confirmed',
              txHash: deployTx,
              receipt: { logs: [elsewhere, attested] },
            }),
        }),
      } as unknown as RelayerSet,
      factory,
      registry,
      () => 2_000,
    );
    expect(await lying.deploy({ ...request, depositAddress: deposit })).toMatchObject({ kind: 'retry' });
  });

  it("deploys a payment whose address is this factory's", async () => {
    expect(await contracts.deploy({ ...request, depositAddress: deposit })).toMatchObject({
      kind: 'deployed',
      txHash: deployTx,
    });
    expect(sent).toHaveLength(1);
  });
});
