import { type JsonRpcProvider, Transaction, Wallet } from 'ethers';
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
/** The off-ramp transfers whose status was asked (each is reported completed). */
const asked: string[] = [];
let payouts = 0;

/**
 * The payouts flow as a restarted process has it; `stopsAfterSweep`: killed once its sweep landed, before the fact;
 * `offRampDown`: the off-ramp refuses the transfer (the step is retried later); `with`: another sweeper (a rotated
 * off-ramp, a short lookback).
 */
function flow(
  options: {
    stopsAfterSweep?: boolean;
    offRampDown?: boolean;
    with?: PayoutSweeper;
    /** A sender the sanctions screening matches. */
    flags?: string;
  } = {},
): PayoutFlowConsumer {
  const used = options.with ?? sweeper;
  const offRamp = {
    submit: (request: { payoutId: string }) => {
      if (options.offRampDown) return Promise.reject(new Error('off-ramp unavailable'));
      submitted.push(request.payoutId);
      return Promise.resolve({ transferId: `tr_${request.payoutId}` });
    },
    status: (transferId: string) => {
      asked.push(transferId);
      return Promise.resolve({ state: 'completed', fiatAmount: '2500' });
    },
  } as unknown as OffRampProvider;
  const screening: SanctionsScreening = {
    screen: ([address]) =>
      Promise.resolve(
        options.flags !== undefined && address?.toLowerCase() === options.flags.toLowerCase()
          ? { kind: 'match', address }
          : { kind: 'clear' },
      ),
  };
  const accounts = { account: () => Promise.resolve({ kind: 'iban', iban: 'DE89370400440532013000' }) };
  const killed = Object.assign(Object.create(used) as PayoutSweeper, {
    sweep: async (...args: Parameters<PayoutSweeper['sweep']>) => {
      await used.sweep(...args);
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
    options.stopsAfterSweep ? killed : used,
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
      'PayoutSweepSent.v1',
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

describe('a payout whose sweep landed without its deposit, funded afterwards by another transfer', () => {
  it("screens that transfer's sender before the payout goes on: a match fails it sender_flagged, the off-ramp not asked and the transfer held at the address", async () => {
    const { id, address, snapshot, forkBlock, retraction } = await sweptThenKilled();
    await reorg(snapshot, forkBlock, [local.operator.address]);
    await observe(retraction);
    await project(id);
    await flow().handle(await factMessage(id));

    const other = await send(8, address, AMOUNT);
    const block = (await provider.getTransactionReceipt(other.hash))?.blockHash ?? '';
    await observe(observed(address, other, block).observation);
    expect(foldPayout(await store.readStream(`payout-${id}`)).deposit?.txHash).toBe(other.hash);

    await flow({ flags: other.from }).handle(await factMessage(id));
    expect(foldPayout(await store.readStream(`payout-${id}`))).toMatchObject({
      status: 'failed',
      failureReason: 'sender_flagged',
    });
    expect(submitted).not.toContain(id);
    expect(await usdc().balanceOf(address)).toBe(AMOUNT);
  }, 120_000);
});

describe('two payouts of one customer and amount, both deposits retracted, the newer one swept before the process stopped', () => {
  it("the newer payout's transfer re-included on the new fork goes back to it, not to the older payout waiting for the same amount, and it goes to the off-ramp with its sweep", async () => {
    const older = await awaitingPayout();
    const newer = await awaitingPayout(older);
    await send(6, older.address, AMOUNT);
    const snapshot = (await provider.send('evm_snapshot', [])) as string;
    const forkBlock = await provider.getBlockNumber();
    const fund = async (wallet: number) => {
      const transfer = await send(wallet, older.address, AMOUNT);
      const block = (await provider.getTransactionReceipt(transfer.hash))?.blockHash ?? '';
      const messages = observed(older.address, transfer, block);
      await observe(messages.observation);
      return { transfer, ...messages };
    };
    const olderDeposit = await fund(5);
    const newerDeposit = await fund(7);
    expect(foldPayout(await store.readStream(`payout-${newer.id}`)).deposit?.txHash).toBe(
      newerDeposit.transfer.hash,
    );
    await expect(flow({ stopsAfterSweep: true }).handle(await factMessage(newer.id))).rejects.toThrow(
      /killed/,
    );

    const lost = await reorg(snapshot, forkBlock, [local.operator.address]);
    await observe(olderDeposit.retraction);
    await observe(newerDeposit.retraction);
    await project(older.id);
    await project(newer.id);
    await flow().handle(await factMessage(newer.id));

    // Only the newer payout's transfer comes back (the older one's sender spent it elsewhere).
    for (const raw of lost)
      if (Transaction.from(raw).from?.toLowerCase() === newerDeposit.transfer.from.toLowerCase())
        await provider.send('eth_sendRawTransaction', [raw]);
    await provider.send('anvil_mine', ['0x1']);
    await observe((await reincluded(older.address, newerDeposit.transfer)).observation);

    expect((await store.readStream(`payout-${older.id}`)).at(-1)?.type).toBe('PayoutDepositRetracted.v1');
    expect(foldPayout(await store.readStream(`payout-${newer.id}`)).deposit?.txHash).toBe(
      newerDeposit.transfer.hash,
    );
    const nonce = await provider.getTransactionCount(local.operator.address);
    await flow().handle(await factMessage(newer.id));
    expect(foldPayout(await store.readStream(`payout-${newer.id}`))).toMatchObject({ status: 'forwarded' });
    expect(await provider.getTransactionCount(local.operator.address)).toBe(nonce);
    // The sweep took the held deposit's funds ahead of the transfer, which now makes them up.
    expect(await usdc().balanceOf(older.address)).toBe(AMOUNT);
  }, 120_000);
});

describe("a sweep still in the node's pool when the stopped flow is retried, its deposit retracted meanwhile", () => {
  it('the retry finds it by its recorded hash and replaces it by a no-op at its nonce: the deposit held at the address stays, nothing is flagged or sent', async () => {
    const base = local.chains[0];
    if (!base) throw new Error('no chain');
    // The process that stops: its receipt wait ends at once, its sweep left in the pool.
    const impatient = new RelayerSet(
      [{ caip2: base.caip2, chainId: BigInt(base.chainId), rpcUrl: base.rpcUrl }],
      { privateKey: local.operator.privateKey, receiptTimeoutMs: 200 },
    );
    const stopping = new PayoutSweeper(impatient, {
      factory: base.addresses.payoutDepositFactory,
      offRamp: LOCAL_PAYOUT_OFF_RAMP,
    });
    const { id, address, snapshot, retraction } = await funded();
    await provider.send('evm_setAutomine', [false]);
    try {
      await expect(flow({ with: stopping }).handle(await factMessage(id))).rejects.toThrow(/receipt_timeout/);
      const [sent] = foldPayout(await store.readStream(`payout-${id}`)).sentSweepTxHashes;
      const raw = (await provider.send('eth_getRawTransactionByHash', [sent])) as string;

      // The reorg: a longer fork without the deposit, the sweep still waiting in the pool.
      if (!(await provider.send('evm_revert', [snapshot]))) throw new Error('evm_revert failed');
      await provider.send('anvil_dropAllTransactions', []);
      await provider.send('anvil_mine', ['0x4']);
      await provider.send('eth_sendRawTransaction', [raw]);
      await observe(retraction);
      expect(foldPayout(await store.readStream(`payout-${id}`)).status).toBe('awaiting_deposit');

      const counted = await retractedAfterForward();
      await expect(flow().handle(await factMessage(id))).rejects.toThrow(/replaced by the no-op/);
      expect(await retractedAfterForward()).toBe(counted);

      // The next block has the no-op at the sweep's nonce: the sweep can never land, the held deposit stays.
      await provider.send('anvil_mine', ['0x1']);
      expect(await provider.getTransactionReceipt(sent ?? '')).toBeNull();
      expect(await provider.getTransactionCount(local.operator.address, 'latest')).toBe(
        Transaction.from(raw).nonce + 1,
      );
      expect(await usdc().balanceOf(address)).toBe(AMOUNT);
      await flow().handle(await factMessage(id));
      expect(await retractedAfterForward()).toBe(counted);
      expect(submitted).not.toContain(id);
    } finally {
      await provider.send('evm_setAutomine', [true]);
      impatient.destroy();
    }
  }, 120_000);
});

describe('the flow retried long after the sweep (more blocks than the log lookback below the head)', () => {
  it('the sweep mined again before its re-included transfer is still found, flagged and then forwarded: the lookup starts at the payout, not a window below the head', async () => {
    const LOOKBACK = 8;
    const base = local.chains[0];
    const shortSight = new PayoutSweeper(
      relayers,
      { factory: base?.addresses.payoutDepositFactory ?? '', offRamp: LOCAL_PAYOUT_OFF_RAMP },
      undefined,
      [],
      LOOKBACK,
    );
    const { id, address, snapshot, forkBlock, deposit, retraction } = await sweptThenKilled();
    const lost = await reorg(snapshot, forkBlock, [local.operator.address]);
    await observe(retraction);
    await provider.send('anvil_mine', [`0x${(3 * LOOKBACK).toString(16)}`]);

    const counted = await retractedAfterForward();
    await flow({ with: shortSight }).handle(await factMessage(id));
    expect(await retractedAfterForward()).toBe(counted + 1);

    for (const raw of lost) await provider.send('eth_sendRawTransaction', [raw]);
    await provider.send('anvil_mine', [`0x${(3 * LOOKBACK).toString(16)}`]);
    const { observation } = await reincluded(address, deposit);
    await observe(observation);
    await flow({ with: shortSight }).handle(await factMessage(id));
    const sweep = await sweptAgain(id);
    expect(foldPayout(await store.readStream(`payout-${id}`))).toMatchObject({
      status: 'forwarded',
      forwardTxHash: sweep.hash,
    });
  }, 120_000);
});

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
    expect(reswept).toMatchObject({ status: 'completed', orphanedSweepTxHash: null });
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
    expect(events.filter((e) => e.type === 'PayoutDepositSwept.v1').at(-1)).toMatchObject({
      data: { txHash: swept.sweepTxHash },
    });
    expect(foldPayout(events)).toMatchObject({ orphanedSweepTxHash: null, status: 'completed' });
    expect(await provider.getTransactionCount(local.operator.address)).toBe(nonce);
    expect(await usdc().balanceOf(swept.address)).toBe(AMOUNT);
  }, 120_000);
});

describe("the off-ramp's report on a forwarded payout whose sweep a reorg orphaned", () => {
  it('is not recorded (no completion for crypto the off-ramp may never get) until the sweep is redone on the new fork, then the payout completes', async () => {
    const swept = await sweptAndForwarded();
    await reorg(swept.snapshot, swept.forkBlock, [swept.deposit.from]);
    await observe(swept.retraction);

    await flow().handle(await factMessage(swept.id, 'PayoutForwarded.v1'));
    expect(asked).not.toContain(`tr_${swept.id}`);
    expect(foldPayout(await store.readStream(`payout-${swept.id}`)).status).toBe('forwarded');

    await observe((await reincluded(swept.address, swept.deposit)).observation);
    await flow().handle(await factMessage(swept.id, 'PayoutDepositReincluded.v1'));
    const settled = foldPayout(await store.readStream(`payout-${swept.id}`));
    expect(settled).toMatchObject({ status: 'completed', orphanedSweepTxHash: null, fiatAmount: '2500' });
    expect(settled.sweepTxHash).not.toBe(swept.sweepTxHash);
  }, 120_000);
});

/** The sweeper of a process configured with another off-ramp (PAYOUT_OFF_RAMP_ADDRESS rotated): today's addresses retired. */
function rotatedSweeper(): PayoutSweeper {
  return new PayoutSweeper(relayers, {
    factory: local.chains[0]?.addresses.payoutDepositFactory ?? '',
    offRamp: Wallet.createRandom().address,
  });
}

describe('a sweep that landed before the process stopped, PAYOUT_OFF_RAMP_ADDRESS rotated before the retry', () => {
  it("the retry finds the sweep at the payout's own (now retired) address and forwards the payout with it, nothing sent, not failing it held", async () => {
    const rotated = rotatedSweeper();
    const { id, address } = await funded();
    await expect(flow({ stopsAfterSweep: true }).handle(await factMessage(id))).rejects.toThrow(/killed/);
    const sweep = await sweptAgain(id);
    const nonce = await provider.getTransactionCount(local.operator.address);

    await flow({ with: rotated }).handle(await factMessage(id));
    expect(foldPayout(await store.readStream(`payout-${id}`))).toMatchObject({
      status: 'forwarded',
      failureReason: null,
      forwardTxHash: sweep.hash,
    });
    expect(await provider.getTransactionCount(local.operator.address)).toBe(nonce);
    expect(await usdc().balanceOf(address)).toBe(AMOUNT);
  }, 120_000);
});

describe('an orphaned sweep whose deposit comes back after PAYOUT_OFF_RAMP_ADDRESS was rotated', () => {
  it('is not redone (its address is retired: refused for ever): the payout not forwarded yet fails deposit_address_retired, nothing sent, the funds stay at the address', async () => {
    const rotated = rotatedSweeper();
    const payout = await funded();
    await expect(flow({ offRampDown: true }).handle(await factMessage(payout.id))).rejects.toThrow(
      /off-ramp unavailable/,
    );
    await project(payout.id);
    await reorg(payout.snapshot, payout.forkBlock, [payout.deposit.from]);
    await observe(payout.retraction);
    await observe((await reincluded(payout.address, payout.deposit)).observation);
    const nonce = await provider.getTransactionCount(local.operator.address);

    await flow({ with: rotated }).handle(await factMessage(payout.id, 'PayoutDepositReincluded.v1'));
    expect(foldPayout(await store.readStream(`payout-${payout.id}`))).toMatchObject({
      status: 'failed',
      failureReason: 'deposit_address_retired',
    });
    expect(await provider.getTransactionCount(local.operator.address)).toBe(nonce);
    expect(await usdc().balanceOf(payout.address)).toBe(2n * AMOUNT);
    expect(submitted).not.toContain(payout.id);
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
