import type { PostgresEventStore } from '@stablepay/event-store';
import type { BusMessage, ConsumeOptions } from '@stablepay/event-bus';
import { createChainRegistry } from '@stablepay/evm';
import { payoutDecider, payoutObject, type PayoutEvent } from '@stablepay/payouts-domain';
import type { Pool } from 'pg';
import { PayoutsAggregates } from '../aggregates';
import { payoutTokens } from '../offering';
import type { PayoutChains, PayoutsConfig } from '../payouts.config';
import { type DepositObservationHarness, startDepositObservation } from './test-support/deposit-observation';

const MERCHANT = 'mer_retract_int';
const ADDRESS = '0x3333333333333333333333333333333333333333';
const SENDER = '0x4444444444444444444444444444444444444444';
const TX = `0x${'a'.repeat(64)}`;
const BLOCK = `0x${'b'.repeat(64)}`;
const NEW_BLOCK = `0x${'c'.repeat(64)}`;
const BATCH_TX = `0x${'d'.repeat(64)}`;
const BATCH_ADDRESS = '0x5555555555555555555555555555555555555555';
const SWEPT_TX = `0x${'f'.repeat(64)}`;
const SWEPT_ADDRESS = '0x6666666666666666666666666666666666666666';
const RESCAN_TX = `0x${'9'.repeat(64)}`;
const RESCAN_ADDRESS = '0x7777777777777777777777777777777777777777';
const AMOUNT = '25000000';
const now = new Date('2026-11-24T07:00:00.000Z');
// The live registry's tokens stand in for test mode's (which needs local chains): only the token's chain matters here.
const registry = createChainRegistry({ mode: 'live' });
const config: PayoutsConfig = {
  hostedUrl: null,
  chains: { live: registry, test: registry },
  supportedChains: null,
};
const token = payoutTokens(config, 'test').find((t) => t.symbol === 'USDC');

let harness: DepositObservationHarness;
let pool: Pool;
let store: PostgresEventStore;
let observe: ConsumeOptions['handler'];

/**
 * A reorg's retraction handled before the payouts read model projected the deposit it retracts (the projection runs
 * on its own, behind the deposit consumer): the payout is still found, by the deposit's claim, and waits for a
 * deposit again, so the flow sweeps nothing for a deposit the chain no longer has. No projection runs here: the
 * read model shows the payout as created, awaiting its deposit, as a lagging projection would.
 */
describe('PayoutChainDeposits: a retraction ahead of the read model', () => {
  beforeAll(async () => {
    harness = await startDepositObservation({
      now: () => now,
      config,
      chains: {
        enabled: true,
        payouts: { factory: ADDRESS, offRamp: ADDRESS },
        chains: [{ caip2: token?.chain }],
      } as unknown as PayoutChains,
    });
    ({ pool, store, observe } = harness);
  });

  afterAll(async () => {
    await harness?.stop();
  });

  it('given a deposit recorded but not projected yet, when its block is retracted, then the payout awaits a deposit again', async () => {
    if (!token) throw new Error('no test-mode USDC');
    await seedCustomer('cus_retract', ADDRESS);
    await seedPayout('po_retract', 'cus_retract', token);
    const observation = { chain: token.chain, txHash: TX, logIndex: 0, blockHash: BLOCK };
    await observe(transfer('obs_1', { ...observation, to: ADDRESS }, token));
    expect((await store.readStream('payout-po_retract')).map((e) => e.type)).toEqual([
      'PayoutCreated.v1',
      'PayoutDepositDetected.v1',
    ]);

    await observe(
      message('ret_1', 'ObservationRetracted.v1', {
        ...observation,
        observationId: 'obs_1',
        observationType: 'Erc20TransferObserved.v1',
        blockNumber: '10',
        reason: 'reorg',
        address: ADDRESS,
      }),
    );
    const events = await store.readStream('payout-po_retract');
    expect(events.at(-1)).toMatchObject({ type: 'PayoutDepositRetracted.v1', data: { txHash: TX } });
    // A redelivered retraction appends nothing more.
    await observe(
      message('ret_1', 'ObservationRetracted.v1', {
        ...observation,
        observationId: 'obs_1',
        observationType: 'Erc20TransferObserved.v1',
        address: ADDRESS,
      }),
    );
    expect(await store.readStream('payout-po_retract')).toHaveLength(events.length);
  });

  it('given a USDC transfer retracted from its payout, when a USDT transfer of the same transaction, sender and amount arrives on the new fork, then the USDT payout takes it, not the USDC one', async () => {
    // A batch sender's transaction paying the customer in two tokens: the USDC log funded the USDC payout, a reorg
    // took the block, and the USDT log is the first of the transaction seen on the new fork.
    const { usdc, usdt, usdcLog } = await twoTokenPayouts('batch', BATCH_ADDRESS, BATCH_TX);
    await observe(transfer('batch_obs_1', usdcLog, usdc));
    await observe(retraction('batch_ret_1', 'batch_obs_1', usdcLog));
    expect((await store.readStream('payout-po_batch_usdc')).at(-1)?.type).toBe('PayoutDepositRetracted.v1');

    await observe(transfer('batch_obs_2', { ...usdcLog, logIndex: 1, blockHash: NEW_BLOCK }, usdt));

    expect((await store.readStream('payout-po_batch_usdc')).at(-1)?.type).toBe('PayoutDepositRetracted.v1');
    expect((await store.readStream('payout-po_batch_usdt')).at(-1)).toMatchObject({
      type: 'PayoutDepositDetected.v1',
      data: { txHash: BATCH_TX, logIndex: 1, amount: AMOUNT },
    });
  });

  it('given a swept USDC payout whose transfer a reorg orphaned, when a USDT transfer of the same transaction, sender and amount arrives on the new fork, then it does not bring the USDC payout its deposit back: the USDT payout takes it', async () => {
    const { usdc, usdt, usdcLog } = await twoTokenPayouts('swept', SWEPT_ADDRESS, SWEPT_TX);
    await observe(transfer('swept_obs_1', usdcLog, usdc));
    await harness.aggregates.payout(
      'po_swept_usdc',
      { merchantId: MERCHANT, mode: 'test' },
      { type: 'RecordSwept', txHash: `0x${'e'.repeat(64)}`, now },
    );
    // The read model as the projection leaves a swept payout (keptBySweptPayout finds it by its deposit's transaction).
    await pool.query(
      `UPDATE payouts SET status = 'deposit_detected', object = jsonb_set(object, '{deposit}', $2::jsonb) WHERE id = $1`,
      ['po_swept_usdc', JSON.stringify({ tx_hash: SWEPT_TX })],
    );
    await observe(retraction('swept_ret_1', 'swept_obs_1', usdcLog));
    expect((await store.readStream('payout-po_swept_usdc')).at(-1)?.type).toBe('PayoutSweepOrphaned.v1');

    await observe(transfer('swept_obs_2', { ...usdcLog, blockHash: NEW_BLOCK }, usdt));

    expect((await store.readStream('payout-po_swept_usdc')).at(-1)?.type).toBe('PayoutSweepOrphaned.v1');
    expect((await store.readStream('payout-po_swept_usdt')).at(-1)).toMatchObject({
      type: 'PayoutDepositDetected.v1',
      data: { txHash: SWEPT_TX, logIndex: 1, amount: AMOUNT },
    });
  });

  it("given a payout holding a transfer claimed without its block, when an operator's re-scan publishes that log again under a new id and with its block, then the next payout waiting for the same amount is not funded by it", async () => {
    if (!token) throw new Error('no test-mode USDC');
    await seedCustomer('cus_rescan', RESCAN_ADDRESS);
    await seedPayout('po_rescan_held', 'cus_rescan', token);
    // Delivered before observations carried their block: claimed under the key without it.
    const log = { chain: token.chain, txHash: RESCAN_TX, logIndex: 2, to: RESCAN_ADDRESS };
    const first = transfer('rescan_obs_1', { ...log, blockHash: BLOCK }, token);
    delete (first.data as Record<string, unknown>)['blockHash'];
    await observe(first);
    expect((await store.readStream('payout-po_rescan_held')).at(-1)?.type).toBe('PayoutDepositDetected.v1');
    // The read model as the projection left it, long before the re-scan.
    await pool.query(
      `UPDATE payouts SET status = 'deposit_detected', object = jsonb_set(object, '{deposit}', $2::jsonb) WHERE id = $1`,
      ['po_rescan_held', JSON.stringify({ tx_hash: RESCAN_TX })],
    );
    await seedPayout('po_rescan_next', 'cus_rescan', token);

    await observe(transfer('rescan_obs_1@rescan-1', { ...log, blockHash: BLOCK }, token));

    expect((await store.readStream('payout-po_rescan_next')).map((e) => e.type)).toEqual([
      'PayoutCreated.v1',
    ]);
    expect((await store.readStream('payout-po_rescan_held')).map((e) => e.type)).toEqual([
      'PayoutCreated.v1',
      'PayoutDepositDetected.v1',
    ]);
  });
});

type PayoutToken = NonNullable<typeof token>;

/** A customer with a USDC and a USDT payout of AMOUNT, and the USDC log of `txHash` paying its address. */
async function twoTokenPayouts(name: string, address: string, txHash: string) {
  const usdc = token;
  const usdt = payoutTokens(config, 'test').find((t) => t.symbol === 'USDT' && t.chain === usdc?.chain);
  if (!usdc || !usdt) throw new Error('no test-mode USDC and USDT on one chain');
  await seedCustomer(`cus_${name}`, address);
  await seedPayout(`po_${name}_usdc`, `cus_${name}`, usdc);
  await seedPayout(`po_${name}_usdt`, `cus_${name}`, usdt);
  return { usdc, usdt, usdcLog: { chain: usdc.chain, txHash, logIndex: 1, blockHash: BLOCK, to: address } };
}

/** The indexer's retraction of the observation `observationId` of `log` (its block orphaned by a reorg). */
function retraction(
  id: string,
  observationId: string,
  log: { chain: string; txHash: string; logIndex: number; blockHash: string; to: string },
): BusMessage {
  return message(id, 'ObservationRetracted.v1', {
    ...log,
    observationId,
    observationType: 'Erc20TransferObserved.v1',
    blockNumber: '10',
    reason: 'reorg',
    address: log.to,
  });
}

async function seedCustomer(id: string, address: string): Promise<void> {
  await pool.query(
    `INSERT INTO payout_customers (id, merchant_id, mode, status, email, deposit_address, object, revision)
     VALUES ($1, $2, 'test', 'active', 'a@example.com', $3, '{}'::jsonb, 1)`,
    [id, MERCHANT, address],
  );
}

/** A payout of AMOUNT awaiting its deposit, and its row as the projection wrote it at creation (it sees no more). */
async function seedPayout(id: string, customerId: string, payoutToken: PayoutToken): Promise<void> {
  const aggregates = new PayoutsAggregates(store, { now: () => now });
  const customer = (
    await pool.query<{ deposit_address: string }>(
      'SELECT deposit_address FROM payout_customers WHERE id = $1',
      [customerId],
    )
  ).rows[0];
  await aggregates.payout(
    id,
    { merchantId: MERCHANT, mode: 'test' },
    {
      type: 'CreatePayout',
      id,
      input: {
        customer: customerId,
        beneficiary: 'bnf_retract',
        amount: AMOUNT,
        chain: payoutToken.chain,
        token: payoutToken.symbol,
      },
      context: {
        customer: { id: customerId, status: 'active', depositAddress: customer?.deposit_address ?? '' },
        beneficiary: { id: 'bnf_retract', currency: 'USD' },
        tokens: [payoutToken],
      },
      now,
    },
  );
  const created = payoutDecider.evolve(
    payoutDecider.initialState(),
    (await store.readStream(`payout-${id}`))[0] as PayoutEvent,
  );
  await pool.query(
    `INSERT INTO payouts (id, merchant_id, mode, status, customer_id, beneficiary_id, chain, token, amount, object, revision)
     VALUES ($1, $2, 'test', 'awaiting_deposit', $3, 'bnf_retract', $4, $5, $6::numeric, $7::jsonb, 0)`,
    [
      id,
      MERCHANT,
      customerId,
      payoutToken.chain,
      payoutToken.symbol,
      AMOUNT,
      JSON.stringify(payoutObject(created)),
    ],
  );
}

function transfer(
  id: string,
  log: { chain: string; txHash: string; logIndex: number; blockHash: string; to: string },
  transferred: PayoutToken,
): BusMessage {
  return message(id, 'Erc20TransferObserved.v1', {
    ...log,
    blockNumber: '10',
    asset: transferred.asset,
    contract: transferred.asset.slice(transferred.asset.lastIndexOf(':') + 1),
    from: SENDER,
    amount: AMOUNT,
  });
}

function message(id: string, type: string, data: Record<string, unknown>): BusMessage {
  return {
    id,
    topic: 'indexer.chain-observation.v1',
    key: `chain-${String(data['chain'])}`,
    type,
    data,
    metadata: {},
    revision: 0,
    recordedAt: now.toISOString(),
  };
}
