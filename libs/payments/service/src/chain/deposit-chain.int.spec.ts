import { ZeroAddress, id, parseEther } from 'ethers';
import { signCapture, signRefund, signRescue } from '@stablepay/merchant-sdk';
import { startDepositFixture, type DepositFixture } from './testing/deposit-fixture';

const USDC = 10n ** 6n;
let f: DepositFixture;
let counter = 0;

beforeAll(async () => {
  f = await startDepositFixture();
});
afterAll(async () => {
  await f?.stop();
});

function newPaymentId(): string {
  counter += 1;
  return id(`deposit-chain-spec-${counter}`);
}

async function paid(amount: bigint): Promise<{ paymentId: string; deposit: string }> {
  const paymentId = newPaymentId();
  const deposit = await f.depositAddress(paymentId);
  await f.pay(deposit, amount);
  return { paymentId, deposit };
}

async function escrow(amount: bigint): Promise<{ paymentId: string; deposit: string }> {
  const p = await paid(amount);
  await f.deploy(p.paymentId, 'TWO_STEP', amount);
  return p;
}

const domain = (deposit: string) => ({ chain: f.chain.caip2, verifyingContract: deposit });
const soon = async () => (await f.chainTime()) + 3_600n;
const balance = (token: string, holder: string) => f.deposits.balanceOf(token, holder);

describe('DepositChain (PaymentDeposit calls through the relayer, on anvil)', () => {
  it('reads an undeployed deposit as not deployed, a deployed one with its record', async () => {
    const { paymentId, deposit } = await paid(100n * USDC);
    expect(await f.deposits.readDeposit(deposit)).toEqual({ deployed: false });
    await f.deploy(paymentId, 'TWO_STEP', 100n * USDC);
    const record = await f.deposits.readDeposit(deposit);
    expect(record).toMatchObject({
      deployed: true,
      merchantId: f.merchantOnChainId,
      paymentId,
      token: f.usdc,
      method: 'TWO_STEP',
      payer: f.payer.address,
      settlement: f.settlement,
      escrowed: 100n * USDC,
      flagged: false,
    });
    expect(await f.deposits.merchantAuth(f.merchantOnChainId)).toEqual({
      signer: f.merchantSigner.address,
      epoch: 0n,
    });
  });

  it('captures part of an escrow to the settlement address with a signCapture signature', async () => {
    const { paymentId, deposit } = await escrow(100n * USDC);
    const deadline = await soon();
    const { signature } = await signCapture(f.merchantSigner, domain(deposit), {
      paymentId,
      token: f.usdc,
      amount: 60n * USDC,
      epoch: 0,
      deadline,
    });
    const before = await balance(f.usdc, f.settlement);
    const outcome = await f.deposits.capture(deposit, {
      token: f.usdc,
      amount: 60n * USDC,
      deadline,
      signature,
    });
    expect(outcome).toMatchObject({
      kind: 'confirmed',
      outflows: [
        { kind: 'captured', token: f.usdc, to: f.settlement, amount: 60n * USDC, received: 60n * USDC },
      ],
    });
    expect((await balance(f.usdc, f.settlement)) - before).toBe(60n * USDC);
    expect(
      (await f.deposits.readDeposit(deposit)).deployed && (await f.deposits.readDeposit(deposit)),
    ).toMatchObject({
      escrowed: 40n * USDC,
    });
  });

  it('answers a replayed capture signature as a rejection (SignatureAlreadyUsed) and sends nothing', async () => {
    const { paymentId, deposit } = await escrow(100n * USDC);
    const deadline = await soon();
    const signed = await signCapture(f.merchantSigner, domain(deposit), {
      paymentId,
      token: f.usdc,
      amount: 10n * USDC,
      epoch: 0,
      deadline,
    });
    const move = { token: f.usdc, amount: 10n * USDC, deadline, signature: signed.signature };
    expect((await f.deposits.capture(deposit, move)).kind).toBe('confirmed');
    const nonce = await f.provider.getTransactionCount(f.relayer.address);
    expect(await f.deposits.capture(deposit, move)).toMatchObject({
      kind: 'rejected',
      errorName: 'SignatureAlreadyUsed',
    });
    expect(await f.provider.getTransactionCount(f.relayer.address)).toBe(nonce);
  });

  it('refunds the escrow to the attested payer with a signRefund signature', async () => {
    const { paymentId, deposit } = await escrow(100n * USDC);
    const deadline = await soon();
    const { signature } = await signRefund(f.merchantSigner, domain(deposit), {
      paymentId,
      token: f.usdc,
      payer: f.payer.address,
      amount: 100n * USDC,
      epoch: 0,
      deadline,
    });
    const before = await balance(f.usdc, f.payer.address);
    const outcome = await f.deposits.refund(deposit, {
      token: f.usdc,
      payer: f.payer.address,
      amount: 100n * USDC,
      deadline,
      signature,
    });
    expect(outcome).toMatchObject({
      kind: 'confirmed',
      outflows: [{ kind: 'refunded', to: f.payer.address, amount: 100n * USDC }],
    });
    expect((await balance(f.usdc, f.payer.address)) - before).toBe(100n * USDC);
  });

  it('rejects a capture signed by another key (InvalidSignature) in simulation', async () => {
    const { paymentId, deposit } = await escrow(100n * USDC);
    const deadline = await soon();
    const { signature } = await signCapture(f.stranger, domain(deposit), {
      paymentId,
      token: f.usdc,
      amount: 1n,
      epoch: 0,
      deadline,
    });
    expect(
      await f.deposits.capture(deposit, { token: f.usdc, amount: 1n, deadline, signature }),
    ).toMatchObject({
      kind: 'rejected',
      errorName: 'InvalidSignature',
    });
  });

  it('rescues another token sent to the deposit, and refuses the payment token (PayerOwnedToken)', async () => {
    const { paymentId, deposit } = await paid(100n * USDC);
    await f.pay(deposit, parseEther('3'), f.dai);
    await f.deploy(paymentId, 'DIRECT', 100n * USDC);
    const deadline = await soon();
    const to = f.stranger.address;
    const rescue = await signRescue(f.merchantSigner, domain(deposit), {
      paymentId,
      token: f.dai,
      to,
      amount: parseEther('3'),
      epoch: 0,
      deadline,
    });
    const before = await balance(f.dai, to);
    expect(
      await f.deposits.rescue(deposit, {
        token: f.dai,
        to,
        amount: parseEther('3'),
        deadline,
        signature: rescue.signature,
      }),
    ).toMatchObject({
      kind: 'confirmed',
      outflows: [{ kind: 'rescued', token: f.dai, to, amount: parseEther('3') }],
    });
    expect((await balance(f.dai, to)) - before).toBe(parseEther('3'));

    const own = await signRescue(f.merchantSigner, domain(deposit), {
      paymentId,
      token: f.usdc,
      to,
      amount: 1n,
      epoch: 0,
      deadline,
    });
    expect(
      await f.deposits.rescue(deposit, { token: f.usdc, to, amount: 1n, deadline, signature: own.signature }),
    ).toMatchObject({ kind: 'rejected', errorName: 'PayerOwnedToken' });
  });

  it('rescues the native coin', async () => {
    const { paymentId, deposit } = await paid(100n * USDC);
    await (await f.payer.sendTransaction({ to: deposit, value: parseEther('0.5') })).wait();
    await f.deploy(paymentId, 'DIRECT', 100n * USDC);
    const deadline = await soon();
    const to = f.stranger.address;
    const { signature } = await signRescue(f.merchantSigner, domain(deposit), {
      paymentId,
      token: ZeroAddress,
      to,
      amount: parseEther('0.5'),
      epoch: 0,
      deadline,
    });
    const before = await balance(ZeroAddress, to);
    expect(
      await f.deposits.rescue(deposit, {
        token: ZeroAddress,
        to,
        amount: parseEther('0.5'),
        deadline,
        signature,
      }),
    ).toMatchObject({
      kind: 'confirmed',
      outflows: [{ kind: 'rescued', token: ZeroAddress, to, amount: parseEther('0.5') }],
    });
    expect((await balance(ZeroAddress, to)) - before).toBe(parseEther('0.5'));
  });

  it('recovers an over-deposit to the payer once the payer is final, never before', async () => {
    const { paymentId, deposit } = await paid(150n * USDC);
    await f.deploy(paymentId, 'DIRECT', 100n * USDC);
    expect(await f.deposits.recover(deposit)).toMatchObject({ kind: 'rejected', errorName: 'PayerNotFinal' });
    await f.increaseTime(86_400n);
    const before = await balance(f.usdc, f.payer.address);
    expect(await f.deposits.recover(deposit)).toMatchObject({
      kind: 'confirmed',
      outflows: [{ kind: 'recovered', to: f.payer.address, amount: 50n * USDC }],
    });
    expect((await balance(f.usdc, f.payer.address)) - before).toBe(50n * USDC);
    expect(await f.deposits.recover(deposit)).toMatchObject({
      kind: 'rejected',
      errorName: 'NothingToRecover',
    });
  });

  it('reclaims an escrow to the payer after the authorization expiry, and reads a reclaim someone else sent', async () => {
    const { paymentId, deposit } = await paid(100n * USDC);
    const expiry = (await f.chainTime()) + 2n * 86_400n;
    await f.deploy(paymentId, 'TWO_STEP', 100n * USDC, { authorizationExpiry: expiry });
    expect(await f.deposits.reclaim(deposit)).toMatchObject({
      kind: 'rejected',
      errorName: 'AuthorizationNotExpired',
    });
    await f.increaseTime(2n * 86_400n + 1n);
    const outcome = await f.deposits.reclaim(deposit);
    expect(outcome).toMatchObject({
      kind: 'confirmed',
      outflows: [{ kind: 'reclaimed', to: f.payer.address, amount: 100n * USDC }],
    });
    if (outcome.kind !== 'confirmed') throw new Error('unreachable');
    expect(await f.deposits.outflowsOfTransaction(deposit, outcome.txHash)).toEqual(outcome.outflows);
  });

  it('refuses a capture of a flagged payment (PaymentIsFlagged)', async () => {
    const { paymentId, deposit } = await escrow(100n * USDC);
    await f.flag(paymentId);
    const deadline = await soon();
    const { signature } = await signCapture(f.merchantSigner, domain(deposit), {
      paymentId,
      token: f.usdc,
      amount: 1n,
      epoch: 0,
      deadline,
    });
    expect(
      (await f.deposits.readDeposit(deposit)).deployed && (await f.deposits.readDeposit(deposit)),
    ).toMatchObject({
      flagged: true,
    });
    expect(
      await f.deposits.capture(deposit, { token: f.usdc, amount: 1n, deadline, signature }),
    ).toMatchObject({
      kind: 'rejected',
      errorName: 'PaymentIsFlagged',
    });
  });
});
