import { getAddress, type JsonRpcProvider, Transaction, Wallet } from 'ethers';
import { register } from 'prom-client';
import type { DataSource } from 'typeorm';
import type { BusMessage } from '@stablepay/event-bus';
import { handleCommand } from '@stablepay/aggregate';
import { InMemoryEventStore } from '@stablepay/event-store';
import {
  decidePayment,
  evolvePayment,
  initialPaymentState,
  type PaymentCommand,
  paymentStreamId,
  type PaymentState,
} from '@stablepay/payments-domain';
import { metricValue } from '@stablepay/testing';
import { ManualClock } from '@stablepay/util';
import { PaymentFacts, type TimelessPaymentCommand } from '../commands/payment-facts';
import { RecordDepositDeploymentHandler } from '../commands/record-deposit-deployment/record-deposit-deployment.handler';
import { DepositContracts, type DeployRequest, type DepositOutflowSeen } from './deposit-contracts';
import { DEFAULT_DEPLOY_LOST_GRACE_S, DepositFlow } from './deposit-flow';
import { DepositStore } from './deposit.store';
import { type DepositTestbed, startDepositTestbed } from './test-support/deposit-testbed';

/**
 * The deposit worker confirms a transfer (and records an outflow) by its depth. A reorg shallower than the
 * confirmations whose new fork is already deeper than them when the worker looks makes the orphaned sighting due by
 * its block number before the indexer's retraction arrives: evm_snapshot, a block the indexer saw, evm_revert, a
 * longer fork (anvil_mine). One worker pass is run by hand, the payment's handlers are stand-ins that record what
 * they are asked; the queue is the real table (PostgreSQL or PGlite) and the chain a real anvil.
 */
const CHAIN = 'eip155:8453';
const CONFIRMATIONS = 3;
const DEPOSIT = getAddress('0x00000000000000000000000000000000000d0a01');
const USDC = getAddress('0x00000000000000000000000000000000000005dc');

let provider: JsonRpcProvider;
let dataSource: DataSource;
let testbed: DepositTestbed;

beforeAll(async () => {
  testbed = await startDepositTestbed();
  ({ provider, dataSource } = testbed);
  await new DepositStore(dataSource).addAddress(DEPOSIT, 'pay_reorg');
});

afterAll(async () => {
  await testbed?.stop();
});

interface Asked {
  readonly confirmed: string[];
  readonly recorded: string[];
  /** The block of each outflow recorded: the payment tells a transaction mined again in another block by it. */
  readonly recordedBlocks: (string | null | undefined)[];
  /** The payment commands appended by the flow itself, with their keys. */
  readonly appended: { readonly command: { type: string; txHash?: string }; readonly key: string }[];
}

/**
 * The flow with its worker stopped (passes run by hand) and the payment's handlers recording what they get; the
 * payment holds the outflows of `recordedOutflowTxs` (recorded from the action's own receipt), or is `state`;
 * `undoes`: whether the payment's decider undoes a retracted one (an unconfirmed capture, refund or reclaim) or keeps
 * it.
 */
async function depositFlow(
  recordedOutflowTxs: readonly string[] = [],
  undoes = false,
  state: object = { outflowTxs: recordedOutflowTxs, outflowLogs: [], outflowSightings: {} },
  /** The payment's real stream instead of the stand-ins (facts), with the deploy's wiring. */
  real?: { facts: PaymentFacts; events: InMemoryEventStore; merchants: object },
): Promise<{ flow: DepositFlow; asked: Asked }> {
  const asked: Asked = { confirmed: [], recorded: [], recordedBlocks: [], appended: [] };
  const none = {} as never;
  const facts =
    real?.facts ??
    ({
      load: async () => ({ state, mode: 'test' }),
      append: async (_paymentId: string, command: { type: string }, key: string) => {
        asked.appended.push({ command, key });
        const undone = undoes && command.type === 'RetractOutflow';
        return { state, newEvents: undone ? [{ type: 'PaymentOutflowRetracted.v1' }] : [] };
      },
    } as never);
  const flow = new DepositFlow(
    {
      enabled: true,
      mode: 'test',
      addresses: { paymentFactory: '0x1', registry: '0x2' },
      chains: [{ caip2: CHAIN, confirmations: CONFIRMATIONS, stablecoins: [] }],
    } as never,
    // The transfers here come from an account (no mint): their sender is the log's `from`.
    {
      set: {
        for: () => ({ provider }),
        transferOrigin: async (t: { from: string }) => ({ from: t.from, minted: false }),
      },
    } as never,
    { watchContract: async () => undefined } as never,
    none,
    dataSource,
    none,
    (real?.events ?? none) as never,
    new ManualClock(new Date()),
    facts,
    { handle: async () => undefined } as never,
    {
      handle: async (_paymentId: string, t: { chain: string; txHash: string; logIndex: number }) => {
        asked.confirmed.push(t.txHash);
        return { state: { transfers: [{ ...t, confirmed: true }] } };
      },
    } as never,
    none,
    none,
    new RecordDepositDeploymentHandler(facts),
    {
      handle: async (_paymentId: string, o: { txHash: string; blockHash?: string | null }) => {
        asked.recorded.push(o.txHash);
        asked.recordedBlocks.push(o.blockHash);
      },
    } as never,
    (real?.merchants ?? none) as never,
    none,
    none,
  );
  await flow.beforeApplicationShutdown();
  return { flow, asked };
}

/** A block with one transaction in it (so that a block mined at its height on another fork has another hash). */
async function blockWithTransaction(): Promise<{ number: number; hash: string; txHash: string }> {
  const sender = new Wallet('0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d', provider); // anvil dev key 1
  const tx = await sender.sendTransaction({ to: Wallet.createRandom().address, value: 1n });
  const receipt = await tx.wait();
  if (!receipt) throw new Error('no receipt');
  return { number: receipt.blockNumber, hash: receipt.blockHash, txHash: receipt.hash };
}

type Block = { readonly number: number; readonly hash: string };

/** The payment's receipts undecided (on no chain, or pending) since longer than the grace before a deploy is lost. */
const undecidedPastTheGrace = (paymentId: string) =>
  dataSource.query(
    `UPDATE payment_deposit_receipts SET undecided_since = now() - $2 * interval '1 second'
      WHERE payment_id = $1 AND undecided_since IS NOT NULL`,
    [paymentId, DEFAULT_DEPLOY_LOST_GRACE_S + 1],
  );

/** The indexer's observation of a log in `block` (docs/asyncapi.yaml), as the flow's consumer receives it. */
const seen = (id: string, type: string, block: Block, txHash: string, fields: object): BusMessage =>
  ({
    id,
    topic: 'indexer.chain-observation.v1',
    key: `chain-${CHAIN}`,
    type,
    data: {
      chain: CHAIN,
      blockNumber: String(block.number),
      blockHash: block.hash,
      blockTime: new Date().toISOString(),
      txHash,
      logIndex: 0,
      ...fields,
    },
  }) as unknown as BusMessage;

const transferSeen = (id: string, block: Block, txHash: string): BusMessage =>
  seen(id, 'Erc20TransferObserved.v1', block, txHash, {
    contract: USDC,
    asset: `${CHAIN}/erc20:${USDC}`,
    from: USDC,
    to: DEPOSIT,
    amount: '5',
  });

const captureSeen = (id: string, block: Block, txHash: string): BusMessage =>
  seen(id, 'PaymentDepositEventObserved.v1', block, txHash, {
    contract: DEPOSIT,
    event: 'PaymentCaptured',
    args: { token: USDC, amount: '5', settlement: USDC },
  });

describe('the deposit worker confirms only sightings whose block is still canonical', () => {
  it('a transfer and a capture seen in a block a reorg orphaned stay queued while the new fork is deeper than the confirmations; those of canonical blocks are confirmed and recorded', async () => {
    const { flow, asked } = await depositFlow();
    const snapshot = (await provider.send('evm_snapshot', [])) as string;
    const orphaned = await blockWithTransaction();
    await flow.onObservation(transferSeen('obs-orphaned-transfer', orphaned, orphaned.txHash));
    await flow.onObservation(captureSeen('obs-orphaned-capture', orphaned, orphaned.txHash));
    await provider.send('evm_revert', [snapshot]);
    // The new fork: a block at the same height without that transaction, then enough blocks to confirm it by depth.
    const canonical = await blockWithTransaction();
    expect(canonical.number).toBe(orphaned.number);
    expect(canonical.hash).not.toBe(orphaned.hash);
    await flow.onObservation(transferSeen('obs-canonical-transfer', canonical, canonical.txHash));
    await flow.onObservation(captureSeen('obs-canonical-capture', canonical, canonical.txHash));
    await provider.send('anvil_mine', [`0x${CONFIRMATIONS.toString(16)}`]);

    await flow.confirmTransfers();

    expect(asked.confirmed).toEqual([canonical.txHash]);
    expect(asked.recorded).toEqual([canonical.txHash]);
    expect(asked.recordedBlocks).toEqual([canonical.hash.toLowerCase()]);
    const states = await dataSource.query(
      `SELECT observation_id, state FROM payment_deposit_transfers
       UNION ALL SELECT observation_id, state FROM payment_deposit_outflows ORDER BY observation_id`,
    );
    expect(states).toEqual([
      { observation_id: 'obs-canonical-capture', state: 'recorded' },
      { observation_id: 'obs-canonical-transfer', state: 'confirmed' },
      { observation_id: 'obs-orphaned-capture', state: 'observed' },
      { observation_id: 'obs-orphaned-transfer', state: 'observed' },
    ]);
  });

  /** Our own capture recorded from its receipt, its sighting retracted: what was counted, and the row. */
  async function ownCaptureRetracted(name: string, undoes: boolean) {
    const ownCapture = `0x${name.padEnd(64, '0')}`;
    const { flow, asked } = await depositFlow([ownCapture], undoes);
    const block = await blockWithTransaction();
    await flow.onObservation(captureSeen(`obs-${name}`, block, ownCapture));
    const counted = async () =>
      metricValue(
        await register.metrics(),
        'stablepay_payment_deposit_outflow_retracted_after_record_total',
        {
          chain: CHAIN,
          kind: 'captured',
        },
      );
    const before = await counted();

    await flow.onObservation({
      id: `retraction-of-${name}`,
      topic: 'indexer.chain-observation.v1',
      key: `chain-${CHAIN}`,
      type: 'ObservationRetracted.v1',
      data: { chain: CHAIN, observationId: `obs-${name}`, address: DEPOSIT },
    } as unknown as BusMessage);

    const rows: unknown = await dataSource.query(
      'SELECT state FROM payment_deposit_outflows WHERE observation_id = $1',
      [`obs-${name}`],
    );
    return { ownCapture, asked, counted: (await counted()) - before, rows };
  }

  it('our own capture, recorded from its receipt before its sighting was due, then retracted by a reorg: counted and logged as a recorded outflow the payment keeps, not dropped as one that never happened', async () => {
    const { counted, rows } = await ownCaptureRetracted('c1', false);
    expect(counted).toBe(1);
    expect(rows).toEqual([{ state: 'retracted' }]);
  });

  it('our own capture retracted before its confirmations is undone by the payment (RetractOutflow keyed by the sighting), not paged', async () => {
    const { ownCapture, asked, counted, rows } = await ownCaptureRetracted('c2', true);
    expect(asked.appended).toEqual([
      { command: { type: 'RetractOutflow', txHash: ownCapture, logIndex: 0 }, key: 'retract-outflow:obs-c2' },
    ]);
    expect(counted).toBe(0);
    expect(rows).toEqual([{ state: 'retracted' }]);
  });

  it("queued sightings that stay undecided (their block orphaned, the indexer's retraction never coming) rotate to the back: more of them than a pass reads (200) ahead of a transfer and a capture do not keep those from being confirmed and recorded", async () => {
    const { flow, asked } = await depositFlow();
    const before = await blockWithTransaction();
    const stuck = { chain: CHAIN, block: before.number, hash: `0x${'0d'.repeat(32)}`, count: 201 };
    await dataSource.query(
      `INSERT INTO payment_deposit_transfers
         (observation_id, payment_id, chain, tx_hash, log_index, block_number, block_hash, state)
       SELECT 'obs-stuck-transfer-' || i, 'pay_stuck', $1, $2, i, $3, $4, 'observed'
         FROM generate_series(1, $5::int) AS i`,
      [stuck.chain, before.txHash, stuck.block, stuck.hash, stuck.count],
    );
    await dataSource.query(
      `INSERT INTO payment_deposit_outflows
         (observation_id, payment_id, chain, tx_hash, log_index, block_number, block_hash, kind, token, recipient,
          amount, state)
       SELECT 'obs-stuck-capture-' || i, 'pay_stuck', $1, $2, i, $3, $4, 'captured', $5, $5, '5', 'observed'
         FROM generate_series(1, $6::int) AS i`,
      [stuck.chain, before.txHash, stuck.block, stuck.hash, USDC.toLowerCase(), stuck.count],
    );
    const later = await blockWithTransaction();
    await flow.onObservation(transferSeen('obs-behind-stuck-transfer', later, later.txHash));
    await flow.onObservation(captureSeen('obs-behind-stuck-capture', later, later.txHash));
    await provider.send('anvil_mine', [`0x${CONFIRMATIONS.toString(16)}`]);

    await flow.confirmTransfers();
    await flow.confirmTransfers();

    expect(asked.confirmed).toEqual([later.txHash]);
    expect(asked.recorded).toEqual([later.txHash]);
    // The orphaned ones stay queued for the retraction (or an operator): nothing confirmed or recorded them.
    const stillQueued = await dataSource.query(
      `SELECT (SELECT count(*)::int FROM payment_deposit_transfers WHERE payment_id = 'pay_stuck' AND state = 'observed') AS transfers,
              (SELECT count(*)::int FROM payment_deposit_outflows WHERE payment_id = 'pay_stuck' AND state = 'observed') AS outflows`,
    );
    expect(stillQueued).toEqual([{ transfers: 201, outflows: 201 }]);
  });
});

describe('the deposit worker checks what the payment recorded from a receipt at the confirmations (a reorg the indexer never read)', () => {
  const PAYMENT = 'pay_receipts';

  /**
   * The flow with its worker stopped; the payment's deposit is deployed on CHAIN and its decider undoes. `settled`:
   * the payment records deploy `txHash` (its PaymentSettled.v1, as the bus delivers it).
   */
  async function receiptFlow() {
    const deployment = {
      txHash: '0xdeploy',
      chain: CHAIN,
      payer: USDC,
      payerFinalAt: '',
      method: 'TWO_STEP',
    };
    const state = {
      ...initialPaymentState(),
      created: { depositAddress: DEPOSIT, createdAt: new Date().toISOString() } as never,
      deployment,
    } as PaymentState;
    const { flow, asked } = await depositFlow([], true, state);
    const settled = (txHash: string) => {
      deployment.txHash = txHash;
      return paymentEvent('PaymentSettled.v1', { deployTxHash: txHash, chain: CHAIN });
    };
    return { flow, appended: asked.appended, settled, state };
  }

  const paymentEvent = (type: string, data: object): BusMessage =>
    ({
      id: `${type}:${JSON.stringify(data)}`,
      topic: 'payments.payment.v1',
      key: `payment-${PAYMENT}`,
      type,
      data,
    }) as unknown as BusMessage;

  /** Our capture as the action records it from its receipt (PaymentCaptured.v1 with the receipt's block). */
  const capturedFrom = (block: { number: number; hash: string; txHash: string }) =>
    paymentEvent('PaymentCaptured.v1', {
      txHash: block.txHash.toLowerCase(),
      logIndex: 0,
      blockHash: block.hash.toLowerCase(),
      blockNumber: String(block.number),
      asset: `${CHAIN}/erc20:${USDC}`,
      amount: '5',
      to: USDC,
      at: new Date().toISOString(),
    });

  /** The undo of our capture recorded from its receipt in `recorded` (the block named, keyed by the receipt). */
  const retractionOf = (recorded: { hash: string; txHash: string }) => {
    const txHash = recorded.txHash.toLowerCase();
    const blockHash = recorded.hash.toLowerCase();
    return {
      command: { type: 'RetractOutflow', txHash, logIndex: 0, blockHash },
      key: `retract-outflow:receipt:outflow:${txHash}:0:${blockHash}`,
    };
  };

  /** The signed transaction as sent, to send again (mined again) after a reorg took its block. */
  const signedTransaction = async (txHash: string): Promise<string> => {
    const sent = await provider.getTransaction(txHash);
    if (!sent) throw new Error(`transaction ${txHash} not found`);
    return Transaction.from(sent).serialized;
  };

  /**
   * Our capture recorded from its receipt, its block taken back by a reorg the indexer never read and the transaction
   * mined again `blocksLater` blocks on; `beforeMinedAgain`: the chain just before, to take that block back too.
   */
  async function captureMinedAgain(blocksLater: number) {
    const { flow, appended } = await receiptFlow();
    const snapshot = (await provider.send('evm_snapshot', [])) as string;
    const orphaned = await blockWithTransaction();
    const raw = await signedTransaction(orphaned.txHash);
    await flow.onPaymentEvent(capturedFrom(orphaned));
    await provider.send('evm_revert', [snapshot]);
    await provider.send('anvil_mine', [`0x${blocksLater.toString(16)}`]);
    const beforeMinedAgain = (await provider.send('evm_snapshot', [])) as string;
    await provider.send('eth_sendRawTransaction', [raw]);
    const again = await provider.getTransactionReceipt(orphaned.txHash);
    expect(again?.blockNumber).toBe(orphaned.number + blocksLater);
    return { flow, appended, orphaned, beforeMinedAgain };
  }

  const receiptStates = async () =>
    (
      (await dataSource.query(
        'SELECT state, block_number FROM payment_deposit_receipts WHERE payment_id = $1 ORDER BY receipt_id',
        [PAYMENT],
      )) as { state: string; block_number: string }[]
    ).map((r) => r.state);

  afterEach(async () => {
    await dataSource.query('DELETE FROM payment_deposit_receipts WHERE payment_id = $1', [PAYMENT]);
  });

  it('our capture whose block a reorg took back before the indexer read it, not mined again: undone at the confirmations (RetractOutflow of that block), not confirmed', async () => {
    const { flow, appended } = await receiptFlow();
    const snapshot = (await provider.send('evm_snapshot', [])) as string;
    const orphaned = await blockWithTransaction();
    await flow.onPaymentEvent(capturedFrom(orphaned));
    await provider.send('evm_revert', [snapshot]);
    await provider.send('anvil_mine', [`0x${(CONFIRMATIONS + 1).toString(16)}`]);
    expect((await provider.getBlock(orphaned.number))?.hash).not.toBe(orphaned.hash);

    await flow.confirmTransfers();

    expect(appended).toEqual([retractionOf(orphaned)]);
    expect(await receiptStates()).toEqual(['retracted']);
    await flow.confirmTransfers();
    expect(appended).toHaveLength(1);
  });

  it("our capture mined again in another block after the reorg: left to the indexer's sighting there, neither confirmed nor undone from the receipt", async () => {
    const { flow, appended } = await captureMinedAgain(1);
    await provider.send('anvil_mine', [`0x${CONFIRMATIONS.toString(16)}`]);

    await flow.confirmTransfers();
    await flow.confirmTransfers();

    expect(appended).toEqual([]);
    expect(await receiptStates()).toEqual(['mined_again']);
  });

  it('our capture mined again in a block near the head, then dropped by a second reorg before that block had the confirmations: followed there and undone (RetractOutflow of the block the payment recorded), not closed as mined again', async () => {
    const { flow, appended, orphaned, beforeMinedAgain } = await captureMinedAgain(4);
    // The block the payment recorded is due, the one it was mined again in is not.
    await flow.confirmTransfers();
    expect(appended).toEqual([]);
    expect(await receiptStates()).toEqual(['open']);

    // The second reorg takes that block back; the transaction is on no chain (dropped from the node's pool too).
    await provider.send('evm_revert', [beforeMinedAgain]);
    await provider.send('anvil_dropTransaction', [orphaned.txHash]);
    await provider.send('anvil_mine', [`0x${(CONFIRMATIONS + 2).toString(16)}`]);
    expect(await provider.getTransactionReceipt(orphaned.txHash)).toBeNull();
    await flow.confirmTransfers();
    await flow.confirmTransfers();

    expect(appended).toEqual([retractionOf(orphaned)]);
    expect(await receiptStates()).toEqual(['retracted']);
  });

  const pastTheGrace = () => undecidedPastTheGrace(PAYMENT);

  /**
   * A deploy on no chain: a pass (another one before it, or not) within the grace declares nothing (another node's
   * pool may still mine it); past the grace, the next one records the loss keyed by the deploy and closes the row.
   */
  async function lostOnlyAfterTheGrace(
    flow: DepositFlow,
    appended: Asked['appended'],
    txHash: string,
  ): Promise<void> {
    await flow.confirmTransfers();
    expect(appended).toEqual([]);
    expect(await receiptStates()).toEqual(['open']);
    await pastTheGrace();
    await flow.confirmTransfers();
    expect(appended).toEqual([
      { command: { type: 'RecordDeploymentLost', deployTxHash: txHash }, key: `deploy-lost:${txHash}` },
    ]);
    expect(await receiptStates()).toEqual(['lost']);
  }

  it('a deploy whose block a reorg took back, not mined again, is closed as lost once on no chain across passes for the grace: never announced, the loss recorded (RecordDeploymentLost keyed by the deploy), and no longer read as open', async () => {
    const { flow, appended, settled } = await receiptFlow();
    const snapshot = (await provider.send('evm_snapshot', [])) as string;
    const orphaned = await blockWithTransaction();
    const txHash = orphaned.txHash.toLowerCase();
    await flow.onPaymentEvent(settled(txHash));
    await provider.send('evm_revert', [snapshot]);
    await provider.send('anvil_mine', [`0x${(CONFIRMATIONS + 1).toString(16)}`]);
    expect((await provider.getBlock(orphaned.number))?.hash).not.toBe(orphaned.hash);

    await flow.confirmTransfers();

    // Closed: left open, such rows would in time fill every page of open receipts and starve later deploys.
    await lostOnlyAfterTheGrace(flow, appended, txHash);
  });

  it("a deploy on no chain at one pass, then mined again (back from another node's pool), is followed and confirmed there, never declared lost", async () => {
    const { flow, appended, settled } = await receiptFlow();
    const snapshot = (await provider.send('evm_snapshot', [])) as string;
    const orphaned = await blockWithTransaction();
    const raw = await signedTransaction(orphaned.txHash);
    const txHash = orphaned.txHash.toLowerCase();
    await flow.onPaymentEvent(settled(txHash));
    await provider.send('evm_revert', [snapshot]);
    await provider.send('anvil_mine', [`0x${(CONFIRMATIONS + 1).toString(16)}`]);
    expect(await provider.getTransaction(orphaned.txHash)).toBeNull();

    await flow.confirmTransfers();
    expect(appended).toEqual([]);

    await provider.send('eth_sendRawTransaction', [raw]);
    await provider.send('anvil_mine', [`0x${CONFIRMATIONS.toString(16)}`]);
    await pastTheGrace();
    await flow.confirmTransfers();

    expect(appended).toEqual([
      { command: { type: 'ConfirmDeployment', txHash }, key: `confirmed:deploy:${txHash}` },
    ]);
    expect(await receiptStates()).toEqual(['confirmed']);
  });

  it('the same deploy recorded again after its loss (mined after all) is queued anew and confirmed, the lost row staying closed', async () => {
    const { flow, appended, settled, state } = await receiptFlow();
    const deploy = await blockWithTransaction();
    const txHash = deploy.txHash.toLowerCase();
    await dataSource.query(
      `INSERT INTO payment_deposit_receipts
         (receipt_id, payment_id, chain, tx_hash, log_index, kind, block_number, block_hash, state)
       VALUES ($1, $2, $3, $4, NULL, 'deployed', $5, $6, 'lost')`,
      [`deploy:${txHash}`, PAYMENT, CHAIN, txHash, deploy.number, `0x${'0d'.repeat(32)}`],
    );
    Object.assign(state, { deploymentsLost: 1 });

    await flow.onPaymentEvent(settled(txHash));
    await provider.send('anvil_mine', [`0x${CONFIRMATIONS.toString(16)}`]);
    await flow.confirmTransfers();

    // Confirmed under the new row's key: the first record's confirmation key stays its own.
    expect(appended).toEqual([
      { command: { type: 'ConfirmDeployment', txHash }, key: `confirmed:deploy:${txHash}:1` },
    ]);
    expect(await receiptStates()).toEqual(['lost', 'confirmed']);
  });

  it('a deploy fact whose transaction a reorg dropped before it was handled is queued, its block unknown, not thrown for the bus to redeliver for good: the pass decides it (lost after the grace)', async () => {
    const { flow, appended, settled } = await receiptFlow();
    const snapshot = (await provider.send('evm_snapshot', [])) as string;
    const orphaned = await blockWithTransaction();
    const txHash = orphaned.txHash.toLowerCase();
    await provider.send('evm_revert', [snapshot]);
    await provider.send('anvil_mine', [`0x${(CONFIRMATIONS + 1).toString(16)}`]);

    await flow.onPaymentEvent(settled(txHash));

    expect(await receiptStates()).toEqual(['open']);
    await lostOnlyAfterTheGrace(flow, appended, txHash);
  });

  it('an old deploy fact redelivered after the payment undid that deploy (or holds another) is passed over: nothing queued, nothing thrown', async () => {
    const { flow, settled } = await receiptFlow();
    const old = settled(`0x${'0e'.repeat(32)}`);
    settled(`0x${'0f'.repeat(32)}`);

    await flow.onPaymentEvent(old);

    expect(await receiptStates()).toEqual([]);
  });

  let gaps = 0;
  /** A transaction the node holds pending for good: a nonce gap before it that anvil dev key 5 never fills. */
  async function pendingForGood(): Promise<string> {
    const sender = new Wallet('0x8b3a350cf5c34c9194ca85829a2df0ec3153be0318b5e2d3348e872092edffba', provider);
    const nonce = await provider.getTransactionCount(sender.address);
    const signed = await sender.signTransaction({
      to: sender.address,
      value: 1n,
      nonce: nonce + 1_000 + ++gaps,
      gasLimit: 21_000,
      maxFeePerGas: 10n ** 10n,
      maxPriorityFeePerGas: 1n,
      chainId: 8453,
      type: 2,
    });
    const txHash = (await provider.send('eth_sendRawTransaction', [signed])) as string;
    expect(await provider.getTransaction(txHash)).not.toBeNull();
    return txHash;
  }

  /** `count` receipt rows of our capture `txHash` recorded from a block the chain no longer has at `blockNumber`. */
  const undecidable = (txHash: string, blockNumber: number, count: number) =>
    dataSource.query(
      `INSERT INTO payment_deposit_receipts
         (receipt_id, payment_id, chain, tx_hash, log_index, kind, block_number, block_hash, state)
       SELECT 'outflow:' || $1 || ':' || i || ':orphaned', $2, $3, $1, i, 'captured', $4, $5, 'open'
         FROM generate_series(1, $6::int) AS i`,
      [txHash.toLowerCase(), PAYMENT, CHAIN, blockNumber, `0x${'0d'.repeat(32)}`, count],
    );

  const openRows = async () =>
    Number(
      (
        (await dataSource.query(
          `SELECT count(*)::int AS n FROM payment_deposit_receipts WHERE payment_id = $1 AND state = 'open'`,
          [PAYMENT],
        )) as { n: number }[]
      )[0]?.n,
    );

  it("receipts that stay undecided (a transaction pending in the node's pool for good) rotate to the back: more of them than a pass reads (200) ahead of a deploy do not keep it from being confirmed", async () => {
    const { flow, appended, settled } = await receiptFlow();
    const pending = await pendingForGood();
    await undecidable(pending, (await provider.getBlockNumber()) - 1, 201);
    const deploy = await blockWithTransaction();
    const txHash = deploy.txHash.toLowerCase();
    await flow.onPaymentEvent(settled(txHash));
    await provider.send('anvil_mine', [`0x${CONFIRMATIONS.toString(16)}`]);

    await flow.confirmTransfers();
    await flow.confirmTransfers();

    expect(appended).toEqual([
      { command: { type: 'ConfirmDeployment', txHash }, key: `confirmed:deploy:${txHash}` },
    ]);
    // The undecided ones stay open (neither confirmed nor undone): they may still be mined.
    expect(await openRows()).toBe(201);
  });

  it('a receipt whose transaction has been pending for long is logged and counted once, and stays open', async () => {
    const { flow, appended } = await receiptFlow();
    await undecidable(await pendingForGood(), (await provider.getBlockNumber()) - 1, 1);
    await provider.send('anvil_mine', [`0x${CONFIRMATIONS.toString(16)}`]);
    await dataSource.query(
      `UPDATE payment_deposit_receipts SET undecided_since = now() - interval '1 hour' WHERE payment_id = $1`,
      [PAYMENT],
    );
    const counted = async () =>
      metricValue(await register.metrics(), 'stablepay_payment_deposit_receipts_undecided_total', {
        chain: CHAIN,
        kind: 'captured',
        reason: 'pending',
      });
    const before = await counted();

    await flow.confirmTransfers();
    await flow.confirmTransfers();

    expect((await counted()) - before).toBe(1);
    expect(appended).toEqual([]);
    expect(await openRows()).toBe(1);
  });

  it('a DIRECT deploy recorded from its receipt is confirmed (ConfirmDeployment) only once its block has the confirmations, once', async () => {
    const { flow, appended, settled } = await receiptFlow();
    const deploy = await blockWithTransaction();
    const txHash = deploy.txHash.toLowerCase();
    await flow.onPaymentEvent(settled(txHash));
    await flow.confirmTransfers();
    expect(appended).toEqual([]);

    await provider.send('anvil_mine', [`0x${(CONFIRMATIONS - 1).toString(16)}`]);
    await flow.confirmTransfers();
    await flow.confirmTransfers();

    expect(appended).toEqual([
      { command: { type: 'ConfirmDeployment', txHash }, key: `confirmed:deploy:${txHash}` },
    ]);
    expect(await receiptStates()).toEqual(['confirmed']);
  });
});

describe("a DIRECT deploy a reorg took back before its confirmations while the payment's funding stands", () => {
  const PAYMENT = 'pay_redeploy';
  const DEPOSIT_ADDRESS = getAddress('0x00000000000000000000000000000000000d0a02');
  const PAYER = getAddress('0x0000000000000000000000000000000000000bee');
  const SETTLEMENT = getAddress('0x0000000000000000000000000000000000005e77');
  const ASSET = `${CHAIN}/erc20:${USDC}`;
  const decider = { initialState: initialPaymentState, evolve: evolvePayment, decide: decidePayment };

  afterEach(() => jest.restoreAllMocks());

  /** The payment's stream in memory: created, paid in full, its payer screened clear (its deploy requested). */
  async function paidPayment(): Promise<{ facts: PaymentFacts; events: InMemoryEventStore }> {
    const events = new InMemoryEventStore();
    const clock = new ManualClock(new Date());
    const append = (command: TimelessPaymentCommand) =>
      handleCommand(
        events,
        paymentStreamId(PAYMENT),
        decider,
        { ...command, now: clock.now() } as PaymentCommand,
        { metadata: { merchantId: 'mer_redeploy', mode: 'test' } },
      );
    await append({
      type: 'CreateCheckout',
      paymentId: PAYMENT,
      checkoutId: 'chk_redeploy',
      merchantId: 'mer_redeploy',
      onChainId: `0x${'cd'.repeat(32)}`,
      depositAddress: DEPOSIT_ADDRESS,
      checkoutUrl: 'https://pay.example/c',
      input: { amount: '5000000', currency: 'USD', method: 'DIRECT' },
      context: {
        stablecoins: [{ asset: ASSET, chain: CHAIN, symbol: 'USDC', decimals: 6, pegCurrency: 'USD' }],
        settlementMode: 'crypto',
      },
    });
    const transfer = {
      chain: CHAIN,
      txHash: `0x${'f1'.repeat(32)}`,
      blockNumber: '1',
      logIndex: 0,
      from: PAYER,
      asset: ASSET,
      amount: '5000000',
      listed: true,
    };
    await append({ type: 'ObserveTransfer', transfer, blockTime: clock.now() });
    await append({ type: 'ConfirmTransfer', chain: CHAIN, txHash: transfer.txHash, logIndex: 0 });
    await append({ type: 'RecordScreening', result: { kind: 'clear', addresses: [PAYER] } });
    return { facts: new PaymentFacts(events, clock), events };
  }

  /** What the deposit contracts answer the worker's deploy: recorded by its transaction `txHash`. */
  function deploysAs(txHash: string): DeployRequest[] {
    const asked: DeployRequest[] = [];
    jest
      .spyOn(DepositContracts.prototype, 'merchantOnChain')
      .mockResolvedValue({ signer: PAYER, settlement: SETTLEMENT });
    jest.spyOn(DepositContracts.prototype, 'deploy').mockImplementation(async (request) => {
      asked.push(request);
      return {
        kind: 'deployed',
        txHash,
        method: request.method,
        payer: request.payer,
        payerFinalAt: new Date(),
        settlement: SETTLEMENT,
        amount: request.amount,
        authorizationExpiry: null,
      };
    });
    return asked;
  }

  const types = async (events: InMemoryEventStore) =>
    (await events.readStream(paymentStreamId(PAYMENT))).map((e) => e.type);

  it('is undone (PaymentDeploymentLost.v1: pending again) and deployed again DIRECT to the same address; the same lost receipt twice records one fact', async () => {
    const { facts, events } = await paidPayment();
    const merchants = { get: async () => ({ merchantSigner: PAYER, settlementAddress: SETTLEMENT }) };
    const { flow } = await depositFlow([], false, {}, { facts, events, merchants });
    const snapshot = (await provider.send('evm_snapshot', [])) as string;
    const orphaned = await blockWithTransaction();
    const first = deploysAs(orphaned.txHash);
    await flow.advance(PAYMENT, false);
    expect(first).toEqual([expect.objectContaining({ method: 'DIRECT', depositAddress: DEPOSIT_ADDRESS })]);
    const settled = (await events.readStream(paymentStreamId(PAYMENT))).at(-1);
    expect(settled?.type).toBe('PaymentSettled.v1');
    await flow.onPaymentEvent({
      id: settled?.id ?? '',
      topic: 'payments.payment.v1',
      key: `payment-${PAYMENT}`,
      type: 'PaymentSettled.v1',
      data: settled?.data,
    } as BusMessage);
    await provider.send('evm_revert', [snapshot]);
    await provider.send('anvil_mine', [`0x${(CONFIRMATIONS + 1).toString(16)}`]);
    const undone = async () =>
      metricValue(await register.metrics(), 'stablepay_payment_deposit_deploys_lost_total', {
        chain: CHAIN,
        outcome: 'undone',
      });
    const before = await undone();

    await flow.confirmTransfers();
    expect(await types(events)).not.toContain('PaymentDeploymentLost.v1');
    await undecidedPastTheGrace(PAYMENT);
    await flow.confirmTransfers();

    const stream = await types(events);
    expect(stream.filter((t) => t === 'PaymentDeploymentLost.v1')).toHaveLength(1);
    expect(stream).not.toContain('PaymentDeploymentConfirmed.v1');
    const { state } = await facts.load(PAYMENT);
    expect(state).toMatchObject({ phase: 'pending', deployment: null, deployRequested: true });
    const rows: unknown = await dataSource.query(
      'SELECT state FROM payment_deposit_receipts WHERE payment_id = $1',
      [PAYMENT],
    );
    expect(rows).toEqual([{ state: 'lost' }]);

    // The same lost receipt handled again (a crash before its row was closed): one fact.
    await dataSource.query(`UPDATE payment_deposit_receipts SET state = 'open' WHERE payment_id = $1`, [
      PAYMENT,
    ]);
    await flow.confirmTransfers();
    expect((await types(events)).filter((t) => t === 'PaymentDeploymentLost.v1')).toHaveLength(1);
    expect((await undone()) - before).toBe(1);

    // The fact back through the bus: deployed again, with the same method, to the same deterministic address.
    jest.restoreAllMocks();
    const again = deploysAs(`0x${'de'.repeat(32)}`);
    await flow.advance(PAYMENT, false);
    expect(again).toEqual([
      expect.objectContaining({ method: 'DIRECT', depositAddress: DEPOSIT_ADDRESS, amount: 5000000n }),
    ]);
    expect((await facts.load(PAYMENT)).state).toMatchObject({
      phase: 'settled',
      deployment: { txHash: `0x${'de'.repeat(32)}`, method: 'DIRECT' },
    });
    await dataSource.query('DELETE FROM payment_deposit_receipts WHERE payment_id = $1', [PAYMENT]);
  });
});

describe("the deposit's payer logs follow the indexer's sightings and retractions", () => {
  const payerDisputedSeen = (id: string, block: Block, txHash: string): BusMessage =>
    seen(id, 'PaymentDepositEventObserved.v1', block, txHash, {
      logIndex: 2,
      contract: DEPOSIT,
      event: 'PayerDisputed',
      args: { payer: USDC },
    });

  it('a PayerDisputed sighting is recorded with its block; the retraction of that block undoes it (RetractPayerLog)', async () => {
    const { flow, asked } = await depositFlow();
    const block = { number: 42, hash: '0x' + 'b1'.repeat(32) };
    const txHash = '0x' + 'd1'.repeat(32);
    await flow.onObservation(payerDisputedSeen('obs-dispute', block, txHash));
    await flow.onObservation({
      id: 'obs-dispute-retracted',
      topic: 'indexer.chain-observation.v1',
      key: `chain-${CHAIN}`,
      type: 'ObservationRetracted.v1',
      data: {
        chain: CHAIN,
        observationId: 'obs-dispute',
        observationType: 'PaymentDepositEventObserved.v1',
        txHash,
        logIndex: 2,
        blockNumber: '42',
        blockHash: block.hash,
        reason: 'reorg',
        forkBlockNumber: '41',
        forkBlockHash: null,
        address: DEPOSIT,
      },
    } as unknown as BusMessage);

    expect(asked.appended).toEqual([
      {
        command: {
          type: 'RecordPayerDisputed',
          chain: CHAIN,
          txHash,
          logIndex: 2,
          blockNumber: '42',
          blockHash: block.hash,
          payer: USDC,
        },
        key: `payer:${txHash}:2:${block.hash}`,
      },
      {
        command: { type: 'RetractPayerLog', chain: CHAIN, txHash, logIndex: 2, blockHash: block.hash },
        key: 'retract-payer:obs-dispute-retracted',
      },
    ]);
  });
});

describe("an operator's re-scan queues the deposit's outflows the indexer missed as its sightings are", () => {
  afterEach(() => jest.restoreAllMocks());

  /** A capture log of the deposit in `block`, as the chain answers the re-scan's log lookup. */
  const captureLog = (block: Block & { txHash: string }): DepositOutflowSeen => ({
    kind: 'captured',
    txHash: block.txHash.toLowerCase(),
    logIndex: 0,
    blockNumber: block.number,
    blockHash: block.hash.toLowerCase(),
    token: USDC,
    to: USDC,
    amount: 5n,
  });
  const rescanned = async (flow: DepositFlow, log: DepositOutflowSeen) => {
    jest.spyOn(DepositContracts.prototype, 'outflowsBetween').mockResolvedValue([log]);
    return flow.rescanOutflows('pay_reorg', {
      chain: CHAIN,
      address: DEPOSIT,
      fromBlock: log.blockNumber,
      toBlock: log.blockNumber,
    });
  };
  const rows = (txHash: string) =>
    dataSource.query('SELECT state FROM payment_deposit_outflows WHERE tx_hash = $1', [txHash.toLowerCase()]);

  it('recorded once its block has the confirmations, not before; a second re-scan queues nothing new', async () => {
    const { flow, asked } = await depositFlow();
    const block = await blockWithTransaction();
    const log = captureLog(block);
    expect(await rescanned(flow, log)).toEqual([
      expect.objectContaining({ txHash: log.txHash, status: 'queued' }),
    ]);

    await flow.confirmTransfers();
    expect(asked.recorded).toEqual([]);
    await provider.send('anvil_mine', [`0x${(CONFIRMATIONS - 1).toString(16)}`]);
    await flow.confirmTransfers();
    expect(asked.recorded).toEqual([log.txHash]);
    expect(asked.recordedBlocks).toEqual([log.blockHash]);
    expect(await rows(log.txHash)).toEqual([{ state: 'recorded' }]);

    await rescanned(flow, log);
    await flow.confirmTransfers();
    expect(asked.recorded).toEqual([log.txHash]);
    expect(await rows(log.txHash)).toEqual([{ state: 'recorded' }]);
  });

  it('queues a log the payment holds from a block a reorg took (its move mined again there), not already_recorded', async () => {
    const block = await blockWithTransaction();
    const log = captureLog(block);
    const key = `${log.txHash}#0`;
    const sighting = (blockHash: string) => ({
      outflowTxs: [log.txHash],
      outflowLogs: [key],
      outflowSightings: { [key]: { kind: 'captured', asset: USDC, amount: 5n, blockHash, logIndex: 0 } },
    });
    // Recorded from its receipt in an orphaned block; the receipt's check left it to the indexer, which missed it.
    const { flow, asked } = await depositFlow([], false, sighting(`0x${'ab'.repeat(32)}`));
    expect(await rescanned(flow, log)).toEqual([expect.objectContaining({ status: 'queued' })]);
    await provider.send('anvil_mine', [`0x${CONFIRMATIONS.toString(16)}`]);
    await flow.confirmTransfers();
    expect(asked.recordedBlocks).toEqual([log.blockHash]);

    // Held from this very block: nothing to queue.
    const held = await depositFlow([], false, sighting(log.blockHash));
    expect(await rescanned(held.flow, log)).toEqual([
      expect.objectContaining({ status: 'already_recorded' }),
    ]);
  });

  it('dropped when a reorg takes its block away (no retraction of the indexer will come for it)', async () => {
    const { flow, asked } = await depositFlow();
    const snapshot = (await provider.send('evm_snapshot', [])) as string;
    const orphaned = await blockWithTransaction();
    const log = captureLog(orphaned);
    await rescanned(flow, log);
    await provider.send('evm_revert', [snapshot]);
    await blockWithTransaction();
    await provider.send('anvil_mine', [`0x${CONFIRMATIONS.toString(16)}`]);

    await flow.confirmTransfers();
    expect(asked.recorded).toEqual([]);
    expect(await rows(log.txHash)).toEqual([{ state: 'retracted' }]);
  });
});
