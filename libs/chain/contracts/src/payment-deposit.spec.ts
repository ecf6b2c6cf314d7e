import {
  TypedDataEncoder,
  Wallet,
  ZeroAddress,
  id,
  keccak256,
  parseEther,
  toBeHex,
  toUtf8Bytes,
} from 'ethers';
import { CAPTURE_TYPES, REFUND_TYPES, RESCUE_TYPES, stablepayDomain } from '@stablepay/evm';
import { computeDepositAddress } from './deployment';
import { PaymentMethod } from './enums';
import {
  PaymentDepositAbi,
  connectPaymentDeposit,
  type PaymentDepositContract,
  type PaymentDepositEventArgs,
} from './generated/PaymentDeposit';
import type { PaymentFactoryEventArgs } from './generated/PaymentFactory';
import { deployFeeOnTransferToken, deployHookToken } from './generated/test-doubles';
import { startTestChain, type TestChain } from './test-support/anvil';
import {
  FAR_DEADLINE,
  deployFixture,
  eventIn,
  expectRevert,
  mined,
  signCapture,
  signRefund,
  signRescue,
  type Fixture,
  type TypedSigner,
} from './test-support/fixture';

type Ev = PaymentDepositEventArgs;
const USDC = 10n ** 6n;

let chain: TestChain;
let f: Fixture;
let clean: string;
let counter = 0;

beforeAll(async () => {
  chain = await startTestChain(137);
  f = await deployFixture(chain);
  clean = await chain.snapshot();
});
afterAll(async () => {
  await chain?.stop();
});
beforeEach(async () => {
  await chain.revert(clean);
  clean = await chain.snapshot();
});

function newPaymentId(): string {
  counter += 1;
  return id(`payment-${counter}`);
}

/** The customer pays `amount` of USDC to the (not yet deployed) deposit address of a new payment. */
async function paid(
  amount: bigint,
  merchantId = f.merchantId,
): Promise<{ paymentId: string; address: string }> {
  const paymentId = newPaymentId();
  const address = await f.paymentFactory.depositAddress(merchantId, paymentId);
  await mined(f.usdc.connect(f.payer).mint(f.payer.address, amount));
  await mined(f.usdc.connect(f.payer).transfer(address, amount));
  return { paymentId, address };
}

async function deploy(
  paymentId: string,
  method: number,
  amount: bigint,
  o: { merchantId?: string; token?: string } = {},
): Promise<PaymentDepositContract> {
  const receipt = await mined(
    f.paymentFactory.deployDeposit(
      o.merchantId ?? f.merchantId,
      paymentId,
      method,
      o.token ?? (await f.usdc.getAddress()),
      f.payer.address,
      amount,
    ),
  );
  const ev = eventIn<PaymentFactoryEventArgs, 'DepositDeployed'>(
    receipt,
    f.paymentFactory,
    'DepositDeployed',
  );
  return connectPaymentDeposit(ev.deposit, f.relayer);
}

async function escrow(
  amount = 100n * USDC,
): Promise<{ paymentId: string; deposit: PaymentDepositContract; address: string }> {
  const { paymentId, address } = await paid(amount);
  const deposit = await deploy(paymentId, PaymentMethod.TWO_STEP, amount);
  return { paymentId, deposit, address };
}

async function captureArgs(
  deposit: PaymentDepositContract,
  paymentId: string,
  amount: bigint,
  o: { signer?: TypedSigner; deadline?: bigint; chainId?: bigint } = {},
) {
  const token = await f.usdc.getAddress();
  const deadline = o.deadline ?? FAR_DEADLINE;
  const sig = await signCapture(
    o.signer ?? f.merchantSigner,
    o.chainId ?? f.chainId,
    await deposit.getAddress(),
    { paymentId, token, amount, deadline },
  );
  return [token, amount, deadline, sig] as const;
}

describe('PaymentFactory: deposit addresses', () => {
  it('gives every payment a CREATE2 deposit address known before deployment, independent of token, payer and amount', async () => {
    const paymentId = newPaymentId();
    const onChain = await f.paymentFactory.depositAddress(f.merchantId, paymentId);
    expect(computeDepositAddress(await f.paymentFactory.getAddress(), f.merchantId, paymentId)).toBe(onChain);
    expect(await chain.provider.getCode(onChain)).toBe('0x');
    // The same payment deployed with DAI instead lands at the same address.
    await mined(f.dai.connect(f.payer).mint(onChain, parseEther('5')));
    const deposit = await deploy(paymentId, PaymentMethod.DIRECT, parseEther('5'), {
      token: await f.dai.getAddress(),
    });
    expect(await deposit.getAddress()).toBe(onChain);
    expect(await f.paymentFactory.depositImplementation()).toBe(f.addresses.depositImplementation);
  });

  it('binds the merchant into the salt: the same payment id of another merchant has another address', async () => {
    const paymentId = newPaymentId();
    expect(await f.paymentFactory.depositAddress(id('merchant:other'), paymentId)).not.toBe(
      await f.paymentFactory.depositAddress(f.merchantId, paymentId),
    );
  });

  it('lets only the operator deploy, only once per address, and never beyond the deposited balance', async () => {
    const { paymentId } = await paid(10n * USDC);
    const usdc = await f.usdc.getAddress();
    await expectRevert(
      f.paymentFactory
        .connect(f.stranger)
        .deployDeposit(f.merchantId, paymentId, PaymentMethod.DIRECT, usdc, f.payer.address, 10n * USDC),
      'NotOperator',
    );
    const err = await expectRevert(
      f.paymentFactory.deployDeposit(
        f.merchantId,
        paymentId,
        PaymentMethod.DIRECT,
        usdc,
        f.payer.address,
        10n * USDC + 1n,
      ),
      'InsufficientDeposit',
    );
    expect(err.args).toEqual({ balance: 10n * USDC, amount: 10n * USDC + 1n });
    await deploy(paymentId, PaymentMethod.DIRECT, 10n * USDC);
    await expectRevert(
      f.paymentFactory.deployDeposit(
        f.merchantId,
        paymentId,
        PaymentMethod.DIRECT,
        usdc,
        f.payer.address,
        1n,
      ),
      'DepositAlreadyDeployed',
    );
  });

  it('refuses to settle for a merchant without a settlement address', async () => {
    const other = id('merchant:unconfigured');
    const { paymentId } = await paid(10n * USDC, other);
    await expectRevert(
      f.paymentFactory.deployDeposit(
        other,
        paymentId,
        PaymentMethod.DIRECT,
        await f.usdc.getAddress(),
        f.payer.address,
        10n * USDC,
      ),
      'MerchantNotConfigured',
    );
  });

  it('keeps initialize for the factory, and the implementation itself unusable', async () => {
    const { deposit } = await escrow();
    await expectRevert(
      deposit.initialize(
        f.merchantId,
        id('x'),
        PaymentMethod.DIRECT,
        await f.usdc.getAddress(),
        f.stranger.address,
        f.stranger.address,
        1n,
      ),
      'NotFactory',
    );
    const impl = connectPaymentDeposit(f.addresses.depositImplementation, f.operator);
    await expectRevert(impl.recover(), 'NotADeposit');
  });
});

describe('PaymentDeposit: DIRECT', () => {
  it('forwards the funding amount to the merchant settlement address in the deploying transaction', async () => {
    const { paymentId, address } = await paid(25n * USDC);
    const receipt = await mined(
      f.paymentFactory.deployDeposit(
        f.merchantId,
        paymentId,
        PaymentMethod.DIRECT,
        await f.usdc.getAddress(),
        f.payer.address,
        25n * USDC,
      ),
    );
    expect(
      eventIn<PaymentFactoryEventArgs, 'DepositDeployed'>(receipt, f.paymentFactory, 'DepositDeployed'),
    ).toMatchObject({
      merchantId: f.merchantId,
      paymentId,
      deposit: address,
      method: BigInt(PaymentMethod.DIRECT),
      payer: f.payer.address,
      settlement: f.settlement,
      amount: 25n * USDC,
      received: 25n * USDC,
    });
    const deposit = connectPaymentDeposit(address, f.relayer);
    expect(eventIn<Ev, 'PaymentSettled'>(receipt, deposit, 'PaymentSettled')).toMatchObject({
      paymentId,
      settlement: f.settlement,
      amount: 25n * USDC,
      received: 25n * USDC,
    });
    expect(await f.usdc.balanceOf(f.settlement)).toBe(25n * USDC);
    expect(await f.usdc.balanceOf(address)).toBe(0n);
  });

  it('leaves an over-deposit in place; the operator recovers it to the payer recorded at deployment', async () => {
    const { paymentId, address } = await paid(30n * USDC);
    const deposit = await deploy(paymentId, PaymentMethod.DIRECT, 25n * USDC);
    await expectRevert(deposit.connect(f.stranger).recover(), 'NotOperator');
    const before = await f.usdc.balanceOf(f.payer.address);
    const receipt = await mined(deposit.connect(f.operator).recover());
    expect(eventIn<Ev, 'PaymentRecovered'>(receipt, deposit, 'PaymentRecovered')).toMatchObject({
      paymentId,
      payer: f.payer.address,
      amount: 5n * USDC,
      received: 5n * USDC,
    });
    expect((await f.usdc.balanceOf(f.payer.address)) - before).toBe(5n * USDC);
    expect(await f.usdc.balanceOf(address)).toBe(0n);
    await expectRevert(deposit.connect(f.operator).recover(), 'NothingToRecover');
  });

  it('reports what the settlement address received for a fee-on-transfer token', async () => {
    const fee = await deployFeeOnTransferToken(f.operator);
    const paymentId = newPaymentId();
    const address = await f.paymentFactory.depositAddress(f.merchantId, paymentId);
    await mined(fee.mint(address, 100n * USDC));
    const receipt = await mined(
      f.paymentFactory.deployDeposit(
        f.merchantId,
        paymentId,
        PaymentMethod.DIRECT,
        await fee.getAddress(),
        f.payer.address,
        100n * USDC,
      ),
    );
    const ev = eventIn<Ev, 'PaymentSettled'>(
      receipt,
      connectPaymentDeposit(address, f.relayer),
      'PaymentSettled',
    );
    expect([ev.amount, ev.received]).toEqual([100n * USDC, 99n * USDC]);
  });
});

describe('PaymentDeposit: abandoned deposit', () => {
  it('is deployed with method NONE (nothing settled) and recovered to the payer; recover takes no destination', async () => {
    const { paymentId, address } = await paid(40n * USDC);
    const deposit = await deploy(paymentId, PaymentMethod.NONE, 0n);
    expect(await f.usdc.balanceOf(address)).toBe(40n * USDC);
    const recoverFn = PaymentDepositAbi.find((x) => x.type === 'function' && x.name === 'recover');
    expect(recoverFn && 'inputs' in recoverFn ? recoverFn.inputs : undefined).toEqual([]);
    await mined(deposit.connect(f.operator).recover());
    expect(await f.usdc.balanceOf(f.payer.address)).toBe(40n * USDC);
  });
});

describe('PaymentDeposit: TWO_STEP escrow', () => {
  it('holds the funds until a merchant-signed capture moves them to the settlement address; partial captures allowed', async () => {
    const { paymentId, deposit, address } = await escrow(100n * USDC);
    expect(await f.usdc.balanceOf(address)).toBe(100n * USDC);
    expect((await deposit.payment()).escrowed).toBe(100n * USDC);
    const receipt = await mined(deposit.capture(...(await captureArgs(deposit, paymentId, 60n * USDC))));
    expect(eventIn<Ev, 'PaymentCaptured'>(receipt, deposit, 'PaymentCaptured')).toMatchObject({
      paymentId,
      settlement: f.settlement,
      amount: 60n * USDC,
      received: 60n * USDC,
      remainingEscrow: 40n * USDC,
    });
    await mined(deposit.capture(...(await captureArgs(deposit, paymentId, 40n * USDC))));
    expect(await f.usdc.balanceOf(f.settlement)).toBe(100n * USDC);
    expect((await deposit.payment()).escrowed).toBe(0n);
  });

  it('captures to the settlement address bound at deployment, even after the merchant changes it', async () => {
    const { paymentId, deposit } = await escrow(10n * USDC);
    await mined(f.registry.setMerchant(f.merchantId, f.merchantSigner.address, f.stranger.address));
    await mined(deposit.capture(...(await captureArgs(deposit, paymentId, 10n * USDC))));
    expect(await f.usdc.balanceOf(f.settlement)).toBe(10n * USDC);
  });

  it('refunds to the payer recorded at deployment on a merchant-signed Refund', async () => {
    const { paymentId, deposit } = await escrow(100n * USDC);
    const token = await f.usdc.getAddress();
    const sig = await signRefund(f.merchantSigner, f.chainId, await deposit.getAddress(), {
      paymentId,
      token,
      amount: 100n * USDC,
      deadline: FAR_DEADLINE,
    });
    const receipt = await mined(deposit.refund(token, 100n * USDC, FAR_DEADLINE, sig));
    expect(eventIn<Ev, 'PaymentRefunded'>(receipt, deposit, 'PaymentRefunded')).toMatchObject({
      payer: f.payer.address,
      amount: 100n * USDC,
      remainingEscrow: 0n,
    });
    expect(await f.usdc.balanceOf(f.payer.address)).toBe(100n * USDC);
  });

  it('rejects captures beyond the escrow, of another token, or on a DIRECT payment', async () => {
    const { paymentId, deposit } = await escrow(100n * USDC);
    await expectRevert(
      deposit.capture(...(await captureArgs(deposit, paymentId, 100n * USDC + 1n))),
      'AmountExceedsEscrow',
    );
    const dai = await f.dai.getAddress();
    const sig = await signCapture(f.merchantSigner, f.chainId, await deposit.getAddress(), {
      paymentId,
      token: dai,
      amount: 1n,
      deadline: FAR_DEADLINE,
    });
    await expectRevert(deposit.capture(dai, 1n, FAR_DEADLINE, sig), 'WrongToken');
    const direct = await paid(5n * USDC);
    const directDeposit = await deploy(direct.paymentId, PaymentMethod.DIRECT, 5n * USDC);
    await expectRevert(
      directDeposit.capture(...(await captureArgs(directDeposit, direct.paymentId, 1n))),
      'NotEscrow',
    );
  });

  it('recover returns only what exceeds the escrow', async () => {
    const { deposit, address } = await escrow(100n * USDC);
    await expectRevert(deposit.connect(f.operator).recover(), 'NothingToRecover');
    await mined(f.usdc.connect(f.payer).mint(address, 7n * USDC)); // a straggler
    await mined(deposit.connect(f.operator).recover());
    expect(await f.usdc.balanceOf(address)).toBe(100n * USDC);
    expect(await f.usdc.balanceOf(f.payer.address)).toBe(7n * USDC);
  });
});

describe('PaymentDeposit: merchant signatures', () => {
  it('rejects a capture signed by another key', async () => {
    const { paymentId, deposit } = await escrow();
    await expectRevert(
      deposit.capture(...(await captureArgs(deposit, paymentId, 1n, { signer: Wallet.createRandom() }))),
      'InvalidSignature',
    );
  });

  it('rejects a capture after its deadline', async () => {
    const { paymentId, deposit } = await escrow();
    const args = await captureArgs(deposit, paymentId, 1n, { deadline: (await chain.now()) + 10n });
    await chain.increaseTime(11);
    await expectRevert(deposit.capture(...args), 'SignatureExpired');
  });

  it('rejects a replayed capture signature (each digest is used once)', async () => {
    const { paymentId, deposit } = await escrow(100n * USDC);
    const args = await captureArgs(deposit, paymentId, 10n * USDC);
    await mined(deposit.capture(...args));
    await expectRevert(deposit.capture(...args), 'SignatureAlreadyUsed');
  });

  it('rejects a signature made for another deposit contract, even for the same payment id and key', async () => {
    const paymentId = newPaymentId();
    const other = id('merchant:same-signer');
    await mined(f.registry.setMerchant(other, f.merchantSigner.address, f.settlement));
    const usdc = await f.usdc.getAddress();
    const deposits: PaymentDepositContract[] = [];
    for (const merchantId of [f.merchantId, other]) {
      const address = await f.paymentFactory.depositAddress(merchantId, paymentId);
      await mined(f.usdc.mint(address, 10n * USDC));
      deposits.push(await deploy(paymentId, PaymentMethod.TWO_STEP, 10n * USDC, { merchantId, token: usdc }));
    }
    const [a, b] = deposits;
    if (!a || !b) throw new Error('unreachable');
    const forA = await captureArgs(a, paymentId, 10n * USDC);
    await expectRevert(b.capture(...forA), 'InvalidSignature');
    await mined(a.capture(...forA));
  });

  it('computes the same digests as the @stablepay/evm typed data for Capture, Refund and Rescue', async () => {
    const { paymentId, deposit } = await escrow();
    const address = await deposit.getAddress();
    const domain = stablepayDomain(f.chainId, address);
    const token = await f.usdc.getAddress();
    expect(await deposit.hashCapture(token, 5n, 9n)).toBe(
      TypedDataEncoder.hash(domain, CAPTURE_TYPES, { paymentId, token, amount: 5n, deadline: 9n }),
    );
    expect(await deposit.hashRefund(token, 5n, 9n)).toBe(
      TypedDataEncoder.hash(domain, REFUND_TYPES, { paymentId, token, amount: 5n, deadline: 9n }),
    );
    expect(await deposit.hashRescue(token, f.stranger.address, 5n, 9n)).toBe(
      TypedDataEncoder.hash(domain, RESCUE_TYPES, {
        paymentId,
        token,
        to: f.stranger.address,
        amount: 5n,
        deadline: 9n,
      }),
    );
    const typeHash = (types: Parameters<typeof TypedDataEncoder.from>[0], name: string) =>
      keccak256(toUtf8Bytes(TypedDataEncoder.from(types).encodeType(name)));
    expect(await deposit.CAPTURE_TYPEHASH()).toBe(typeHash(CAPTURE_TYPES, 'Capture'));
    expect(await deposit.REFUND_TYPEHASH()).toBe(typeHash(REFUND_TYPES, 'Refund'));
    expect(await deposit.RESCUE_TYPEHASH()).toBe(typeHash(RESCUE_TYPES, 'Rescue'));
    const d = await deposit.eip712Domain();
    expect([d.name, d.version, d.chainId, d.verifyingContract]).toEqual([
      'Stablepay',
      '1',
      f.chainId,
      address,
    ]);
  });
});

describe('PaymentDeposit: rescue', () => {
  it('moves another token stranded in the deposit to the merchant-signed destination', async () => {
    const { paymentId, deposit, address } = await escrow();
    await mined(f.dai.mint(address, parseEther('3')));
    const dai = await f.dai.getAddress();
    const to = f.stranger.address;
    const sig = await signRescue(f.merchantSigner, f.chainId, address, {
      paymentId,
      token: dai,
      to,
      amount: parseEther('3'),
      deadline: FAR_DEADLINE,
    });
    await expectRevert(
      deposit.rescue(dai, f.relayer.address, parseEther('3'), FAR_DEADLINE, sig),
      'InvalidSignature',
    );
    const receipt = await mined(deposit.rescue(dai, to, parseEther('3'), FAR_DEADLINE, sig));
    expect(eventIn<Ev, 'PaymentRescued'>(receipt, deposit, 'PaymentRescued')).toMatchObject({
      token: dai,
      to,
      amount: parseEther('3'),
    });
    expect(await f.dai.balanceOf(to)).toBe(parseEther('3'));
  });

  it('never touches the escrow: only a straggler above it can be rescued in the payment token', async () => {
    const { paymentId, deposit, address } = await escrow(100n * USDC);
    await mined(f.usdc.mint(address, 2n * USDC));
    const usdc = await f.usdc.getAddress();
    const sign = (amount: bigint) =>
      signRescue(f.merchantSigner, f.chainId, address, {
        paymentId,
        token: usdc,
        to: f.stranger.address,
        amount,
        deadline: FAR_DEADLINE,
      });
    const err = await expectRevert(
      deposit.rescue(usdc, f.stranger.address, 3n * USDC, FAR_DEADLINE, await sign(3n * USDC)),
      'AmountExceedsAvailable',
    );
    expect(err.args).toEqual({ amount: 3n * USDC, available: 2n * USDC });
    await mined(deposit.rescue(usdc, f.stranger.address, 2n * USDC, FAR_DEADLINE, await sign(2n * USDC)));
    expect((await deposit.payment()).escrowed).toBe(100n * USDC);
  });

  it('rescues native coin that reached the address before deployment', async () => {
    const paymentId = newPaymentId();
    const address = await f.paymentFactory.depositAddress(f.merchantId, paymentId);
    await chain.provider.send('anvil_setBalance', [address, toBeHex(parseEther('2'))]);
    const deposit = await deploy(paymentId, PaymentMethod.NONE, 0n);
    const to = Wallet.createRandom().address;
    const sig = await signRescue(f.merchantSigner, f.chainId, address, {
      paymentId,
      token: ZeroAddress,
      to,
      amount: parseEther('2'),
      deadline: FAR_DEADLINE,
    });
    await mined(deposit.rescue(ZeroAddress, to, parseEther('2'), FAR_DEADLINE, sig));
    expect(await chain.provider.getBalance(to)).toBe(parseEther('2'));
  });
});

describe('PaymentDeposit: flagged payments', () => {
  it('a flagged escrow can be neither captured, refunded, rescued nor recovered', async () => {
    const { paymentId, deposit, address } = await escrow(100n * USDC);
    await mined(f.usdc.mint(address, 1n * USDC));
    await expectRevert(
      f.paymentFactory.connect(f.stranger).flagPayment(f.merchantId, paymentId),
      'NotOperator',
    );
    await mined(f.paymentFactory.flagPayment(f.merchantId, paymentId));
    expect(await deposit.flagged()).toBe(true);
    const usdc = await f.usdc.getAddress();
    await expectRevert(deposit.capture(...(await captureArgs(deposit, paymentId, 1n))), 'PaymentIsFlagged');
    const refundSig = await signRefund(f.merchantSigner, f.chainId, address, {
      paymentId,
      token: usdc,
      amount: 1n,
      deadline: FAR_DEADLINE,
    });
    await expectRevert(deposit.refund(usdc, 1n, FAR_DEADLINE, refundSig), 'PaymentIsFlagged');
    const rescueSig = await signRescue(f.merchantSigner, f.chainId, address, {
      paymentId,
      token: usdc,
      to: f.stranger.address,
      amount: 1n,
      deadline: FAR_DEADLINE,
    });
    await expectRevert(
      deposit.rescue(usdc, f.stranger.address, 1n, FAR_DEADLINE, rescueSig),
      'PaymentIsFlagged',
    );
    await expectRevert(deposit.connect(f.operator).recover(), 'PaymentIsFlagged');
    await expectRevert(f.paymentFactory.flagPayment(f.merchantId, paymentId), 'AlreadyFlagged');
    expect(await f.usdc.balanceOf(address)).toBe(101n * USDC);
  });

  it('a payment flagged before deployment cannot be deployed: the deposit stays where it is', async () => {
    const { paymentId, address } = await paid(10n * USDC);
    await mined(f.paymentFactory.flagPayment(f.merchantId, paymentId));
    await expectRevert(
      f.paymentFactory.deployDeposit(
        f.merchantId,
        paymentId,
        PaymentMethod.DIRECT,
        await f.usdc.getAddress(),
        f.payer.address,
        10n * USDC,
      ),
      'PaymentIsFlagged',
    );
    expect(await f.usdc.balanceOf(address)).toBe(10n * USDC);
  });
});

describe('PaymentDeposit and PaymentFactory: input guards', () => {
  it('rejects zero amounts, an amount with method NONE, a zero token or payer, and a zero or self destination', async () => {
    const { paymentId, deposit, address } = await escrow();
    await expectRevert(deposit.capture(...(await captureArgs(deposit, paymentId, 0n))), 'ZeroAmount');
    const usdc = await f.usdc.getAddress();
    const other = await paid(1n);
    await expectRevert(
      f.paymentFactory.deployDeposit(
        f.merchantId,
        other.paymentId,
        PaymentMethod.NONE,
        usdc,
        f.payer.address,
        1n,
      ),
      'InvalidAmount',
    );
    await expectRevert(
      f.paymentFactory.deployDeposit(
        f.merchantId,
        other.paymentId,
        PaymentMethod.DIRECT,
        ZeroAddress,
        f.payer.address,
        1n,
      ),
      'ZeroAddress',
    );
    await expectRevert(
      f.paymentFactory.deployDeposit(
        f.merchantId,
        other.paymentId,
        PaymentMethod.DIRECT,
        usdc,
        ZeroAddress,
        1n,
      ),
      'ZeroAddress',
    );
    for (const to of [ZeroAddress, address]) {
      const sig = await signRescue(f.merchantSigner, f.chainId, address, {
        paymentId,
        token: usdc,
        to,
        amount: 1n,
        deadline: FAR_DEADLINE,
      });
      await expectRevert(deposit.rescue(usdc, to, 1n, FAR_DEADLINE, sig), 'InvalidDestination');
    }
  });

  it('reports a native rescue to a contract that refuses the coin', async () => {
    const paymentId = newPaymentId();
    const address = await f.paymentFactory.depositAddress(f.merchantId, paymentId);
    await chain.provider.send('anvil_setBalance', [address, toBeHex(1000n)]);
    const deposit = await deploy(paymentId, PaymentMethod.NONE, 0n);
    const to = await f.usdc.getAddress(); // no receive function
    const sig = await signRescue(f.merchantSigner, f.chainId, address, {
      paymentId,
      token: ZeroAddress,
      to,
      amount: 1000n,
      deadline: FAR_DEADLINE,
    });
    await expectRevert(deposit.rescue(ZeroAddress, to, 1000n, FAR_DEADLINE, sig), 'NativeTransferFailed');
  });
});

describe('StablepayRegistry', () => {
  it('lets only the operator configure merchants, and rotates the operator in two steps', async () => {
    await expectRevert(
      f.registry.connect(f.stranger).setMerchant(id('m'), f.stranger.address, f.stranger.address),
      'NotOperator',
    );
    await expectRevert(f.registry.setOperatorPauser(ZeroAddress), 'ZeroAddress');
    await mined(f.registry.transferOperator(f.newWallet.address));
    expect(await f.registry.operator()).toBe(f.operator.address);
    await expectRevert(f.registry.connect(f.stranger).acceptOperator(), 'NotPendingOperator');
    await mined(f.registry.connect(f.newWallet).acceptOperator());
    expect(await f.registry.operator()).toBe(f.newWallet.address);
    await expectRevert(f.paymentFactory.flagPayment(f.merchantId, id('p')), 'NotOperator');
    await mined(f.paymentFactory.connect(f.newWallet).flagPayment(f.merchantId, id('p')));
  });
});

describe('PaymentDeposit: reentrancy', () => {
  it('a token that calls back into the deposit during a capture is stopped by the reentrancy lock', async () => {
    const hook = await deployHookToken(f.operator);
    const token = await hook.getAddress();
    const paymentId = newPaymentId();
    const address = await f.paymentFactory.depositAddress(f.merchantId, paymentId);
    await mined(hook.mint(address, 100n * USDC));
    const deposit = await deploy(paymentId, PaymentMethod.TWO_STEP, 100n * USDC, { token });
    const sign = (amount: bigint) =>
      signCapture(f.merchantSigner, f.chainId, address, { paymentId, token, amount, deadline: FAR_DEADLINE });
    const reenter = deposit.interface.encodeFunctionData('capture', [
      token,
      1n,
      FAR_DEADLINE,
      await sign(1n),
    ]);
    await mined(hook.setHook(address, reenter));
    await expectRevert(
      deposit.capture(token, 50n * USDC, FAR_DEADLINE, await sign(50n * USDC)),
      'ReentrantCall',
    );
    expect((await deposit.payment()).escrowed).toBe(100n * USDC);
  });
});
