import {
  Signature,
  TypedDataEncoder,
  Wallet,
  ZeroAddress,
  ZeroHash,
  concat,
  id,
  keccak256,
  parseEther,
  toBeHex,
  toUtf8Bytes,
} from 'ethers';
import {
  CAPTURE_TYPES,
  DISPUTE_PAYER_TYPES,
  REFUND_TYPES,
  RESCUE_TYPES,
  stablepayDomain,
} from '@stablepay/evm';
import { computeDepositAddress } from './deployment';
import { PaymentMethod } from './enums';
import {
  PaymentDepositAbi,
  connectPaymentDeposit,
  type PaymentDepositContract,
  type PaymentDepositEventArgs,
} from './generated/PaymentDeposit';
import type { PaymentFactoryEventArgs } from './generated/PaymentFactory';
import type { StablepayRegistryEventArgs } from './generated/StablepayRegistry';
import { deployFeeOnTransferToken, deployHookToken, deployNoReturnToken } from './generated/test-doubles';
import { startTestChain, type TestChain } from './test-support/anvil';
import {
  soon,
  deployFixture,
  eventIn,
  expectRevert,
  mined,
  changeMerchant,
  signCapture,
  signDisputePayer,
  signRefund,
  signRescue,
  signRevokeAuthorizations,
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

/** The secp256k1 group order: (r, n - s) is the malleable twin of (r, s). */
const SECP256K1_N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;

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

/** A TWO_STEP authorization expiry a week after the latest block. */
async function weekAhead(): Promise<bigint> {
  return (await chain.now()) + 7n * 86_400n;
}

async function deploy(
  paymentId: string,
  method: number,
  amount: bigint,
  o: { merchantId?: string; token?: string; payer?: string; expiry?: bigint } = {},
): Promise<PaymentDepositContract> {
  const receipt = await mined(
    f.paymentFactory.deployDeposit(
      o.merchantId ?? f.merchantId,
      paymentId,
      method,
      o.token ?? (await f.usdc.getAddress()),
      o.payer ?? f.payer.address,
      amount,
      o.expiry ?? (method === PaymentMethod.TWO_STEP ? await weekAhead() : 0n),
    ),
  );
  const ev = eventIn<PaymentFactoryEventArgs, 'DepositDeployed'>(
    receipt,
    f.paymentFactory,
    'DepositDeployed',
  );
  return connectPaymentDeposit(ev.deposit, f.relayer);
}

/** Lets the payer attestation's challenge period pass. */
async function payerFinal(deposit: PaymentDepositContract): Promise<void> {
  const finalAt = await deposit.payerFinalAt();
  const now = await chain.now();
  if (finalAt > now) await chain.increaseTime(finalAt - now);
}

async function escrow(
  amount = 100n * USDC,
  o: { expiry?: bigint } = {},
): Promise<{ paymentId: string; deposit: PaymentDepositContract; address: string }> {
  const { paymentId, address } = await paid(amount);
  const deposit = await deploy(paymentId, PaymentMethod.TWO_STEP, amount, o);
  return { paymentId, deposit, address };
}

async function captureArgs(
  deposit: PaymentDepositContract,
  paymentId: string,
  amount: bigint,
  o: { signer?: TypedSigner; deadline?: bigint; chainId?: bigint; epoch?: bigint } = {},
) {
  const token = await f.usdc.getAddress();
  const deadline = o.deadline ?? (await soon(f));
  const sig = await signCapture(
    o.signer ?? f.merchantSigner,
    o.chainId ?? f.chainId,
    await deposit.getAddress(),
    { paymentId, token, amount, deadline, ...(o.epoch === undefined ? {} : { epoch: o.epoch }) },
  );
  return [token, amount, deadline, sig] as const;
}

async function refundArgs(
  deposit: PaymentDepositContract,
  paymentId: string,
  amount: bigint,
  payer: string = f.payer.address,
) {
  const token = await f.usdc.getAddress();
  const deadline = await soon(f);
  const sig = await signRefund(f.merchantSigner, f.chainId, await deposit.getAddress(), {
    paymentId,
    token,
    payer,
    amount,
    deadline,
  });
  return [token, payer, amount, deadline, sig] as const;
}

async function rescueArgs(
  deposit: PaymentDepositContract,
  paymentId: string,
  token: string,
  to: string,
  amount: bigint,
) {
  const deadline = await soon(f);
  const sig = await signRescue(f.merchantSigner, f.chainId, await deposit.getAddress(), {
    paymentId,
    token,
    to,
    amount,
    deadline,
  });
  return [token, to, amount, deadline, sig] as const;
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
        .deployDeposit(f.merchantId, paymentId, PaymentMethod.DIRECT, usdc, f.payer.address, 10n * USDC, 0n),
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
        0n,
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
        0n,
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
        0n,
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
        0n,
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
        0n,
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

  it('leaves an over-deposit in place; the operator recovers it to the payer once the attestation is final', async () => {
    const { paymentId, address } = await paid(30n * USDC);
    const deposit = await deploy(paymentId, PaymentMethod.DIRECT, 25n * USDC);
    await expectRevert(deposit.connect(f.stranger).recover(), 'NotOperator');
    await expectRevert(deposit.connect(f.operator).recover(), 'PayerNotFinal');
    await payerFinal(deposit);
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
        0n,
      ),
    );
    const ev = eventIn<Ev, 'PaymentSettled'>(
      receipt,
      connectPaymentDeposit(address, f.relayer),
      'PaymentSettled',
    );
    expect([ev.amount, ev.received]).toEqual([100n * USDC, 99n * USDC]);
  });

  it('forwards a token whose transfer returns nothing (USDT-style), and refuses one that returns false', async () => {
    const token = await deployNoReturnToken(f.operator);
    const tokenAddress = await token.getAddress();
    const paymentId = newPaymentId();
    const address = await f.paymentFactory.depositAddress(f.merchantId, paymentId);
    await mined(token.mint(address, 100n * USDC));
    const args = [
      f.merchantId,
      paymentId,
      PaymentMethod.DIRECT,
      tokenAddress,
      f.payer.address,
      100n * USDC,
      0n,
    ] as const;
    await mined(token.setReturnFalse(true));
    const err = await expectRevert(f.paymentFactory.deployDeposit(...args), 'TokenTransferFailed');
    expect(err.args).toEqual({ token: tokenAddress });
    await mined(token.setReturnFalse(false));
    await mined(f.paymentFactory.deployDeposit(...args));
    expect(await token.balanceOf(f.settlement)).toBe(100n * USDC);
    expect(await token.balanceOf(address)).toBe(0n);
  });
});

describe('PaymentDeposit: abandoned deposit', () => {
  it('is deployed with method NONE (nothing settled) and recovered to the payer; recover takes no destination', async () => {
    const { paymentId, address } = await paid(40n * USDC);
    const deposit = await deploy(paymentId, PaymentMethod.NONE, 0n);
    expect(await f.usdc.balanceOf(address)).toBe(40n * USDC);
    const recoverFn = PaymentDepositAbi.find((x) => x.type === 'function' && x.name === 'recover');
    expect(recoverFn && 'inputs' in recoverFn ? recoverFn.inputs : undefined).toEqual([]);
    await payerFinal(deposit);
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
    await changeMerchant(f, f.merchantSigner.address, f.stranger.address);
    await mined(deposit.capture(...(await captureArgs(deposit, paymentId, 10n * USDC, { epoch: 1n }))));
    expect(await f.usdc.balanceOf(f.settlement)).toBe(10n * USDC);
  });

  it('refunds to the payer recorded at deployment on a merchant-signed Refund naming that payer', async () => {
    const { paymentId, deposit } = await escrow(100n * USDC);
    const receipt = await mined(deposit.refund(...(await refundArgs(deposit, paymentId, 100n * USDC))));
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
    const deadline = await soon(f);
    const sig = await signCapture(f.merchantSigner, f.chainId, await deposit.getAddress(), {
      paymentId,
      token: dai,
      amount: 1n,
      deadline,
    });
    await expectRevert(deposit.capture(dai, 1n, deadline, sig), 'WrongToken');
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
    await payerFinal(deposit);
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

  it('refuses the malleable twin of a signature, and any signature for a merchant with no signer', async () => {
    const { paymentId, deposit } = await escrow(100n * USDC);
    const [token, amount, deadline, sig] = await captureArgs(deposit, paymentId, 10n * USDC);
    // (r, n - s) with the other v recovers to the same key; only the low-s form is accepted (the burn is keyed by
    // the digest, so a twin could not be a second use either).
    const { r, s, v } = Signature.from(sig);
    const twin = concat([r, toBeHex(SECP256K1_N - BigInt(s), 32), v === 27 ? '0x1c' : '0x1b']);
    await expectRevert(deposit.capture(token, amount, deadline, twin), 'InvalidSignature');
    await mined(deposit.capture(token, amount, deadline, sig));
    // A merchant not registered on this chain has the zero address as signer: r = s = 0, which ecrecover answers
    // with the zero address, must not stand for it.
    const unregistered = id('merchant:unregistered');
    const stray = await paid(5n * USDC, unregistered);
    const deposit2 = await deploy(stray.paymentId, PaymentMethod.NONE, 0n, { merchantId: unregistered });
    const zero = concat([ZeroHash, ZeroHash, '0x1b']);
    await expectRevert(deposit2.disputePayer(f.payer.address, await soon(f), zero), 'InvalidSignature');
    expect(await deposit2.payerFinalAt()).not.toBe(0n);
  });

  it('rejects a signature made for another deposit contract, even for the same payment id and key', async () => {
    const paymentId = newPaymentId();
    const other = id('merchant:same-signer');
    await mined(f.registry.registerMerchant(other, f.merchantSigner.address, f.settlement));
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
    expect(await deposit.hashCapture(token, 5n, 3n, 9n)).toBe(
      TypedDataEncoder.hash(domain, CAPTURE_TYPES, { paymentId, token, amount: 5n, epoch: 3n, deadline: 9n }),
    );
    const payer = f.payer.address;
    expect(await deposit.hashRefund(token, payer, 5n, 3n, 9n)).toBe(
      TypedDataEncoder.hash(domain, REFUND_TYPES, {
        paymentId,
        token,
        payer,
        amount: 5n,
        epoch: 3n,
        deadline: 9n,
      }),
    );
    expect(await deposit.hashRescue(token, f.stranger.address, 5n, 3n, 9n)).toBe(
      TypedDataEncoder.hash(domain, RESCUE_TYPES, {
        paymentId,
        token,
        to: f.stranger.address,
        amount: 5n,
        epoch: 3n,
        deadline: 9n,
      }),
    );
    expect(await deposit.hashDisputePayer(payer, 3n, 9n)).toBe(
      TypedDataEncoder.hash(domain, DISPUTE_PAYER_TYPES, { paymentId, payer, epoch: 3n, deadline: 9n }),
    );
    const typeHash = (types: Parameters<typeof TypedDataEncoder.from>[0], name: string) =>
      keccak256(toUtf8Bytes(TypedDataEncoder.from(types).encodeType(name)));
    expect(await deposit.CAPTURE_TYPEHASH()).toBe(typeHash(CAPTURE_TYPES, 'Capture'));
    expect(await deposit.REFUND_TYPEHASH()).toBe(typeHash(REFUND_TYPES, 'Refund'));
    expect(await deposit.RESCUE_TYPEHASH()).toBe(typeHash(RESCUE_TYPES, 'Rescue'));
    expect(await deposit.DISPUTE_PAYER_TYPEHASH()).toBe(typeHash(DISPUTE_PAYER_TYPES, 'DisputePayer'));
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
  it('moves another token stranded in the deposit to the merchant-signed destination, submitted by the operator', async () => {
    const { paymentId, deposit, address } = await escrow();
    await mined(f.dai.mint(address, parseEther('3')));
    const dai = await f.dai.getAddress();
    const to = f.stranger.address;
    const [token, , amount, deadline, sig] = await rescueArgs(deposit, paymentId, dai, to, parseEther('3'));
    const byOperator = deposit.connect(f.operator);
    await expectRevert(
      byOperator.rescue(token, f.relayer.address, amount, deadline, sig),
      'InvalidSignature',
    );
    // The merchant (or anyone holding its signature) cannot submit it: only the operator, after screening.
    await expectRevert(deposit.rescue(token, to, amount, deadline, sig), 'NotOperator');
    const receipt = await mined(byOperator.rescue(token, to, amount, deadline, sig));
    expect(eventIn<Ev, 'PaymentRescued'>(receipt, deposit, 'PaymentRescued')).toMatchObject({
      token: dai,
      to,
      amount: parseEther('3'),
    });
    expect(await f.dai.balanceOf(to)).toBe(parseEther('3'));
  });

  it("never moves the payment token: an over-deposit or straggler is the payer's and only recover returns it", async () => {
    const { paymentId, deposit, address } = await escrow(100n * USDC);
    await mined(f.usdc.mint(address, 2n * USDC));
    const usdc = await f.usdc.getAddress();
    const byOperator = deposit.connect(f.operator);
    const err = await expectRevert(
      byOperator.rescue(...(await rescueArgs(deposit, paymentId, usdc, f.stranger.address, 2n * USDC))),
      'PayerOwnedToken',
    );
    expect(err.args).toEqual({ token: usdc });
    // An abandoned deposit (NONE) records the token it was paid in: the same rule applies.
    const abandoned = await paid(5n * USDC);
    const none = await deploy(abandoned.paymentId, PaymentMethod.NONE, 0n);
    await expectRevert(
      none
        .connect(f.operator)
        .rescue(...(await rescueArgs(none, abandoned.paymentId, usdc, f.stranger.address, 5n * USDC))),
      'PayerOwnedToken',
    );
    await payerFinal(none);
    await mined(none.connect(f.operator).recover());
    expect(await f.usdc.balanceOf(f.payer.address)).toBe(5n * USDC);
    expect((await deposit.payment()).escrowed).toBe(100n * USDC);
  });

  it('rejects more than the deposit holds of the rescued token', async () => {
    const { paymentId, deposit, address } = await escrow();
    await mined(f.dai.mint(address, 2n));
    const err = await expectRevert(
      deposit
        .connect(f.operator)
        .rescue(...(await rescueArgs(deposit, paymentId, await f.dai.getAddress(), f.stranger.address, 3n))),
      'AmountExceedsAvailable',
    );
    expect(err.args).toEqual({ amount: 3n, available: 2n });
  });

  it('rescues native coin that reached the address before deployment', async () => {
    const paymentId = newPaymentId();
    const address = await f.paymentFactory.depositAddress(f.merchantId, paymentId);
    await chain.provider.send('anvil_setBalance', [address, toBeHex(parseEther('2'))]);
    const deposit = await deploy(paymentId, PaymentMethod.NONE, 0n);
    const to = Wallet.createRandom().address;
    await mined(
      deposit
        .connect(f.operator)
        .rescue(...(await rescueArgs(deposit, paymentId, ZeroAddress, to, parseEther('2')))),
    );
    expect(await chain.provider.getBalance(to)).toBe(parseEther('2'));
  });
});

describe('PaymentDeposit: flagged payments', () => {
  it('a flagged escrow can be neither captured, refunded, rescued, recovered nor reclaimed', async () => {
    const { paymentId, deposit, address } = await escrow(100n * USDC);
    await mined(f.usdc.mint(address, 1n * USDC));
    await expectRevert(
      f.paymentFactory.connect(f.stranger).flagPayment(f.merchantId, paymentId),
      'NotOperator',
    );
    await mined(f.paymentFactory.flagPayment(f.merchantId, paymentId));
    expect(await deposit.flagged()).toBe(true);
    await expectRevert(deposit.capture(...(await captureArgs(deposit, paymentId, 1n))), 'PaymentIsFlagged');
    await expectRevert(deposit.refund(...(await refundArgs(deposit, paymentId, 1n))), 'PaymentIsFlagged');
    await mined(f.dai.mint(address, 1n));
    const dai = await f.dai.getAddress();
    await expectRevert(
      deposit
        .connect(f.operator)
        .rescue(...(await rescueArgs(deposit, paymentId, dai, f.stranger.address, 1n))),
      'PaymentIsFlagged',
    );
    await payerFinal(deposit);
    await expectRevert(deposit.connect(f.operator).recover(), 'PaymentIsFlagged');
    await chain.increaseTime(8n * 86_400n);
    await expectRevert(deposit.reclaim(), 'PaymentIsFlagged');
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
        0n,
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
        0n,
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
        0n,
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
        0n,
      ),
      'ZeroAddress',
    );
    const dai = await f.dai.getAddress();
    for (const to of [ZeroAddress, address]) {
      await expectRevert(
        deposit.connect(f.operator).rescue(...(await rescueArgs(deposit, paymentId, dai, to, 1n))),
        'InvalidDestination',
      );
    }
  });

  it('reports a native rescue to a contract that refuses the coin', async () => {
    const paymentId = newPaymentId();
    const address = await f.paymentFactory.depositAddress(f.merchantId, paymentId);
    await chain.provider.send('anvil_setBalance', [address, toBeHex(1000n)]);
    const deposit = await deploy(paymentId, PaymentMethod.NONE, 0n);
    const to = await f.usdc.getAddress(); // no receive function
    await expectRevert(
      deposit.connect(f.operator).rescue(...(await rescueArgs(deposit, paymentId, ZeroAddress, to, 1000n))),
      'NativeTransferFailed',
    );
  });
});

describe('PaymentDeposit: the payer (the operator key alone cannot take funds in flight)', () => {
  async function dispute(deposit: PaymentDepositContract, paymentId: string, payer: string) {
    const deadline = await soon(f);
    const sig = await signDisputePayer(f.merchantSigner, f.chainId, await deposit.getAddress(), {
      paymentId,
      payer,
      deadline,
    });
    return deposit.disputePayer(payer, deadline, sig);
  }

  it('a payer the operator attests is not paid before the challenge period; the merchant disputes it and only the admin attests again', async () => {
    // The hot key deploys an abandoned deposit naming itself as the payer and tries to recover at once.
    const { paymentId, address } = await paid(40n * USDC);
    const deposit = await deploy(paymentId, PaymentMethod.NONE, 0n, { payer: f.operator.address });
    const err = await expectRevert(deposit.connect(f.operator).recover(), 'PayerNotFinal');
    expect(err.args['finalAt']).toBe(await deposit.payerFinalAt());
    // Nor can the admin alone replace a payer that stands.
    await expectRevert(deposit.connect(f.admin).attestPayer(f.admin.address), 'PayerNotDisputed');
    // The merchant, which knows the real sender, disputes within the period.
    const receipt = await mined(dispute(deposit, paymentId, f.operator.address));
    expect(eventIn<Ev, 'PayerDisputed'>(receipt, deposit, 'PayerDisputed')).toMatchObject({
      paymentId,
      payer: f.operator.address,
    });
    await chain.increaseTime(2n * 86_400n);
    await expectRevert(deposit.connect(f.operator).recover(), 'PayerUnknown');
    await expectRevert(deposit.connect(f.operator).attestPayer(f.operator.address), 'NotAdmin');
    // The cold admin key attests the real payer, with a fresh challenge period.
    await mined(deposit.connect(f.admin).attestPayer(f.payer.address));
    await expectRevert(deposit.connect(f.operator).recover(), 'PayerNotFinal');
    await payerFinal(deposit);
    await mined(deposit.connect(f.operator).recover());
    expect(await f.usdc.balanceOf(f.payer.address)).toBe(40n * USDC);
    expect(await f.usdc.balanceOf(address)).toBe(0n);
  });

  it('a dispute comes too late once the payer is final, and must name the attested payer', async () => {
    const { paymentId, address } = await paid(10n * USDC);
    const deposit = await deploy(paymentId, PaymentMethod.NONE, 0n);
    await expectRevert(dispute(deposit, paymentId, f.stranger.address), 'PayerMismatch');
    await payerFinal(deposit);
    await expectRevert(dispute(deposit, paymentId, f.payer.address), 'PayerAlreadyFinal');
    expect(await f.usdc.balanceOf(address)).toBe(10n * USDC);
  });

  it('a refund goes only to the payer the merchant signed: an operator-attested payer that differs reverts', async () => {
    const { paymentId, address } = await paid(100n * USDC);
    const deposit = await deploy(paymentId, PaymentMethod.TWO_STEP, 100n * USDC, {
      payer: f.operator.address,
    });
    // The merchant signs a refund to the payer it saw (the indexer's sender), not to whatever the operator recorded.
    const err = await expectRevert(
      deposit.refund(...(await refundArgs(deposit, paymentId, 100n * USDC, f.payer.address))),
      'PayerMismatch',
    );
    expect(err.args).toEqual({ signed: f.payer.address, recorded: f.operator.address });
    // A signature naming the operator's address does not recover to the merchant signer's consent for the real one.
    const [token, , amount, deadline, sig] = await refundArgs(
      deposit,
      paymentId,
      100n * USDC,
      f.payer.address,
    );
    await expectRevert(deposit.refund(token, f.operator.address, amount, deadline, sig), 'InvalidSignature');
    expect(await f.usdc.balanceOf(address)).toBe(100n * USDC);
  });
});

describe('PaymentDeposit: TWO_STEP authorization expiry', () => {
  it('captures only before the expiry; after it the payer reclaims the whole remaining escrow', async () => {
    const expiry = (await chain.now()) + 2n * 86_400n;
    const { paymentId, deposit, address } = await escrow(100n * USDC, { expiry });
    expect((await deposit.payment()).authorizationExpiry).toBe(expiry);
    await mined(deposit.capture(...(await captureArgs(deposit, paymentId, 30n * USDC))));
    await expectRevert(deposit.reclaim(), 'AuthorizationNotExpired');
    await chain.mineAt(expiry);
    await expectRevert(
      deposit.capture(...(await captureArgs(deposit, paymentId, 1n))),
      'AuthorizationExpired',
    );
    const receipt = await mined(deposit.connect(f.stranger).reclaim());
    expect(eventIn<Ev, 'PaymentReclaimed'>(receipt, deposit, 'PaymentReclaimed')).toMatchObject({
      paymentId,
      payer: f.payer.address,
      amount: 70n * USDC,
      received: 70n * USDC,
    });
    expect(await f.usdc.balanceOf(f.payer.address)).toBe(70n * USDC);
    expect(await f.usdc.balanceOf(address)).toBe(0n);
    await expectRevert(deposit.reclaim(), 'NothingToRecover');
  });

  it('a refund still works after the expiry', async () => {
    const expiry = (await chain.now()) + 2n * 86_400n;
    const { paymentId, deposit } = await escrow(10n * USDC, { expiry });
    await chain.mineAt(expiry + 1n);
    await mined(deposit.refund(...(await refundArgs(deposit, paymentId, 10n * USDC))));
    expect(await f.usdc.balanceOf(f.payer.address)).toBe(10n * USDC);
  });

  it('bounds the expiry at deployment: at least an hour, at most 30 days, and only for TWO_STEP', async () => {
    const usdc = await f.usdc.getAddress();
    const { paymentId } = await paid(10n * USDC);
    const now = await chain.now();
    for (const expiry of [now + 60n, now + 31n * 86_400n, 0n]) {
      await expectRevert(
        f.paymentFactory.deployDeposit(
          f.merchantId,
          paymentId,
          PaymentMethod.TWO_STEP,
          usdc,
          f.payer.address,
          10n * USDC,
          expiry,
        ),
        'InvalidAuthorizationExpiry',
      );
    }
    await expectRevert(
      f.paymentFactory.deployDeposit(
        f.merchantId,
        paymentId,
        PaymentMethod.DIRECT,
        usdc,
        f.payer.address,
        10n * USDC,
        now + 86_400n,
      ),
      'InvalidAuthorizationExpiry',
    );
  });
});

describe('PaymentDeposit: bounded and revocable merchant signatures', () => {
  it('refuses a deadline beyond the 7-day horizon', async () => {
    const { paymentId, deposit } = await escrow();
    const tooFar = (await chain.now()) + 8n * 86_400n;
    const err = await expectRevert(
      deposit.capture(...(await captureArgs(deposit, paymentId, 1n, { deadline: tooFar }))),
      'DeadlineTooFar',
    );
    expect(err.args['deadline']).toBe(tooFar);
    expect(await deposit.MAX_SIGNATURE_HORIZON()).toBe(7n * 86_400n);
  });

  it('the merchant signer revokes every outstanding signature at once by bumping its epoch', async () => {
    const { paymentId, deposit } = await escrow();
    const outstanding = await captureArgs(deposit, paymentId, 10n * USDC);
    const deadline = await soon(f);
    const sig = await signRevokeAuthorizations(f.merchantSigner, f.chainId, f.addresses.registry, {
      merchantId: f.merchantId,
      deadline,
    });
    const receipt = await mined(
      f.registry.connect(f.stranger).revokeAuthorizationsBySig(f.merchantId, deadline, sig),
    );
    expect(
      eventIn<StablepayRegistryEventArgs, 'AuthorizationsRevoked'>(
        receipt,
        f.registry,
        'AuthorizationsRevoked',
      ),
    ).toMatchObject({ merchantId: f.merchantId, newEpoch: 1n });
    await expectRevert(deposit.capture(...outstanding), 'InvalidSignature');
    // The same revocation cannot be replayed (it names epoch 0).
    await expectRevert(f.registry.revokeAuthorizationsBySig(f.merchantId, deadline, sig), 'InvalidSignature');
    await mined(deposit.capture(...(await captureArgs(deposit, paymentId, 10n * USDC, { epoch: 1n }))));
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
    const deadline = await soon(f);
    const sign = (amount: bigint) =>
      signCapture(f.merchantSigner, f.chainId, address, { paymentId, token, amount, deadline });
    const reenter = deposit.interface.encodeFunctionData('capture', [token, 1n, deadline, await sign(1n)]);
    await mined(hook.setHook(address, reenter));
    await expectRevert(deposit.capture(token, 50n * USDC, deadline, await sign(50n * USDC)), 'ReentrantCall');
    expect((await deposit.payment()).escrowed).toBe(100n * USDC);
  });
});
