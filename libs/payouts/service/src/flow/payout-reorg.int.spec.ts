import { type JsonRpcProvider, Wallet } from 'ethers';
import type { PostgresEventStore } from '@stablepay/event-store';
import type { BusMessage, ConsumeOptions, EventBus } from '@stablepay/event-bus';
import { createChainRegistry, type SanctionsScreening } from '@stablepay/evm';
import { connectTestStablecoin, payoutDepositAddress } from '@stablepay/contracts';
import {
  ANVIL_DEV_PRIVATE_KEYS,
  LOCAL_PAYOUT_OFF_RAMP,
  localChainProvider,
  startLocalChains,
  type LocalChains,
} from '@stablepay/local-chains';
import { payoutDecider, payoutObject, type PayoutEvent, type PayoutToken } from '@stablepay/payouts-domain';
import { RelayerSet } from '@stablepay/relayer';
import type { Pool } from 'pg';
import { register } from 'prom-client';
import { type PayoutsAggregates } from '../aggregates';
import type { BankAccountVault } from '../bank-accounts';
import { payoutTokens } from '../offering';
import type { PayoutChains, PayoutsConfig } from '../payouts.config';
import type { KycProvider } from '../providers/kyc-provider';
import type { OffRampProvider } from '../providers/off-ramp';
import { foldPayout } from '../read-model/objects';
import { PayoutFlowConsumer } from './payout-flow.consumer';
import { PayoutSweeper } from './payout-sweep';
import { type DepositObservationHarness, startDepositObservation } from './test-support/deposit-observation';

const MERCHANT = 'mer_reorg_int';
const OWNER = { merchantId: MERCHANT, mode: 'test' } as const;
const AMOUNT = 25_000_000n;
const now = new Date('2026-11-24T14:00:00.000Z');
const RETRACTED_AFTER_FORWARD = 'stablepay_payout_deposit_retracted_after_forward_total';

let local: LocalChains;
let relayers: RelayerSet;
let provider: JsonRpcProvider;
let sweeper: PayoutSweeper;
let token: PayoutToken;
let harness: DepositObservationHarness;
let pool: Pool;
let store: PostgresEventStore;
let aggregates: PayoutsAggregates;
let observe: ConsumeOptions['handler'];
const submitted: string[] = [];
let payouts = 0;

/** The payouts flow as a restarted process has it; `stopsAfterSweep`: killed once its sweep landed, before the fact. */
function flow(options: { stopsAfterSweep?: boolean } = {}): PayoutFlowConsumer {
  const offRamp = {
    submit: (request: { payoutId: string }) => {
      submitted.push(request.payoutId);
      return Promise.resolve({ transferId: `tr_${request.payoutId}` });
    },
  } as unknown as OffRampProvider;
  const screening: SanctionsScreening = { screen: () => Promise.resolve({ kind: 'clear' }) };
  const accounts = { account: () => Promise.resolve({ kind: 'iban', iban: 'DE89370400440532013000' }) };
  const killed = Object.assign(Object.create(sweeper) as PayoutSweeper, {
    sweep: async (...args: Parameters<PayoutSweeper['sweep']>) => {
      await sweeper.sweep(...args);
      throw new Error('killed after the sweep landed');
    },
  });
  return new PayoutFlowConsumer(
    {} as EventBus,
    store,
    aggregates,
    offRamp,
    {} as KycProvider,
    screening,
    accounts as unknown as BankAccountVault,
    options.stopsAfterSweep ? killed : sweeper,
  );
}

const usdc = () => connectTestStablecoin(token.asset.slice(token.asset.lastIndexOf(':') + 1), provider);
const retractedAfterForward = async (): Promise<number> =>
  (await register.getSingleMetric(RETRACTED_AFTER_FORWARD)?.get())?.values.find(
    (v) => v.labels['chain'] === token.chain,
  )?.value ?? 0;

interface Transfer {
  readonly hash: string;
  readonly logIndex: number;
  readonly from: string;
}

/** `amount` test USDC from anvil dev wallet `wallet` to `to`: minted, then sent (two transactions). */
async function send(wallet: number, to: string, amount: bigint): Promise<Transfer> {
  const payer = new Wallet(ANVIL_DEV_PRIVATE_KEYS[wallet] ?? '', provider);
  const coin = connectTestStablecoin(usdc().target as string, payer);
  await (await coin.mint(payer.address, amount)).wait();
  // Headroom over the estimate (as wallets add): mined again on another fork, where the address's balance may start
  // from zero, the same signed transfer costs more storage gas.
  const receipt = await (await coin.transfer(to, amount, { gasLimit: 200_000n })).wait();
  if (!receipt) throw new Error('no receipt');
  return { hash: receipt.hash, logIndex: receipt.logs[0]?.index ?? 0, from: payer.address };
}

/** An active customer: its stream, which the flow rechecks before the sweep, and its row, which the intake reads. */
async function activeCustomer(customerId: string): Promise<Customer> {
  const address = payoutDepositAddress({
    factory: local.chains[0]?.addresses.payoutDepositFactory ?? '',
    offRamp: LOCAL_PAYOUT_OFF_RAMP,
    merchantId: MERCHANT,
    customerId,
  });
  await aggregates.customer(customerId, OWNER, {
    type: 'CreateCustomer',
    id: customerId,
    input: { name: 'Ada Lovelace', email: 'a@example.com' },
    depositAddresses: [{ address, chains: [token.chain], tokens: ['USDC'] }],
    kycSessionId: `kyc_${customerId}`,
    hostedUrl: 'https://kyc.example.com',
    now,
  });
  await aggregates.customer(customerId, OWNER, {
    type: 'RecordKycOutcome',
    sessionId: `kyc_${customerId}`,
    result: { outcome: 'approved' },
    nextSessionId: `kyc_${customerId}_2`,
    now,
  });
  await pool.query(
    `INSERT INTO payout_customers (id, merchant_id, mode, status, email, deposit_address, object, revision)
     VALUES ($1, $2, 'test', 'active', 'a@example.com', $3, '{}'::jsonb, 1)`,
    [customerId, MERCHANT, address],
  );
  return { customerId, address };
}

interface Customer {
  readonly customerId: string;
  readonly address: string;
}

/** A payout of AMOUNT awaiting its deposit (stream and row), of a new active customer unless one is given. */
async function awaitingPayout(customer?: Customer): Promise<{ id: string } & Customer> {
  payouts += 1;
  const id = `po_reorg_${payouts}`;
  const { customerId, address } = customer ?? (await activeCustomer(`cus_reorg_${payouts}`));
  await aggregates.payout(id, OWNER, {
    type: 'CreatePayout',
    id,
    input: {
      customer: customerId,
      beneficiary: 'bnf_reorg',
      amount: String(AMOUNT),
      chain: token.chain,
      token: 'USDC',
    },
    context: {
      customer: { id: customerId, status: 'active', depositAddress: address },
      beneficiary: { id: 'bnf_reorg', currency: 'USD' },
      tokens: [token],
    },
    now,
  });
  const created = payoutDecider.evolve(
    payoutDecider.initialState(),
    (await store.readStream(`payout-${id}`))[0] as PayoutEvent,
  );
  // The row as the projection wrote it at creation (no projection runs here).
  await pool.query(
    `INSERT INTO payouts (id, merchant_id, mode, status, customer_id, beneficiary_id, chain, token, amount, object, revision)
     VALUES ($1, $2, 'test', 'awaiting_deposit', $3, 'bnf_reorg', $4, 'USDC', $5::numeric, $6::jsonb, 0)`,
    [id, MERCHANT, customerId, token.chain, String(AMOUNT), JSON.stringify(payoutObject(created))],
  );
  return { id, customerId, address };
}

/** The indexer's observation of a confirmed transfer to `to`, and its retraction. */
function observed(to: string, transfer: Transfer, blockHash: string) {
  const data = { chain: token.chain, txHash: transfer.hash, logIndex: transfer.logIndex, blockHash };
  return {
    observation: chainMessage(`obs_${transfer.hash}_${blockHash}`, 'Erc20TransferObserved.v1', {
      ...data,
      asset: token.asset,
      from: transfer.from,
      to,
      amount: String(AMOUNT),
    }),
    retraction: chainMessage(`ret_${transfer.hash}_${blockHash}`, 'ObservationRetracted.v1', {
      ...data,
      observationType: 'Erc20TransferObserved.v1',
      reason: 'reorg',
      address: to,
    }),
  };
}

/** The flow's message for the payout's last fact of `type` (by default its deposit), as the bus delivers it. */
async function factMessage(payoutId: string, type = 'PayoutDepositDetected.v1'): Promise<BusMessage> {
  const history = await store.readStream(`payout-${payoutId}`);
  const event = history.filter((e) => e.type === type).at(-1);
  if (!event) throw new Error(`no ${type} fact`);
  return {
    id: `evt_${payoutId}_${event.revision}`,
    topic: 'payouts.payout.v1',
    key: `payout-${payoutId}`,
    type: event.type,
    data: event.data,
    metadata: event.metadata,
    revision: event.revision,
    recordedAt: now.toISOString(),
  };
}

/**
 * A reorg back to `snapshot`: every transaction mined since is dropped (the others' answered, as signed, to be sent
 * again later), but those sent by `keep` are mined again on the new fork, as signed (a node re-includes an orphaned
 * transaction that is still valid). A dropped operator
 * transaction has its nonce taken on the new fork by another transaction of the same key (payments and subscriptions
 * share it), as when another process's transaction won that nonce.
 */
async function reorg(snapshot: string, forkBlock: number, keep: readonly string[] = []): Promise<string[]> {
  const again: string[] = [];
  const dropped: string[] = [];
  const taken: number[] = [];
  const kept = (from: string) => keep.some((k) => k.toLowerCase() === from.toLowerCase());
  for (let n = forkBlock + 1; n <= (await provider.getBlockNumber()); n++) {
    const block = await provider.getBlock(n, true);
    for (const tx of block?.prefetchedTransactions ?? []) {
      if (kept(tx.from))
        again.push((await provider.send('eth_getRawTransactionByHash', [tx.hash])) as string);
      else if (tx.from.toLowerCase() === local.operator.address.toLowerCase()) taken.push(tx.nonce);
      else dropped.push((await provider.send('eth_getRawTransactionByHash', [tx.hash])) as string);
    }
  }
  if (!(await provider.send('evm_revert', [snapshot]))) throw new Error(`evm_revert ${snapshot} failed`);
  const operator = new Wallet(local.operator.privateKey, provider);
  for (const nonce of taken) await (await operator.sendTransaction({ to: operator.address, nonce })).wait();
  for (const raw of again) await provider.send('eth_sendRawTransaction', [raw]);
  await provider.send('anvil_mine', ['0x4']);
  return dropped;
}

/** The payout's row as the projection (not run here) has it by now: a reorg comes long after the deposit fact. */
async function project(id: string): Promise<void> {
  const state = foldPayout(await store.readStream(`payout-${id}`));
  await pool.query('UPDATE payouts SET status = $2, object = $3::jsonb WHERE id = $1', [
    id,
    state.status,
    JSON.stringify(payoutObject(state)),
  ]);
}

beforeAll(async () => {
  local = await startLocalChains({ chainIds: [8453] });
  const base = local.chains[0];
  if (!base) throw new Error('no chain');
  provider = localChainProvider(base.rpcUrl, base.chainId);
  const registry = createChainRegistry({ mode: 'test', localChains: local.chains });
  const config: PayoutsConfig = {
    hostedUrl: null,
    chains: { live: createChainRegistry({ mode: 'live' }), test: registry },
    supportedChains: null,
  };
  const usdcToken = payoutTokens(config, 'test').find((t) => t.chain === base.caip2 && t.symbol === 'USDC');
  if (!usdcToken) throw new Error('no test USDC');
  token = usdcToken;
  relayers = new RelayerSet([{ caip2: base.caip2, chainId: BigInt(base.chainId), rpcUrl: base.rpcUrl }], {
    privateKey: local.operator.privateKey,
  });
  sweeper = new PayoutSweeper(relayers, {
    factory: base.addresses.payoutDepositFactory,
    offRamp: LOCAL_PAYOUT_OFF_RAMP,
  });

  harness = await startDepositObservation({
    now: () => now,
    config,
    chains: {
      enabled: true,
      payouts: { factory: base.addresses.payoutDepositFactory, offRamp: LOCAL_PAYOUT_OFF_RAMP },
      chains: [{ caip2: base.caip2 }],
    } as unknown as PayoutChains,
  });
  ({ pool, store, aggregates, observe } = harness);
}, 180_000);

afterAll(async () => {
  await harness?.stop();
  relayers?.destroy();
  provider?.destroy();
  await local?.stop();
});

/**
 * A payout (of a new customer unless one is given) funded on a fork taken after another deposit was held at its
 * customer's address (what a sweep without its deposit would take), its deposit observed.
 */
async function funded(customer?: Customer) {
  const payout = await awaitingPayout(customer);
  await send(6, payout.address, AMOUNT);
  const snapshot = (await provider.send('evm_snapshot', [])) as string;
  const forkBlock = await provider.getBlockNumber();
  const deposit = await send(7, payout.address, AMOUNT);
  const block = (await provider.getTransactionReceipt(deposit.hash))?.blockHash ?? '';
  const { observation, retraction } = observed(payout.address, deposit, block);
  await observe(observation);
  return { ...payout, snapshot, forkBlock, deposit, block, retraction };
}

/** A funded payout whose flow was killed once its sweep landed (before the fact). */
async function sweptThenKilled() {
  const payout = await funded();
  await expect(flow({ stopsAfterSweep: true }).handle(await factMessage(payout.id))).rejects.toThrow(
    /killed/,
  );
  return payout;
}

describe('payout deposit reorgs on anvil, the payouts process stopped in between', () => {
  it('the sweep landed, the process stopped before recording it, the retraction came first: the retried step flags the sweep mined again on the new fork and asks no off-ramp', async () => {
    const { id, address, snapshot, forkBlock, deposit, retraction } = await sweptThenKilled();
    expect(await usdc().balanceOf(address)).toBe(AMOUNT);

    await reorg(snapshot, forkBlock, [local.operator.address]);
    // On the new fork the deposit is gone and the sweep took the held deposit instead.
    expect(await provider.getTransactionReceipt(deposit.hash)).toBeNull();
    expect(await usdc().balanceOf(address)).toBe(0n);
    await observe(retraction);
    expect((await store.readStream(`payout-${id}`)).map((e) => e.type)).toEqual([
      'PayoutCreated.v1',
      'PayoutDepositDetected.v1',
      'PayoutDepositRetracted.v1',
    ]);

    const counted = await retractedAfterForward();
    await flow().handle(await factMessage(id));
    expect(await retractedAfterForward()).toBe(counted + 1);
    expect(submitted).not.toContain(id);
    expect((await store.readStream(`payout-${id}`)).at(-1)?.type).toBe('PayoutDepositRetracted.v1');
  }, 120_000);

  it('the flagged sweep mined again before the transfer came back: the transfer re-included after it funds the payout again, which goes to the off-ramp with that sweep, nothing sent', async () => {
    const { id, address, snapshot, forkBlock, deposit, retraction } = await sweptThenKilled();
    const lost = await reorg(snapshot, forkBlock, [local.operator.address]);
    await observe(retraction);
    await flow().handle(await factMessage(id));
    const sweep = await sweptAgain(id);

    for (const raw of lost) await provider.send('eth_sendRawTransaction', [raw]);
    const { observation, receipt } = await reincluded(address, deposit);
    expect(receipt.blockNumber).toBeGreaterThan(sweep.blockNumber);
    await observe(observation);
    const nonce = await provider.getTransactionCount(local.operator.address);
    await flow().handle(await factMessage(id));
    expect(foldPayout(await store.readStream(`payout-${id}`))).toMatchObject({
      status: 'forwarded',
      sweepTxHash: sweep.hash,
      forwardTxHash: sweep.hash,
    });
    expect(submitted).toContain(id);
    expect(await provider.getTransactionCount(local.operator.address)).toBe(nonce);
    // The sweep took the held deposit's funds ahead of the transfer, which now makes them up.
    expect(await usdc().balanceOf(address)).toBe(AMOUNT);
  }, 120_000);

  it('the sweep orphaned with the deposit and not mined again: the retried step flags nothing, sends nothing, and the held deposit stays', async () => {
    const { id, address, snapshot, forkBlock, retraction } = await sweptThenKilled();
    await reorg(snapshot, forkBlock);
    await observe(retraction);
    const counted = await retractedAfterForward();
    const nonce = await provider.getTransactionCount(local.operator.address);
    await flow().handle(await factMessage(id));
    expect(await retractedAfterForward()).toBe(counted);
    expect(submitted).not.toContain(id);
    expect(await provider.getTransactionCount(local.operator.address)).toBe(nonce);
    expect(await usdc().balanceOf(address)).toBe(AMOUNT);
  }, 120_000);
});

/**
 * A payout swept and forwarded on a fork taken after another deposit was held at its customer's address, its row as
 * the projection has it by now.
 */
async function sweptAndForwarded(customer?: Customer) {
  const payout = await funded(customer);
  await flow().handle(await factMessage(payout.id));
  await project(payout.id);
  const forwarded = foldPayout(await store.readStream(`payout-${payout.id}`));
  expect(forwarded).toMatchObject({ status: 'forwarded', forwardTxHash: forwarded.sweepTxHash });
  return { ...payout, sweepTxHash: forwarded.sweepTxHash ?? '' };
}

/** The payout's sweep as mined on the fork now (the flow's killed attempt, sent again by the reorg). */
async function sweptAgain(payoutId: string): Promise<{ hash: string; blockNumber: number }> {
  const hash = await sweeper.sweepOnChain(foldPayout(await store.readStream(`payout-${payoutId}`)), MERCHANT);
  const receipt = await provider.getTransactionReceipt(hash ?? '');
  if (!receipt) throw new Error('no sweep on this fork');
  return { hash: receipt.hash, blockNumber: receipt.blockNumber };
}

/** The same transfer mined again on the new fork, as the indexer observes it there (another block, maybe log). */
async function reincluded(address: string, deposit: Transfer) {
  const receipt = await provider.getTransactionReceipt(deposit.hash);
  if (!receipt) throw new Error('the deposit is not on the new fork');
  const again = { ...deposit, logIndex: receipt.logs[0]?.index ?? 0 };
  return { receipt, ...observed(address, again, receipt.blockHash) };
}

describe('a reorg the indexer has not reported yet', () => {
  it('the deposit gone from the chain: the sweep is not sent (it would take the held deposit) and the step is retried', async () => {
    const { id, address, snapshot, forkBlock } = await funded();
    await reorg(snapshot, forkBlock);

    const nonce = await provider.getTransactionCount(local.operator.address);
    await expect(flow().handle(await factMessage(id))).rejects.toThrow(/not on eip155:8453/);
    expect(await provider.getTransactionCount(local.operator.address)).toBe(nonce);
    expect(await usdc().balanceOf(address)).toBe(AMOUNT);
    expect(submitted).not.toContain(id);
  }, 120_000);
});

describe("a reorg orphaning a swept payout's deposit and its sweep", () => {
  it('the transfer re-included on the new fork stays with the swept payout: the next payout waiting for the same amount is not funded by it', async () => {
    const swept = await sweptAndForwarded();
    const next = await awaitingPayout(swept);
    await reorg(swept.snapshot, swept.forkBlock, [swept.deposit.from]);
    await observe(swept.retraction);
    const { observation, receipt } = await reincluded(swept.address, swept.deposit);
    expect(receipt.blockHash).not.toBe(swept.block);

    await observe(observation);
    await observe(observation);
    expect((await store.readStream(`payout-${next.id}`)).map((e) => e.type)).toEqual(['PayoutCreated.v1']);
    expect(foldPayout(await store.readStream(`payout-${swept.id}`)).deposit).toMatchObject({
      txHash: swept.deposit.hash,
    });
  }, 120_000);

  it('the orphaned sweep not mined again: nothing moves until the transfer is back on the new fork, then the sweep is redone once and recorded', async () => {
    const swept = await sweptAndForwarded();
    await reorg(swept.snapshot, swept.forkBlock, [swept.deposit.from]);
    // The new fork has the transfer again but not the sweep: the held deposit and this one are at the address.
    expect(await usdc().balanceOf(swept.address)).toBe(2n * AMOUNT);
    const offRamp = await usdc().balanceOf(LOCAL_PAYOUT_OFF_RAMP);
    const nonce = await provider.getTransactionCount(local.operator.address);
    await observe(swept.retraction);
    expect(foldPayout(await store.readStream(`payout-${swept.id}`)).orphanedSweepTxHash).toBe(
      swept.sweepTxHash,
    );
    // Before the transfer is observed again, the address's balance may be other deposits' funds: nothing is sent.
    await flow().handle(await factMessage(swept.id, 'PayoutSweepOrphaned.v1'));
    expect(await provider.getTransactionCount(local.operator.address)).toBe(nonce);

    await observe((await reincluded(swept.address, swept.deposit)).observation);
    await flow().handle(await factMessage(swept.id, 'PayoutDepositReincluded.v1'));
    const reswept = foldPayout(await store.readStream(`payout-${swept.id}`));
    expect(reswept).toMatchObject({ status: 'forwarded', orphanedSweepTxHash: null });
    expect(reswept.sweepTxHash).not.toBe(swept.sweepTxHash);
    expect(reswept.forwardTxHash).toBe(reswept.sweepTxHash);
    expect((await provider.getTransactionReceipt(reswept.sweepTxHash ?? ''))?.status).toBe(1);
    expect((await usdc().balanceOf(LOCAL_PAYOUT_OFF_RAMP)) - offRamp).toBe(AMOUNT);
    expect(await usdc().balanceOf(swept.address)).toBe(AMOUNT);

    // Redelivered, the step sends nothing more.
    const after = await provider.getTransactionCount(local.operator.address);
    await flow().handle(await factMessage(swept.id, 'PayoutDepositReincluded.v1'));
    expect(await provider.getTransactionCount(local.operator.address)).toBe(after);
    expect(await usdc().balanceOf(swept.address)).toBe(AMOUNT);
  }, 120_000);

  it('the orphaned sweep mined again on the new fork: it is recorded as it is and nothing is sent', async () => {
    const swept = await sweptAndForwarded();
    await reorg(swept.snapshot, swept.forkBlock, [swept.deposit.from, local.operator.address]);
    await observe(swept.retraction);
    const nonce = await provider.getTransactionCount(local.operator.address);
    await flow().handle(await factMessage(swept.id, 'PayoutSweepOrphaned.v1'));
    const events = await store.readStream(`payout-${swept.id}`);
    expect(events.at(-1)).toMatchObject({
      type: 'PayoutDepositSwept.v1',
      data: { txHash: swept.sweepTxHash },
    });
    expect(foldPayout(events).orphanedSweepTxHash).toBeNull();
    expect(await provider.getTransactionCount(local.operator.address)).toBe(nonce);
    expect(await usdc().balanceOf(swept.address)).toBe(AMOUNT);
  }, 120_000);
});

function chainMessage(id: string, type: string, data: Record<string, unknown>): BusMessage {
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
