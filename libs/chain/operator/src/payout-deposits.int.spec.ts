import { type JsonRpcProvider, Wallet, id } from 'ethers';
import {
  connectPayoutDepositFactory,
  connectStablepayRegistry,
  connectTestStablecoin,
  toOnChainId,
} from '@stablepay/contracts';
import { PAYOUT_REFUND_TYPES, stablepayDomain } from '@stablepay/evm';
import {
  ANVIL_DEV_PRIVATE_KEYS,
  LOCAL_PAYOUT_OFF_RAMP,
  localChainProvider,
  startLocalChains,
  type LocalChains,
} from '@stablepay/local-chains';
import { RelayerSet } from '@stablepay/relayer';
import type { PayoutChainConfig } from './chain-operator.config';
import type { WatchAddressCommand } from './indexer-watch.commands';
import { PayoutDeposits, type PayoutSweepOutcome } from './payout-deposits';

const USDC = 10n ** 6n;
const BASE = 'eip155:8453';
const POLYGON = 'eip155:137';
const merchantSigner = new Wallet(id('payout-deposits.int merchant signer'));

let local: LocalChains;
let relayers: RelayerSet;
let payouts: PayoutDeposits;
let config: PayoutChainConfig;
let provider: JsonRpcProvider;
let customerCount = 0;

function newCustomer(): { merchantId: string; customerId: string } {
  customerCount += 1;
  return { merchantId: 'mer_payouts_int', customerId: `cus_${customerCount}` };
}

/** A customer's wallet (anvil dev key 5) sends `amount` of test USDC to the address. */
async function deposit(address: string, amount: bigint): Promise<string> {
  const chain = local.chains.find((c) => c.caip2 === BASE);
  if (!chain) throw new Error('no Base chain');
  const payer = new Wallet(ANVIL_DEV_PRIVATE_KEYS[5] ?? '', provider);
  const usdc = connectTestStablecoin(chain.addresses.stablecoins.USDC, payer);
  await (await usdc.mint(payer.address, amount)).wait();
  await (await usdc.transfer(address, amount)).wait();
  return chain.addresses.stablecoins.USDC;
}

async function usdcBalance(address: string): Promise<bigint> {
  const chain = local.chains[0];
  if (!chain) throw new Error('no chain');
  return connectTestStablecoin(chain.addresses.stablecoins.USDC, provider).balanceOf(address);
}

beforeAll(async () => {
  local = await startLocalChains({ chainIds: [8453, 137] });
  const base = local.chains.find((c) => c.caip2 === BASE);
  if (!base) throw new Error('no Base chain');
  provider = localChainProvider(base.rpcUrl, base.chainId);
  relayers = new RelayerSet(
    local.chains.map((c) => ({ caip2: c.caip2, chainId: BigInt(c.chainId), rpcUrl: c.rpcUrl })),
    { privateKey: local.operator.privateKey },
  );
  config = { factory: base.addresses.payoutDepositFactory, offRamp: LOCAL_PAYOUT_OFF_RAMP };
  payouts = new PayoutDeposits(relayers, config);
  // The merchant whose signer consents to refunds (registered by the operator, as the service does).
  const registry = connectStablepayRegistry(
    base.addresses.registry,
    new Wallet(local.operator.privateKey, provider),
  );
  await (
    await registry.registerMerchant(id('mer_payouts_int'), merchantSigner.address, merchantSigner.address)
  ).wait();
}, 120_000);
afterAll(async () => {
  relayers?.destroy();
  provider?.destroy();
  await local?.stop();
});

describe('PayoutDeposits on anvil', () => {
  it('computes the address the factory answers, offline', async () => {
    const customer = newCustomer();
    const factory = connectPayoutDepositFactory(config.factory, provider);
    expect(payouts.address(customer)).toBe(
      await factory.depositAddress(id(customer.merchantId), id(customer.customerId), LOCAL_PAYOUT_OFF_RAMP),
    );
  });

  it('asks the indexer to watch the address on every chain the relayers serve', async () => {
    const customer = newCustomer();
    const commands: WatchAddressCommand[] = [];
    const address = await payouts.watch(
      customer,
      {
        watchAddress: async (command) => {
          commands.push(command);
          return { created: true };
        },
      },
      { [BASE]: 42 },
    );
    expect(address).toBe(payouts.address(customer));
    expect(commands).toEqual(
      expect.arrayContaining([
        { chain: BASE, address, fromBlock: 42 },
        { chain: POLYGON, address },
      ]),
    );
    expect(commands).toHaveLength(2);
  });

  it('less at the address than the payout is insufficient_balance, and nothing is sent', async () => {
    const customer = newCustomer();
    const address = payouts.address(customer);
    const token = await deposit(address, 2n * USDC);
    const nonce = await provider.getTransactionCount(local.operator.address);
    const outcome = await payouts.sweep({
      ...customer,
      chain: BASE,
      token,
      amount: 3n * USDC,
      payoutId: 'po_short',
    });
    expect(outcome).toEqual({
      kind: 'insufficient_balance',
      chain: BASE,
      deposit: address,
      token,
      amount: 3n * USDC,
      available: 2n * USDC,
    });
    expect(await provider.getTransactionCount(local.operator.address)).toBe(nonce);
    expect(await provider.getCode(address)).toBe('0x');
  });

  it("sweeps one payout's amount to the off-ramp, deploying the contract on the first sweep only, once per payout", async () => {
    const customer = newCustomer();
    const address = payouts.address(customer);
    const token = await deposit(address, 120n * USDC);
    const before = await usdcBalance(LOCAL_PAYOUT_OFF_RAMP);
    const first = await payouts.sweep({
      ...customer,
      chain: BASE,
      token,
      amount: 100n * USDC,
      payoutId: 'po_1',
    });
    expect(first).toMatchObject({
      kind: 'swept',
      chain: BASE,
      deposit: address,
      token,
      offRamp: LOCAL_PAYOUT_OFF_RAMP,
      payoutId: toOnChainId('po_1'),
      amount: 100n * USDC,
      received: 100n * USDC,
      deployed: true,
    });
    expect(await usdcBalance(LOCAL_PAYOUT_OFF_RAMP)).toBe(before + 100n * USDC);
    // The rest is not the payout's: it stays.
    expect(await usdcBalance(address)).toBe(20n * USDC);
    await deposit(address, 5n * USDC);
    const second = await payouts.sweep({
      ...customer,
      chain: BASE,
      token,
      amount: 5n * USDC,
      payoutId: 'po_2',
    });
    expect(second).toMatchObject({ kind: 'swept', amount: 5n * USDC, deployed: false });
    // A retry whose first answer was lost is refused on chain (nothing sent) and finds its own sweep by payout id.
    const nonce = await provider.getTransactionCount(local.operator.address);
    expect(
      await payouts.sweep({ ...customer, chain: BASE, token, amount: 5n * USDC, payoutId: 'po_2' }),
    ).toEqual({ kind: 'already_swept', chain: BASE, deposit: address, token, payoutId: toOnChainId('po_2') });
    expect(await provider.getTransactionCount(local.operator.address)).toBe(nonce);
    expect(await usdcBalance(address)).toBe(20n * USDC);
    const txOf = (o: PayoutSweepOutcome) => (o.kind === 'swept' ? o.txHash : o.kind);
    const all = await payouts.sweeps({ ...customer, chain: BASE, token, fromBlock: 0 });
    expect(all.map((s) => [s.payoutId, s.txHash, s.amount])).toEqual([
      [toOnChainId('po_1'), txOf(first), 100n * USDC],
      [toOnChainId('po_2'), txOf(second), 5n * USDC],
    ]);
    const own = await payouts.sweeps({ ...customer, chain: BASE, token, payoutId: 'po_2', fromBlock: null });
    expect(own.map((s) => s.txHash)).toEqual([txOf(second)]);
    expect(await payouts.sweeps({ ...customer, chain: POLYGON, token, fromBlock: 0 })).toEqual([]);
    // Concurrent sweeps of two customers share the operator's managed nonce sequence.
    const [a, b] = [newCustomer(), newCustomer()];
    await deposit(payouts.address(a), USDC);
    await deposit(payouts.address(b), 2n * USDC);
    const both = await Promise.all([
      payouts.sweep({ ...a, chain: BASE, token, amount: USDC, payoutId: 'po_a' }),
      payouts.sweep({ ...b, chain: BASE, token, amount: 2n * USDC, payoutId: 'po_b' }),
    ]);
    expect(both.map((o) => (o.kind === 'swept' ? o.amount : o.kind))).toEqual([USDC, 2n * USDC]);
  });

  it('a relayer key that is not the operator is rejected in simulation (NotOperator), nothing sent', async () => {
    const customer = newCustomer();
    const token = await deposit(payouts.address(customer), USDC);
    const strangers = new RelayerSet(
      local.chains.map((c) => ({ caip2: c.caip2, chainId: BigInt(c.chainId), rpcUrl: c.rpcUrl })),
      { privateKey: ANVIL_DEV_PRIVATE_KEYS[6] ?? '' },
    );
    try {
      const stranger = new PayoutDeposits(strangers, config);
      expect(
        await stranger.sweep({ ...customer, chain: BASE, token, amount: USDC, payoutId: 'po_stranger' }),
      ).toEqual({
        kind: 'rejected',
        chain: BASE,
        errorName: 'NotOperator',
      });
    } finally {
      strangers.destroy();
    }
    expect(await usdcBalance(payouts.address(customer))).toBe(USDC);
  });

  it('refunds one payout with the merchant signature, once, deploying the never-swept deposit in the same transaction', async () => {
    const customer = newCustomer();
    const address = payouts.address(customer);
    const token = await deposit(address, 9n * USDC);
    const to = new Wallet(ANVIL_DEV_PRIVATE_KEYS[5] ?? '').address;
    const deadline = BigInt((await provider.getBlock('latest'))?.timestamp ?? 0) + 3600n;
    const payoutId = `po_refund_${customerCount}`;
    const message = {
      payoutId: id(payoutId),
      token,
      to,
      amount: 9n * USDC,
      epoch: 0n,
      deadline,
    };
    const signature = await merchantSigner.signTypedData(
      stablepayDomain(8453n, address),
      PAYOUT_REFUND_TYPES,
      message,
    );
    // Another key's signature is refused in simulation: nothing is sent, so nothing is deployed either.
    const forged = await new Wallet(ANVIL_DEV_PRIVATE_KEYS[7] ?? '').signTypedData(
      stablepayDomain(8453n, address),
      PAYOUT_REFUND_TYPES,
      message,
    );
    const nonce = await provider.getTransactionCount(local.operator.address);
    expect(
      await payouts.refund({
        ...customer,
        chain: BASE,
        token,
        to,
        amount: 9n * USDC,
        payoutId,
        deadline,
        signature: forged,
      }),
    ).toEqual({ kind: 'rejected', chain: BASE, errorName: 'InvalidSignature' });
    expect(await provider.getCode(address)).toBe('0x');
    expect(await provider.getTransactionCount(local.operator.address)).toBe(nonce);
    const before = await usdcBalance(to);
    const request = { ...customer, chain: BASE, token, to, amount: 9n * USDC, payoutId, deadline, signature };
    const outcome = await payouts.refund(request);
    expect(outcome).toMatchObject({
      kind: 'refunded',
      deposit: address,
      to,
      amount: 9n * USDC,
      payoutId: id(payoutId),
      deployed: true,
    });
    expect(await usdcBalance(to)).toBe(before + 9n * USDC);
    // The same request again (a retry after a lost answer): refused in simulation as this payout's refund, which the
    // retry then finds by the payout's id.
    await deposit(address, 9n * USDC);
    expect(await payouts.refund(request)).toEqual({
      kind: 'already_refunded',
      chain: BASE,
      deposit: address,
      token,
      payoutId: id(payoutId),
    });
    expect(await usdcBalance(address)).toBe(9n * USDC);
    const found = await payouts.refunds({ ...customer, chain: BASE, token, payoutId, fromBlock: 0 });
    expect(found.map((r) => [r.txHash, r.amount])).toEqual([
      [outcome.kind === 'refunded' ? outcome.txHash : '', 9n * USDC],
    ]);
    expect(
      await payouts.refunds({ ...customer, chain: BASE, token, payoutId: 'po_other', fromBlock: 0 }),
    ).toEqual([]);
  });
});
