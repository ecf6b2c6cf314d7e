import { getAddress, type JsonRpcProvider, Wallet } from 'ethers';
import { register } from 'prom-client';
import type { DataSource } from 'typeorm';
import type { BusMessage } from '@stablepay/event-bus';
import { initialPaymentState, type PaymentState } from '@stablepay/payments-domain';
import { metricValue } from '@stablepay/testing';
import { ManualClock } from '@stablepay/util';
import { DepositContracts } from './deposit-contracts';
import { DepositFlow } from './deposit-flow';
import { type DepositTestbed, startDepositTestbed } from './test-support/deposit-testbed';

/**
 * The deploy of a DIRECT or TWO_STEP payment is announced only once its block has the chain's confirmations: also
 * when a reorg failed the payment and the deploy landed again on the new fork (the reinstatement), and when the
 * process that recorded it does not read its chain. A real anvil and the flow's tables (PostgreSQL or PGlite); the
 * payment's handlers are stand-ins recording what they are asked, and worker passes are run by hand.
 */
const CHAIN = 'eip155:8453';
const CONFIRMATIONS = 3;
const DEPOSIT = getAddress('0x00000000000000000000000000000000000d0a02');

let provider: JsonRpcProvider;
let dataSource: DataSource;
let testbed: DepositTestbed;

beforeAll(async () => {
  testbed = await startDepositTestbed();
  ({ provider, dataSource } = testbed);
});

afterAll(async () => {
  await testbed?.stop();
});

afterEach(() => jest.restoreAllMocks());

interface Asked {
  readonly appended: { readonly command: { type: string; txHash?: string }; readonly key: string }[];
  readonly found: string[][];
  /** The deposit contracts the flow asked the indexer to watch. */
  readonly watched: unknown[];
}

/** The flow with its worker stopped, reading `chains`; the payment is `state`. */
async function depositFlow(state: PaymentState, chains: readonly string[] = [CHAIN]) {
  const asked: Asked = { appended: [], found: [], watched: [] };
  const none = {} as never;
  const flow = new DepositFlow(
    {
      enabled: true,
      addresses: { paymentFactory: '0x1', registry: '0x2' },
      chains: chains.map((caip2) => ({ caip2, confirmations: CONFIRMATIONS, stablecoins: [] })),
    } as never,
    { set: { for: () => ({ provider }) } } as never,
    {
      watchContract: async (command: unknown) => {
        asked.watched.push(command);
      },
    } as never,
    none,
    dataSource,
    none,
    none,
    new ManualClock(new Date()),
    {
      load: async () => ({ state, mode: 'test' }),
      append: async (_paymentId: string, command: { type: string }, key: string) => {
        asked.appended.push({ command, key });
        return { state, newEvents: [] };
      },
    } as never,
    none,
    none,
    none,
    none,
    {
      found: async (...args: string[]) => {
        asked.found.push(args);
        return { state, newEvents: [] };
      },
    } as never,
    none,
    none,
    none,
    none,
  );
  await flow.beforeApplicationShutdown();
  return { flow, asked };
}

/** A mined transaction standing for the deploy (only its receipt is read). */
async function deployMined(): Promise<{ txHash: string; blockHash: string; blockNumber: number }> {
  const sender = new Wallet('0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a', provider); // anvil dev key 2
  const receipt = await (
    await sender.sendTransaction({ to: Wallet.createRandom().address, value: 1n })
  ).wait();
  if (!receipt) throw new Error('no receipt');
  return {
    txHash: receipt.hash.toLowerCase(),
    blockHash: receipt.blockHash.toLowerCase(),
    blockNumber: receipt.blockNumber,
  };
}

const deployed = (txHash: string): PaymentState => ({
  ...initialPaymentState(),
  created: { depositAddress: DEPOSIT } as never,
  phase: 'settled',
  deployment: { txHash, chain: CHAIN, payer: DEPOSIT, payerFinalAt: '', method: 'DIRECT' },
  outflowTxs: [txHash],
});

const receiptRows = async (paymentId: string) =>
  dataSource.query(
    'SELECT receipt_id, block_number, state FROM payment_deposit_receipts WHERE payment_id = $1 ORDER BY receipt_id',
    [paymentId],
  );

describe('a payment a reorg failed whose recorded deploy landed again on the new fork', () => {
  const PAYMENT = 'pay_reinstate';

  it('is reinstated only once the deploy has the confirmations there, not when the contract is seen at the head', async () => {
    const deploy = await deployMined();
    const failed: PaymentState = {
      ...deployed(deploy.txHash),
      phase: 'failed',
      lostTransfer: { chain: CHAIN, txHash: `0x${'11'.repeat(32)}`, logIndex: 0 },
    };
    const { flow, asked } = await depositFlow(failed);
    jest.spyOn(DepositContracts.prototype, 'isDeployed').mockResolvedValue(true);

    await flow.advance(PAYMENT, false);
    expect(asked.found).toEqual([]);
    await flow.confirmTransfers();
    expect(asked.appended).toEqual([]);

    // The confirmation of the block it landed in on the new fork decides the reinstatement (ConfirmDeployment).
    await provider.send('anvil_mine', [`0x${(CONFIRMATIONS - 1).toString(16)}`]);
    await flow.confirmTransfers();
    const receiptId = `deploy:${deploy.txHash}:${deploy.blockHash}`;
    expect(asked.appended).toEqual([
      { command: { type: 'ConfirmDeployment', txHash: deploy.txHash }, key: `confirmed:${receiptId}` },
    ]);
    // Funding confirmed after that (still failed here): the payment's next event finds the deploy confirmed.
    await flow.advance(PAYMENT, false);
    expect(asked.found).toEqual([[PAYMENT, deploy.txHash, deploy.blockHash]]);
    expect(await receiptRows(PAYMENT)).toEqual([
      { receipt_id: receiptId, block_number: expect.anything(), state: 'confirmed' },
    ]);
    expect(
      await dataSource.query('SELECT * FROM payment_deposit_jobs WHERE payment_id = $1', [PAYMENT]),
    ).toEqual([]);
  });
});

describe('a DIRECT or TWO_STEP deploy recorded by a process that does not read its chain', () => {
  const PAYMENT = 'pay_unread_chain';

  it('is queued, counted and logged there, and watched from its block and confirmed (ConfirmDeployment) by the worker of a process that reads the chain', async () => {
    const deploy = await deployMined();
    const state = deployed(deploy.txHash);
    const unread = await depositFlow(state, []);
    const counted = async () =>
      metricValue(await register.metrics(), 'stablepay_payment_deposit_deploys_on_unread_chain_total', {
        chain: CHAIN,
      });
    const before = await counted();

    await unread.flow.onPaymentEvent({
      id: 'settled',
      topic: 'payments.payment.v1',
      key: `payment-${PAYMENT}`,
      type: 'PaymentSettled.v1',
      data: { deployTxHash: deploy.txHash, chain: CHAIN },
    } as unknown as BusMessage);

    expect((await counted()) - before).toBe(1);
    expect(unread.asked.watched).toEqual([]);
    expect(await receiptRows(PAYMENT)).toEqual([
      { receipt_id: `deploy:${deploy.txHash}`, block_number: '0', state: 'open' },
    ]);

    const reading = await depositFlow(state);
    await provider.send('anvil_mine', [`0x${(CONFIRMATIONS - 1).toString(16)}`]);
    await reading.flow.confirmTransfers();
    // Its deposit contract watched from the deploy's block: the payer's dispute or attestation logs, and anyone
    // else's capture or reclaim, are recorded only from the indexer's sightings of it.
    expect(reading.asked.watched).toEqual([
      { chain: CHAIN, address: DEPOSIT, kind: 'payment_deposit', fromBlock: deploy.blockNumber },
    ]);
    expect(reading.asked.appended).toEqual([
      {
        command: { type: 'ConfirmDeployment', txHash: deploy.txHash },
        key: `confirmed:deploy:${deploy.txHash}`,
      },
    ]);
    expect(await receiptRows(PAYMENT)).toEqual([
      { receipt_id: `deploy:${deploy.txHash}`, block_number: expect.anything(), state: 'confirmed' },
    ]);
  });

  it('queues the deploy recorded again after a loss on a row of its own, and nothing for a fact of a deploy undone', async () => {
    const payment = 'pay_unread_chain_again';
    const deploy = await deployMined();
    const settled = {
      id: 'settled-again',
      topic: 'payments.payment.v1',
      key: `payment-${payment}`,
      type: 'PaymentSettled.v1',
      data: { deployTxHash: deploy.txHash, chain: CHAIN },
    } as unknown as BusMessage;

    // The deploy undone (PaymentDeploymentLost.v1): its old fact redelivered queues nothing.
    const undone = await depositFlow(
      { ...deployed(deploy.txHash), deployment: null, deploymentsLost: 1 },
      [],
    );
    await undone.flow.onPaymentEvent(settled);
    expect(await receiptRows(payment)).toEqual([]);

    // The same transaction recorded again after the loss: a new row, not the lost one's id.
    const again = await depositFlow({ ...deployed(deploy.txHash), deploymentsLost: 1 }, []);
    await again.flow.onPaymentEvent(settled);
    expect(await receiptRows(payment)).toEqual([
      { receipt_id: `deploy:${deploy.txHash}:1`, block_number: '0', state: 'open' },
    ]);
  });
});
