import { MaxUint256, id } from 'ethers';
import {
  computeDepositAddress,
  computeStablepayAddresses,
  computeTestStablecoinAddresses,
  deployStablepay,
  payoutDepositAddress,
} from './deployment';
import { PaymentMethod } from './enums';
import { connectPaymentDeposit } from './generated/PaymentDeposit';
import { startTestChain, type TestChain } from './test-support/anvil';
import {
  soon,
  deployFixture,
  expectRevert,
  mined,
  signCapture,
  signCharge,
  signSubscribe,
  type Fixture,
} from './test-support/fixture';

const USDC = 10n ** 6n;

let base: TestChain;
let polygon: TestChain;
let onBase: Fixture;
let onPolygon: Fixture;

beforeAll(async () => {
  [base, polygon] = await Promise.all([startTestChain(8453), startTestChain(137)]);
  [onBase, onPolygon] = await Promise.all([deployFixture(base), deployFixture(polygon)]);
});
afterAll(async () => {
  await Promise.all([base?.stop(), polygon?.stop()]);
});

describe('deterministic deployment across chains', () => {
  it('puts the registry, both factories, the deposit implementation and the test stablecoins at the same addresses on every chain, as computed offline', async () => {
    const roles = {
      admin: onBase.admin.address,
      operator: onBase.operator.address,
      operatorPauser: onBase.operatorPauser.address,
    };
    const expected = computeStablepayAddresses(roles);
    expect(onBase.addresses).toEqual(expected);
    expect(onPolygon.addresses).toEqual(expected);
    for (const chain of [base, polygon]) {
      for (const address of [
        expected.registry,
        expected.paymentFactory,
        expected.depositImplementation,
        expected.subscriptionManagerFactory,
        expected.payoutDepositFactory,
        expected.payoutDepositImplementation,
      ]) {
        expect(await chain.provider.getCode(address)).not.toBe('0x');
      }
    }
    expect(await onBase.usdc.getAddress()).toBe(computeTestStablecoinAddresses().USDC);
    expect(await onPolygon.usdc.getAddress()).toBe(computeTestStablecoinAddresses().USDC);
    expect(await onBase.manager.getAddress()).toBe(await onPolygon.manager.getAddress());
  });

  it('is idempotent: deploying again sends nothing and returns the same addresses', async () => {
    const roles = {
      admin: onBase.admin.address,
      operator: onBase.operator.address,
      operatorPauser: onBase.operatorPauser.address,
    };
    const nonce = await base.provider.getTransactionCount(onBase.operator.address);
    const again = await deployStablepay(onBase.operator, roles, { testStablecoins: true });
    expect(again.addresses).toEqual(onBase.addresses);
    expect(await base.provider.getTransactionCount(onBase.operator.address)).toBe(nonce);
  });

  it('gives a payment the same deposit address on every chain', async () => {
    const paymentId = id('payment-everywhere');
    const offline = computeDepositAddress(onBase.addresses.paymentFactory, onBase.merchantId, paymentId);
    expect(await onBase.paymentFactory.depositAddress(onBase.merchantId, paymentId)).toBe(offline);
    expect(await onPolygon.paymentFactory.depositAddress(onPolygon.merchantId, paymentId)).toBe(offline);
  });
  it("gives a payout customer one deposit address on every chain, where each chain's first sweep deploys it", async () => {
    const customerId = id('customer:cross-chain');
    const offRamp = onBase.settlement;
    const expected = payoutDepositAddress({
      factory: onBase.addresses.payoutDepositFactory,
      offRamp,
      merchantId: onBase.merchantId,
      customerId,
    });
    for (const f of [onBase, onPolygon]) {
      expect(await f.payoutFactory.depositAddress(f.merchantId, customerId, offRamp)).toBe(expected);
      await mined(f.usdc.mint(expected, 3n * USDC));
      await mined(
        f.payoutFactory.sweep(
          f.merchantId,
          customerId,
          offRamp,
          await f.usdc.getAddress(),
          3n * USDC,
          id('payout:cross-chain'),
        ),
      );
      expect(await f.chain.provider.getCode(expected)).not.toBe('0x');
    }
    expect(base.chainId).not.toBe(polygon.chainId);
  });
});

describe('signature replay on another chain', () => {
  it('rejects a charge signed for the manager on Base when replayed on the same manager address on Polygon', async () => {
    const subscriptionId = id('same-subscription-on-both-chains');
    for (const f of [onBase, onPolygon]) {
      await mined(f.usdc.connect(f.subscriber).mint(f.subscriber.address, 1_000n * USDC));
      await mined(f.usdc.connect(f.subscriber).approve(await f.manager.getAddress(), MaxUint256));
      const auth = {
        subscriptionId,
        subscriber: f.subscriber.address,
        token: await f.usdc.getAddress(),
        cap: 100n * USDC,
        budget: 300n * USDC,
        periodDuration: 86_400n,
        firstChargeAmount: 10n * USDC,
        deadline: await soon(f),
      };
      // The subscribe authorization is chain-bound as well.
      const foreign = await signSubscribe(
        f.operator,
        f === onBase ? 137n : 8453n,
        await f.manager.getAddress(),
        auth,
      );
      await expectRevert(f.manager.connect(f.subscriber).subscribe(auth, foreign), 'InvalidSignature');
      const own = await signSubscribe(f.operator, f.chainId, await f.manager.getAddress(), auth);
      await mined(f.manager.connect(f.subscriber).subscribe(auth, own));
    }
    const manager = await onBase.manager.getAddress();
    // Both chains' clocks are the wall clock: one deadline fits both.
    const deadline = await soon(onBase);
    const message = {
      subscriptionId,
      amount: 20n * USDC,
      nonce: 1n,
      quoteHash: id('refq'),
      deadline,
    };
    const sig = await signCharge(onBase.merchantSigner, 8453n, manager, message);
    const args = [subscriptionId, message.amount, 1n, message.quoteHash, deadline, sig] as const;
    await expectRevert(onPolygon.manager.charge(...args), 'InvalidSignature');
    await mined(onBase.manager.charge(...args));
  });

  it('rejects a capture signed for a deposit on Base when replayed on the same deposit address on Polygon', async () => {
    const paymentId = id('same-payment-on-both-chains');
    const deposits = [];
    for (const f of [onBase, onPolygon]) {
      const address = await f.paymentFactory.depositAddress(f.merchantId, paymentId);
      await mined(f.usdc.mint(address, 50n * USDC));
      await mined(
        f.paymentFactory.deployDeposit(
          f.merchantId,
          paymentId,
          PaymentMethod.TWO_STEP,
          await f.usdc.getAddress(),
          f.payer.address,
          50n * USDC,
          (await soon(f)) + 3600n,
        ),
      );
      deposits.push(connectPaymentDeposit(address, f.relayer));
    }
    const [onB, onP] = deposits;
    if (!onB || !onP) throw new Error('unreachable');
    expect(await onB.getAddress()).toBe(await onP.getAddress());
    const token = await onBase.usdc.getAddress();
    const deadline = await soon(onBase);
    const sig = await signCapture(onBase.merchantSigner, 8453n, await onB.getAddress(), {
      paymentId,
      token,
      amount: 50n * USDC,
      deadline,
    });
    await expectRevert(onP.capture(token, 50n * USDC, deadline, sig), 'InvalidSignature');
    await mined(onB.capture(token, 50n * USDC, deadline, sig));
  });
});
