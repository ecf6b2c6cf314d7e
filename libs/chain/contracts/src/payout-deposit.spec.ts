import { ZeroAddress, ZeroHash, getAddress, id, parseEther } from 'ethers';
import { hashTypedData, stablepayDomain, typeHash } from '@stablepay/evm';
import { payoutDepositAddress, toOnChainId } from './deployment';
import {
  connectPayoutDeposit,
  type PayoutDepositContract,
  type PayoutDepositEventArgs,
} from './generated/PayoutDeposit';
import type { PayoutDepositFactoryEventArgs } from './generated/PayoutDepositFactory';
import { deployFeeOnTransferToken, deployHookToken } from './generated/test-doubles';
import { startTestChain, type TestChain } from './test-support/anvil';
import {
  eventIn,
  eventsIn,
  expectRevert,
  deployFixture,
  mined,
  signPayoutRefund,
  signRevokeAuthorizations,
  soon,
  type Fixture,
} from './test-support/fixture';

const USDC = 10n ** 6n;

let chain: TestChain;
let f: Fixture;
let clean: string;
let counter = 0;
/** The off-ramp's receiving address (a plain account: the off-ramp is an exchange or provider wallet). */
let offRamp: string;

beforeAll(async () => {
  chain = await startTestChain(8453);
  f = await deployFixture(chain);
  offRamp = getAddress(id('stablepay test off-ramp').slice(0, 42));
  clean = await chain.snapshot();
});
afterAll(async () => {
  await chain?.stop();
});
beforeEach(async () => {
  await chain.revert(clean);
  clean = await chain.snapshot();
});

function newCustomerId(): string {
  counter += 1;
  return id(`customer-${counter}`);
}

/** A customer whose counterfactual deposit address holds `amount` of USDC (sent from the payer's wallet). */
async function funded(amount: bigint): Promise<{ customerId: string; address: string }> {
  const customerId = newCustomerId();
  const address = await f.payoutFactory.depositAddress(f.merchantId, customerId, offRamp);
  if (amount > 0n) {
    await mined(f.usdc.connect(f.payer).mint(f.payer.address, amount));
    await mined(f.usdc.connect(f.payer).transfer(address, amount));
  }
  return { customerId, address };
}

/** A payout id as the service binds it into its sweep (bytes32). */
function newPayoutId(): string {
  counter += 1;
  return id(`payout-${counter}`);
}

async function sweepVia(customerId: string, token: string, amount: bigint, payoutId = newPayoutId()) {
  return mined(f.payoutFactory.sweep(f.merchantId, customerId, offRamp, token, amount, payoutId));
}

function depositAt(address: string): PayoutDepositContract {
  return connectPayoutDeposit(address, f.operator);
}

describe('PayoutDepositFactory: one address per customer', () => {
  it('computes the same address offline (payoutDepositAddress) as on chain, before anything is deployed', async () => {
    const { customerId, address } = await funded(0n);
    expect(await chain.provider.getCode(address)).toBe('0x');
    expect(
      payoutDepositAddress({
        factory: f.addresses.payoutDepositFactory,
        offRamp,
        merchantId: f.merchantId,
        customerId,
      }),
    ).toBe(address);
    // Service ids that are not 32-byte hex are hashed the same way on both sides.
    expect(
      payoutDepositAddress({
        factory: f.addresses.payoutDepositFactory,
        offRamp,
        merchantId: 'mer_123',
        customerId: 'cus_456',
      }),
    ).toBe(await f.payoutFactory.depositAddress(toOnChainId('mer_123'), toOnChainId('cus_456'), offRamp));
  });

  it('binds the off-ramp and the merchant into the address: another off-ramp or merchant is another address', async () => {
    const customerId = newCustomerId();
    const a = await f.payoutFactory.depositAddress(f.merchantId, customerId, offRamp);
    expect(await f.payoutFactory.depositAddress(f.merchantId, customerId, f.stranger.address)).not.toBe(a);
    expect(await f.payoutFactory.depositAddress(id('other merchant'), customerId, offRamp)).not.toBe(a);
  });
});

describe('sweep', () => {
  it('deploys the deposit on the first sweep and sends the payout amount to the bound off-ramp, naming the payout', async () => {
    const { customerId, address } = await funded(250n * USDC);
    const token = await f.usdc.getAddress();
    const payoutId = newPayoutId();
    const receipt = await sweepVia(customerId, token, 250n * USDC, payoutId);
    const deployed = eventIn<PayoutDepositFactoryEventArgs, 'PayoutDepositDeployed'>(
      receipt,
      f.payoutFactory,
      'PayoutDepositDeployed',
    );
    expect(deployed).toMatchObject({ merchantId: f.merchantId, customerId, deposit: address, offRamp });
    const deposit = depositAt(address);
    const swept = eventIn<PayoutDepositEventArgs, 'PayoutSwept'>(receipt, deposit, 'PayoutSwept');
    expect(swept).toMatchObject({
      customerId,
      token,
      payoutId,
      offRamp,
      amount: 250n * USDC,
      received: 250n * USDC,
    });
    expect(await deposit.swept(payoutId)).toBe(true);
    expect(await f.usdc.balanceOf(offRamp)).toBe(250n * USDC);
    expect(await f.usdc.balanceOf(address)).toBe(0n);
    expect(await deposit.offRamp()).toBe(offRamp);
    expect(await deposit.customerId()).toBe(customerId);
    expect(await deposit.merchantId()).toBe(f.merchantId);
  });

  it('moves exactly the amount asked: other funds at the address (a held deposit) stay there', async () => {
    const { customerId, address } = await funded(10n * USDC);
    const token = await f.usdc.getAddress();
    // 10 USDC are held (a flagged sender's, or no payout waits for them); a payout's 7 USDC arrive beside them.
    await mined(f.usdc.mint(address, 7n * USDC));
    await sweepVia(customerId, token, 7n * USDC);
    expect(await f.usdc.balanceOf(address)).toBe(10n * USDC);
    expect(await f.usdc.balanceOf(offRamp)).toBe(7n * USDC);
  });

  it('sweeps later payouts from the same address without deploying again, through the factory or the deposit itself', async () => {
    const { customerId, address } = await funded(10n * USDC);
    const token = await f.usdc.getAddress();
    await sweepVia(customerId, token, 10n * USDC);
    await mined(f.usdc.mint(address, 7n * USDC));
    const again = await sweepVia(customerId, token, 7n * USDC);
    expect(
      eventsIn<PayoutDepositFactoryEventArgs, 'PayoutDepositDeployed'>(
        again,
        f.payoutFactory,
        'PayoutDepositDeployed',
      ),
    ).toHaveLength(0);
    await mined(f.usdc.mint(address, 3n * USDC));
    await mined(depositAt(address).sweep(token, 3n * USDC, newPayoutId()));
    expect(await f.usdc.balanceOf(offRamp)).toBe(20n * USDC);
  });

  it('sweeps a payout once (AlreadySwept), even while the address holds enough for a second sweep', async () => {
    const { customerId, address } = await funded(10n * USDC);
    const token = await f.usdc.getAddress();
    const payoutId = newPayoutId();
    await sweepVia(customerId, token, 5n * USDC, payoutId);
    await expectRevert(
      f.payoutFactory.sweep(f.merchantId, customerId, offRamp, token, 5n * USDC, payoutId),
      'AlreadySwept',
    );
    await expectRevert(depositAt(address).sweep(token, 5n * USDC, payoutId), 'AlreadySwept');
    expect(await f.usdc.balanceOf(address)).toBe(5n * USDC);
    // Another payout of the same customer and amount is its own sweep.
    await sweepVia(customerId, token, 5n * USDC);
    expect(await f.usdc.balanceOf(address)).toBe(0n);
  });

  it('moves only the token asked for: another ERC-20 at the same address is swept by its own call', async () => {
    const { customerId, address } = await funded(5n * USDC);
    await mined(f.dai.mint(address, parseEther('3')));
    await sweepVia(customerId, await f.dai.getAddress(), parseEther('3'));
    expect(await f.dai.balanceOf(offRamp)).toBe(parseEther('3'));
    expect(await f.usdc.balanceOf(address)).toBe(5n * USDC);
    await sweepVia(customerId, await f.usdc.getAddress(), 5n * USDC);
    expect(await f.usdc.balanceOf(offRamp)).toBe(5n * USDC);
  });

  it('refuses more than the address holds (AmountExceedsAvailable), a zero amount or payout id, and then deploys nothing', async () => {
    const { customerId, address } = await funded(4n * USDC);
    const token = await f.usdc.getAddress();
    const sweep = (amount: bigint, payoutId: string) =>
      f.payoutFactory.sweep(f.merchantId, customerId, offRamp, token, amount, payoutId);
    await expectRevert(sweep(5n * USDC, newPayoutId()), 'AmountExceedsAvailable');
    await expectRevert(sweep(0n, newPayoutId()), 'ZeroAmount');
    await expectRevert(sweep(4n * USDC, ZeroHash), 'ZeroPayoutId');
    expect(await chain.provider.getCode(address)).toBe('0x');
    expect(await f.usdc.balanceOf(address)).toBe(4n * USDC);
  });

  it('refuses every caller but the operator, on the factory and on the deposit (NotOperator)', async () => {
    const { customerId, address } = await funded(10n * USDC);
    const token = await f.usdc.getAddress();
    const asStranger = f.payoutFactory.connect(f.stranger);
    await expectRevert(
      asStranger.sweep(f.merchantId, customerId, offRamp, token, 10n * USDC, newPayoutId()),
      'NotOperator',
    );
    await expectRevert(asStranger.deployDeposit(f.merchantId, customerId, offRamp), 'NotOperator');
    await mined(f.payoutFactory.deployDeposit(f.merchantId, customerId, offRamp));
    await expectRevert(
      depositAt(address)
        .connect(f.stranger)
        .sweep(token, 10n * USDC, newPayoutId()),
      'NotOperator',
    );
    // A stranger naming its own address as the off-ramp only reaches another (empty) address.
    expect(await f.payoutFactory.depositAddress(f.merchantId, customerId, f.stranger.address)).not.toBe(
      address,
    );
    expect(await f.usdc.balanceOf(address)).toBe(10n * USDC);
  });

  it('a fee-on-transfer token: the off-ramp gets less than the amount swept, and a deposit that arrived short is refused', async () => {
    const fee = await deployFeeOnTransferToken(f.operator);
    const { customerId, address } = await funded(0n);
    const token = await fee.getAddress();
    await mined(fee.mint(address, 100n * USDC));
    const receipt = await sweepVia(customerId, token, 100n * USDC);
    const swept = eventIn<PayoutDepositEventArgs, 'PayoutSwept'>(receipt, depositAt(address), 'PayoutSwept');
    expect(swept.amount).toBe(100n * USDC);
    expect(swept.received).toBeLessThan(100n * USDC);
    expect(await fee.balanceOf(offRamp)).toBe(swept.received);
    // A payer's transfer of 50 lands short at the address: sweeping the 50 asked for is refused, not topped up.
    await mined(fee.mint(f.payer.address, 50n * USDC));
    await mined(fee.connect(f.payer).transfer(address, 50n * USDC));
    const arrived = await fee.balanceOf(address);
    expect(arrived).toBeLessThan(50n * USDC);
    await expectRevert(
      f.payoutFactory.sweep(f.merchantId, customerId, offRamp, token, 50n * USDC, newPayoutId()),
      'AmountExceedsAvailable',
    );
    expect(await fee.balanceOf(address)).toBe(arrived);
  });

  it('cannot be re-entered from the token (ReentrantCall) and moves nothing then', async () => {
    const hook = await deployHookToken(f.operator);
    const { customerId, address } = await funded(0n);
    const token = await hook.getAddress();
    await mined(hook.mint(address, 50n * USDC));
    await mined(f.payoutFactory.deployDeposit(f.merchantId, customerId, offRamp));
    const deposit = depositAt(address);
    await mined(
      hook.setHook(
        address,
        deposit.interface.encodeFunctionData('sweep', [token, 10n * USDC, newPayoutId()]),
      ),
    );
    await expectRevert(deposit.sweep(token, 20n * USDC, newPayoutId()), 'ReentrantCall');
    expect(await hook.balanceOf(address)).toBe(50n * USDC);
  });
});

describe('deployment guards', () => {
  it('deploys once (DepositAlreadyDeployed), never with a zero off-ramp, and the clone cannot be initialised again', async () => {
    const { customerId, address } = await funded(0n);
    await mined(f.payoutFactory.deployDeposit(f.merchantId, customerId, offRamp));
    await expectRevert(
      f.payoutFactory.deployDeposit(f.merchantId, customerId, offRamp),
      'DepositAlreadyDeployed',
    );
    await expectRevert(f.payoutFactory.deployDeposit(f.merchantId, customerId, ZeroAddress), 'ZeroAddress');
    await expectRevert(
      depositAt(address).initialize(f.merchantId, customerId, f.stranger.address),
      'NotFactory',
    );
  });

  it('the implementation moves nothing (NotADeposit)', async () => {
    const implementation = depositAt(f.addresses.payoutDepositImplementation);
    await mined(f.usdc.mint(f.addresses.payoutDepositImplementation, USDC));
    await expectRevert(implementation.sweep(await f.usdc.getAddress(), USDC, newPayoutId()), 'NotADeposit');
  });
});

describe('refund (a held payout back to its sender, payout.refunded)', () => {
  async function deployedWith(amount: bigint) {
    const { customerId, address } = await funded(amount);
    await mined(f.payoutFactory.deployDeposit(f.merchantId, customerId, offRamp));
    return { customerId, address, deposit: depositAt(address), token: await f.usdc.getAddress() };
  }

  /** The merchant signer's PayoutRefund of `amount` for `payoutId` at `address`, to the payer. */
  async function signed(address: string, payoutId: string, amount: bigint, token: string) {
    const deadline = await soon(f);
    const to = f.payer.address;
    const sig = await signPayoutRefund(f.merchantSigner, f.chainId, address, {
      payoutId,
      token,
      to,
      amount,
      deadline,
    });
    return { to, deadline, sig };
  }

  it("returns exactly the payout's signed amount to the signed destination, naming the payout in an indexed topic", async () => {
    const { customerId, address, deposit, token } = await deployedWith(40n * USDC);
    const payoutId = newPayoutId();
    const { to, deadline, sig } = await signed(address, payoutId, 40n * USDC, token);
    const receipt = await mined(deposit.refund(token, to, 40n * USDC, payoutId, deadline, sig));
    const ev = eventIn<PayoutDepositEventArgs, 'PayoutRefunded'>(receipt, deposit, 'PayoutRefunded');
    expect(ev).toMatchObject({
      customerId,
      token,
      payoutId,
      to,
      amount: 40n * USDC,
      received: 40n * USDC,
    });
    expect(await deposit.refunded(payoutId)).toBe(true);
    expect(await f.usdc.balanceOf(to)).toBe(40n * USDC);
    const byPayout = (id: string) =>
      chain.provider.getLogs({
        address,
        topics: [deposit.interface.getEvent('PayoutRefunded')?.topicHash ?? null, null, null, id],
        fromBlock: receipt.blockNumber,
        toBlock: receipt.blockNumber,
      });
    expect((await byPayout(payoutId)).map((l) => l.transactionHash)).toEqual([receipt.hash]);
    expect(await byPayout(newPayoutId())).toHaveLength(0);
  });

  it("is bounded to the held payout: a pending payout's funds beside it stay at the address", async () => {
    // 10 USDC held (a suspended customer's payout), 7 USDC of a payout waiting for its sweep.
    const { customerId, address, deposit, token } = await deployedWith(10n * USDC);
    await mined(f.usdc.mint(address, 7n * USDC));
    const held = newPayoutId();
    const { to, deadline, sig } = await signed(address, held, 10n * USDC, token);
    await mined(deposit.refund(token, to, 10n * USDC, held, deadline, sig));
    expect(await f.usdc.balanceOf(address)).toBe(7n * USDC);
    // The pending payout is swept in full afterwards.
    await sweepVia(customerId, token, 7n * USDC);
    expect(await f.usdc.balanceOf(offRamp)).toBe(7n * USDC);
  });

  it('refunds a payout once (AlreadyRefunded), even with a fresh signature and funds at the address again', async () => {
    const { address, deposit, token } = await deployedWith(40n * USDC);
    const payoutId = newPayoutId();
    const first = await signed(address, payoutId, 40n * USDC, token);
    await mined(deposit.refund(token, first.to, 40n * USDC, payoutId, first.deadline, first.sig));
    await mined(f.usdc.mint(address, 40n * USDC));
    // The same signature again, and a new one (a later deadline) for the same payout.
    await expectRevert(
      deposit.refund(token, first.to, 40n * USDC, payoutId, first.deadline, first.sig),
      'AlreadyRefunded',
    );
    // A later block time, so a later deadline: a block mined in the same second would sign the same digest.
    await chain.provider.send('evm_increaseTime', [1]);
    await chain.provider.send('evm_mine', []);
    const again = await signed(address, payoutId, 40n * USDC, token);
    expect(again.sig).not.toBe(first.sig);
    await expectRevert(
      deposit.refund(token, again.to, 40n * USDC, payoutId, again.deadline, again.sig),
      'AlreadyRefunded',
    );
    expect(await f.usdc.balanceOf(address)).toBe(40n * USDC);
  });

  it('a payout leaves once: a swept payout is not refunded (AlreadySwept), a refunded one not swept (AlreadyRefunded)', async () => {
    const { customerId, address, deposit, token } = await deployedWith(20n * USDC);
    const sweptPayout = newPayoutId();
    await sweepVia(customerId, token, 10n * USDC, sweptPayout);
    const s = await signed(address, sweptPayout, 10n * USDC, token);
    await expectRevert(
      deposit.refund(token, s.to, 10n * USDC, sweptPayout, s.deadline, s.sig),
      'AlreadySwept',
    );
    const refundedPayout = newPayoutId();
    const r = await signed(address, refundedPayout, 10n * USDC, token);
    await mined(deposit.refund(token, r.to, 10n * USDC, refundedPayout, r.deadline, r.sig));
    await mined(f.usdc.mint(address, 10n * USDC));
    await expectRevert(sweepVia(customerId, token, 10n * USDC, refundedPayout), 'AlreadyRefunded');
    expect(await f.usdc.balanceOf(address)).toBe(10n * USDC);
  });

  it("a signature is one payout's: not another payout's, nor another amount, token or destination (InvalidSignature)", async () => {
    const { address, deposit, token } = await deployedWith(40n * USDC);
    const payoutId = newPayoutId();
    const { to, deadline, sig } = await signed(address, payoutId, 10n * USDC, token);
    await expectRevert(
      deposit.refund(token, to, 10n * USDC, newPayoutId(), deadline, sig),
      'InvalidSignature',
    );
    // The whole balance under a signature for 10 USDC.
    await expectRevert(deposit.refund(token, to, 40n * USDC, payoutId, deadline, sig), 'InvalidSignature');
    await mined(f.dai.mint(address, 10n * USDC));
    await expectRevert(
      deposit.refund(await f.dai.getAddress(), to, 10n * USDC, payoutId, deadline, sig),
      'InvalidSignature',
    );
    // The merchant signed the payer; the operator redirects to a stranger, or signs its own.
    await expectRevert(
      deposit.refund(token, f.stranger.address, 10n * USDC, payoutId, deadline, sig),
      'InvalidSignature',
    );
    const ownSig = await signPayoutRefund(f.operator, f.chainId, address, {
      payoutId,
      token,
      to: f.stranger.address,
      amount: 10n * USDC,
      deadline,
    });
    await expectRevert(
      deposit.refund(token, f.stranger.address, 10n * USDC, payoutId, deadline, ownSig),
      'InvalidSignature',
    );
    await expectRevert(
      deposit.connect(f.stranger).refund(token, to, 10n * USDC, payoutId, deadline, sig),
      'NotOperator',
    );
    expect(await f.usdc.balanceOf(address)).toBe(40n * USDC);
  });

  it('refuses a zero amount or payout id, the zero or own address, and more than the address holds', async () => {
    const { address, deposit, token } = await deployedWith(5n * USDC);
    const payoutId = newPayoutId();
    const { to, deadline, sig } = await signed(address, payoutId, 6n * USDC, token);
    await expectRevert(deposit.refund(token, to, 0n, payoutId, deadline, sig), 'ZeroAmount');
    await expectRevert(deposit.refund(token, to, 6n * USDC, ZeroHash, deadline, sig), 'ZeroPayoutId');
    await expectRevert(
      deposit.refund(token, ZeroAddress, 6n * USDC, payoutId, deadline, sig),
      'InvalidDestination',
    );
    await expectRevert(
      deposit.refund(token, address, 6n * USDC, payoutId, deadline, sig),
      'InvalidDestination',
    );
    await expectRevert(
      deposit.refund(token, to, 6n * USDC, payoutId, deadline, sig),
      'AmountExceedsAvailable',
    );
    expect(await deposit.refunded(payoutId)).toBe(false);
  });

  it('hashes PayoutRefund as @stablepay/evm does (typehash and digest), so SDK signatures verify on chain', async () => {
    const { deposit, token } = await deployedWith(1n);
    expect(await deposit.PAYOUT_REFUND_TYPEHASH()).toBe(typeHash('PayoutRefund'));
    const payoutId = newPayoutId();
    const message = { payoutId, token, to: f.payer.address, amount: 1n, epoch: 3n, deadline: 1_800_000_000n };
    expect(await deposit.hashRefund(token, f.payer.address, 1n, payoutId, 3n, 1_800_000_000n)).toBe(
      hashTypedData('PayoutRefund', stablepayDomain(f.chainId, await deposit.getAddress()), message),
    );
  });

  it('through the factory: deploys a never-swept deposit and refunds in one transaction; a bad signature deploys nothing', async () => {
    const { customerId, address } = await funded(12n * USDC);
    const token = await f.usdc.getAddress();
    const payoutId = newPayoutId();
    const { to, deadline, sig } = await signed(address, payoutId, 12n * USDC, token);
    const refund = (signature: string) =>
      f.payoutFactory.refund(
        f.merchantId,
        customerId,
        offRamp,
        token,
        to,
        12n * USDC,
        payoutId,
        deadline,
        signature,
      );
    const forged = await signPayoutRefund(f.operator, f.chainId, address, {
      payoutId,
      token,
      to,
      amount: 12n * USDC,
      deadline,
    });
    await expectRevert(refund(forged), 'InvalidSignature');
    expect(await chain.provider.getCode(address)).toBe('0x');
    await expectRevert(
      f.payoutFactory
        .connect(f.stranger)
        .refund(f.merchantId, customerId, offRamp, token, to, 12n * USDC, payoutId, deadline, sig),
      'NotOperator',
    );
    const receipt = await mined(refund(sig));
    expect(
      eventIn<PayoutDepositFactoryEventArgs, 'PayoutDepositDeployed'>(
        receipt,
        f.payoutFactory,
        'PayoutDepositDeployed',
      ).deposit,
    ).toBe(address);
    expect(
      eventIn<PayoutDepositEventArgs, 'PayoutRefunded'>(receipt, depositAt(address), 'PayoutRefunded'),
    ).toMatchObject({ to, payoutId, amount: 12n * USDC });
    expect(await f.usdc.balanceOf(to)).toBe(12n * USDC);
  });

  it('a revoked signature (epoch bump) is refused', async () => {
    const { address, deposit, token } = await deployedWith(40n * USDC);
    const payoutId = newPayoutId();
    const { to, deadline, sig } = await signed(address, payoutId, 40n * USDC, token);
    const revoke = await signRevokeAuthorizations(f.merchantSigner, f.chainId, f.addresses.registry, {
      merchantId: f.merchantId,
      deadline,
    });
    await mined(f.registry.revokeAuthorizationsBySig(f.merchantId, deadline, revoke));
    await expectRevert(deposit.refund(token, to, 40n * USDC, payoutId, deadline, sig), 'InvalidSignature');
  });
});
