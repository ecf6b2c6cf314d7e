import { type JsonRpcProvider, Wallet } from 'ethers';
import { connectTestStablecoin, payoutDepositAddress } from '@stablepay/contracts';
import { initialPayoutState, type PayoutState } from '@stablepay/payouts-domain';
import {
  ANVIL_DEV_PRIVATE_KEYS,
  LOCAL_PAYOUT_OFF_RAMP,
  localChainProvider,
  startLocalChains,
  type LocalChains,
} from '@stablepay/local-chains';
import { RelayerSet } from '@stablepay/relayer';
import { register } from 'prom-client';
import { PayoutSweeper } from './payout-sweep';

const BASE = 'eip155:8453';
const MERCHANT = 'mer_sweep_int';

let local: LocalChains;
let relayers: RelayerSet;
let provider: JsonRpcProvider;
let sweeper: PayoutSweeper;
let usdc: string;
let customers = 0;

/**
 * A payout whose deposit of `amount` test USDC was sent on chain to its customer's clone address (a new customer, or
 * `customerId`'s: a customer's payouts share its address).
 */
async function fundedPayout(amount: bigint, customerId = `cus_sweep_${customers + 1}`): Promise<PayoutState> {
  customers += 1;
  const base = local.chains[0];
  if (!base) throw new Error('no chain');
  const address = payoutDepositAddress({
    factory: base.addresses.payoutDepositFactory,
    offRamp: LOCAL_PAYOUT_OFF_RAMP,
    merchantId: MERCHANT,
    customerId,
  });
  const payer = new Wallet(ANVIL_DEV_PRIVATE_KEYS[5] ?? '', provider);
  const coin = connectTestStablecoin(usdc, payer);
  await (await coin.mint(payer.address, amount)).wait();
  const receipt = await (await coin.transfer(address, amount)).wait();
  if (!receipt) throw new Error('no receipt');
  return {
    ...initialPayoutState(),
    exists: true,
    id: `po_sweep_${customers}`,
    customerId,
    depositAddress: address,
    token: { chain: BASE, symbol: 'USDC', asset: `${BASE}/erc20:${usdc}`, decimals: 6 },
    status: 'deposit_detected',
    deposit: {
      txHash: receipt.hash,
      from: payer.address,
      amount: String(amount),
      detectedAt: new Date(0).toISOString(),
    },
  };
}

function depositOf(payout: PayoutState): NonNullable<PayoutState['deposit']> {
  if (!payout.deposit) throw new Error('no deposit');
  return payout.deposit;
}
const balance = (address: string) => connectTestStablecoin(usdc, provider).balanceOf(address);
const failures = async () =>
  (await register.getSingleMetric('stablepay_payout_sweeps_total')?.get())?.values.find(
    (v) => v.labels['outcome'] === 'failed',
  )?.value ?? 0;

beforeAll(async () => {
  local = await startLocalChains({ chainIds: [8453] });
  const base = local.chains[0];
  if (!base) throw new Error('no chain');
  provider = localChainProvider(base.rpcUrl, base.chainId);
  usdc = base.addresses.stablecoins.USDC;
  relayers = new RelayerSet([{ caip2: BASE, chainId: BigInt(base.chainId), rpcUrl: base.rpcUrl }], {
    privateKey: local.operator.privateKey,
  });
  sweeper = new PayoutSweeper(relayers, {
    factory: base.addresses.payoutDepositFactory,
    offRamp: LOCAL_PAYOUT_OFF_RAMP,
  });
}, 120_000);
afterAll(async () => {
  relayers?.destroy();
  provider?.destroy();
  await local?.stop();
});

describe('PayoutSweeper on anvil (the payout flow forward step)', () => {
  it('sweeps the deposit to the off-ramp, deploying the clone, and answers the mined transaction', async () => {
    const payout = await fundedPayout(25_000_000n);
    const before = await balance(LOCAL_PAYOUT_OFF_RAMP);
    const txHash = await sweeper.sweep(payout, MERCHANT);
    expect((await provider.getTransactionReceipt(txHash ?? ''))?.status).toBe(1);
    expect(await balance(payout.depositAddress)).toBe(0n);
    expect((await balance(LOCAL_PAYOUT_OFF_RAMP)) - before).toBe(25_000_000n);
  });

  it('a retry after a crash between the transaction and the fact answers the first sweep, sending nothing', async () => {
    const payout = await fundedPayout(7_000_000n);
    const first = await sweeper.sweep(payout, MERCHANT);
    const nonce = await provider.getTransactionCount(local.operator.address);
    expect(await sweeper.sweep(payout, MERCHANT)).toBe(first);
    expect(await provider.getTransactionCount(local.operator.address)).toBe(nonce);
  });

  it("moves only the payout's deposit: held funds at the customer's address stay there", async () => {
    // A flagged sender's deposit (or one no payout waits for): never swept, so it must outlive the next payout's sweep.
    const held = await fundedPayout(9_000_000n);
    const payout = await fundedPayout(4_000_000n, held.customerId);
    const before = await balance(LOCAL_PAYOUT_OFF_RAMP);
    await sweeper.sweep(payout, MERCHANT);
    expect(await balance(payout.depositAddress)).toBe(9_000_000n);
    expect((await balance(LOCAL_PAYOUT_OFF_RAMP)) - before).toBe(4_000_000n);
  });

  it('two payouts of one customer with the same amount are two sweeps, and each retry answers its own', async () => {
    const first = await fundedPayout(5_000_000n);
    const second = await fundedPayout(5_000_000n, first.customerId);
    const firstTx = await sweeper.sweep(first, MERCHANT);
    const secondTx = await sweeper.sweep(second, MERCHANT);
    expect(secondTx).not.toBe(firstTx);
    expect(await balance(first.depositAddress)).toBe(0n);
    const nonce = await provider.getTransactionCount(local.operator.address);
    expect(await sweeper.sweep(second, MERCHANT)).toBe(secondTx);
    expect(await sweeper.sweep(first, MERCHANT)).toBe(firstTx);
    expect(await provider.getTransactionCount(local.operator.address)).toBe(nonce);
  });

  it("tells whether the payout's own sweep landed: not before the clone exists, not for another payout of the customer, yes after its sweep", async () => {
    const first = await fundedPayout(3_000_000n);
    const second = await fundedPayout(3_000_000n, first.customerId);
    expect(await sweeper.swept(first, MERCHANT)).toBe(false);
    await sweeper.sweep(first, MERCHANT);
    expect(await sweeper.swept(first, MERCHANT)).toBe(true);
    expect(await sweeper.swept(second, MERCHANT)).toBe(false);
    expect(
      await sweeper.swept(
        { ...first, deposit: first.deposit && { ...first.deposit, simulated: true } },
        MERCHANT,
      ),
    ).toBe(false);
  });

  it('a test-helper deposit has nothing on chain to sweep: no transaction, null', async () => {
    const payout = await fundedPayout(1_000_000n);
    const simulated = { ...payout, deposit: { ...depositOf(payout), simulated: true as const } };
    expect(await sweeper.sweep(simulated, MERCHANT)).toBeNull();
    expect(await balance(payout.depositAddress)).toBe(1_000_000n);
  });

  it('less at the address than the deposit throws (the flow retries), counted as failed, and sends nothing', async () => {
    const payout = await fundedPayout(2_000_000n);
    const short = { ...payout, deposit: { ...depositOf(payout), amount: '3000000' } };
    const before = await failures();
    const nonce = await provider.getTransactionCount(local.operator.address);
    await expect(sweeper.sweep(short, MERCHANT)).rejects.toThrow(
      /holds 2000000, less than the payout's 3000000/,
    );
    expect(await failures()).toBe(before + 1);
    expect(await provider.getTransactionCount(local.operator.address)).toBe(nonce);
    expect(await balance(payout.depositAddress)).toBe(2_000_000n);
  });

  it("an address that is not the configured factory's and off-ramp's throws, sending nothing", async () => {
    const payout = await fundedPayout(1_000_000n);
    const other = await fundedPayout(1_000_000n);
    const nonce = await provider.getTransactionCount(local.operator.address);
    await expect(
      sweeper.sweep({ ...payout, depositAddress: other.depositAddress }, MERCHANT),
    ).rejects.toThrow(/is not the configured factory's and off-ramp's/);
    expect(await provider.getTransactionCount(local.operator.address)).toBe(nonce);
  });

  it('a chain the relayers do not serve throws (retried by the flow), never an answer', async () => {
    const payout = await fundedPayout(1_000_000n);
    await expect(
      sweeper.sweep({ ...payout, token: { ...payout.token, chain: 'eip155:1' } }, MERCHANT),
    ).rejects.toThrow();
  });
});
