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
    await pool.query(
      `INSERT INTO payout_customers (id, merchant_id, mode, status, email, deposit_address, object, revision)
       VALUES ('cus_retract', $1, 'test', 'active', 'a@example.com', $2, '{}'::jsonb, 1)`,
      [MERCHANT, ADDRESS],
    );
    const aggregates = new PayoutsAggregates(store, { now: () => now });
    await aggregates.payout(
      'po_retract',
      { merchantId: MERCHANT, mode: 'test' },
      {
        type: 'CreatePayout',
        id: 'po_retract',
        input: {
          customer: 'cus_retract',
          beneficiary: 'bnf_retract',
          amount: AMOUNT,
          chain: token.chain,
          token: 'USDC',
        },
        context: {
          customer: { id: 'cus_retract', status: 'active', depositAddress: ADDRESS },
          beneficiary: { id: 'bnf_retract', currency: 'USD' },
          tokens: [token],
        },
        now,
      },
    );
    // The row as the projection wrote it at creation; it never sees the deposit here.
    const created = payoutDecider.evolve(
      payoutDecider.initialState(),
      (await store.readStream('payout-po_retract'))[0] as PayoutEvent,
    );
    await pool.query(
      `INSERT INTO payouts (id, merchant_id, mode, status, customer_id, beneficiary_id, chain, token, amount, object, revision)
       VALUES ('po_retract', $1, 'test', 'awaiting_deposit', 'cus_retract', 'bnf_retract', $2, 'USDC', $3::numeric, $4::jsonb, 0)`,
      [MERCHANT, token.chain, AMOUNT, JSON.stringify(payoutObject(created))],
    );
    const observation = { chain: token.chain, txHash: TX, logIndex: 0, blockHash: BLOCK };
    await observe(
      message('obs_1', 'Erc20TransferObserved.v1', {
        ...observation,
        blockNumber: '10',
        asset: token.asset,
        contract: token.asset.slice(token.asset.lastIndexOf(':') + 1),
        from: SENDER,
        to: ADDRESS,
        amount: AMOUNT,
      }),
    );
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
});

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
