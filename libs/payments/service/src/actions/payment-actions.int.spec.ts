import { ZeroAddress, id, parseEther } from 'ethers';
import { handleCommand } from '@stablepay/aggregate';
import { InMemoryEventStore } from '@stablepay/event-store';
import { formatCaip19 } from '@stablepay/evm';
import { deployCallBatcher } from '@stablepay/local-chains';
import { signCapture, signDisputePayer, signRefund, signRescue } from '@stablepay/merchant-sdk';
import {
  type PaymentCommand,
  addressesToScreen,
  decidePayment,
  evolvePayment,
  initialPaymentState,
  paymentStreamId,
  toPaymentObject,
} from '@stablepay/payments-domain';
import { DomainError, ManualClock } from '@stablepay/util';
import { startDepositFixture, type DepositFixture } from '../chain/testing/deposit-fixture';
import { DepositStore } from '../deposits/deposit.store';
import { startDepositTestbed } from '../deposits/test-support/deposit-testbed';
import { PaymentCommands } from '../payments/payment.commands';
import type { DepositCall, DepositChain } from '../chain/deposit-chain';
import { PaymentActionResumer } from './action-resumer';
import { InMemoryActionSubmissions } from './action-submissions';
import { PaymentActions, type ActionOwner, type DepositChains } from './payment-actions';

const USDC = 10n ** 6n;
const ORDER = 100n * USDC;
type Cmd = PaymentCommand extends infer C ? (C extends { now: Date } ? Omit<C, 'now'> : never) : never;
const decider = { initialState: initialPaymentState, evolve: evolvePayment, decide: decidePayment };

let f: DepositFixture;
let store: InMemoryEventStore;
let clock: ManualClock;
let actions: PaymentActions;
let submissions: InMemoryActionSubmissions;
let counter = 0;
const owner: ActionOwner = { merchantId: 'mer_actions', mode: 'test' };

beforeAll(async () => {
  f = await startDepositFixture();
});
afterAll(async () => {
  await f?.stop();
});
beforeEach(async () => {
  store = new InMemoryEventStore();
  clock = new ManualClock(new Date(Number(await f.chainTime()) * 1000));
  submissions = new InMemoryActionSubmissions();
  actions = new PaymentActions(
    store,
    clock,
    new PaymentCommands(store, clock),
    { for: () => f.deposits },
    submissions,
  );
});

const usdcAsset = () => formatCaip19(f.chain.chainId, f.usdc);

async function append(paymentId: string, command: Cmd): Promise<void> {
  await handleCommand(
    store,
    paymentStreamId(paymentId),
    decider,
    { ...command, now: clock.now() } as PaymentCommand,
    {
      metadata: { merchantId: owner.merchantId, mode: owner.mode },
    },
  );
}

async function syncClock(): Promise<void> {
  clock.set(Number(await f.chainTime()) * 1000);
}

/**
 * A payment whose deposit is funded and deployed on anvil, with the same facts in its stream (what the chain feed
 * and the deploy flow append): `paid` of USDC for an order of ORDER.
 */
async function deployedPayment(
  method: 'DIRECT' | 'TWO_STEP',
  paid = ORDER,
  extra: { dai?: bigint; native?: bigint } = {},
): Promise<{ paymentId: string; onChainId: string; deposit: string }> {
  counter += 1;
  const paymentId = `pay_actions_${counter}_${Date.now()}`;
  const onChainId = id(paymentId);
  const deposit = await f.depositAddress(onChainId);
  await append(paymentId, {
    type: 'CreateCheckout',
    paymentId,
    checkoutId: `chk_actions_${counter}`,
    merchantId: owner.merchantId,
    onChainId,
    depositAddress: deposit,
    checkoutUrl: 'https://pay.example/c',
    input: { amount: ORDER.toString(), currency: 'USD', method },
    context: {
      stablecoins: [
        { asset: usdcAsset(), chain: f.chain.caip2, symbol: 'USDC', decimals: 6, pegCurrency: 'USD' },
      ],
      settlementMode: 'crypto',
    },
  });
  const txHash = await f.pay(deposit, paid);
  const transfer = {
    txHash,
    logIndex: 1,
    from: f.payer.address,
    asset: usdcAsset(),
    chain: f.chain.caip2,
    amount: paid.toString(),
    blockNumber: '1',
  };
  await append(paymentId, { type: 'ObserveTransfer', transfer, blockTime: clock.now() });
  await append(paymentId, { type: 'ConfirmTransfer', chain: f.chain.caip2, txHash, logIndex: 1 });
  await append(paymentId, {
    type: 'RecordScreening',
    result: { kind: 'clear', addresses: [f.payer.address] },
  });
  if (extra.dai) await f.pay(deposit, extra.dai, f.dai);
  if (extra.native) await (await f.payer.sendTransaction({ to: deposit, value: extra.native })).wait();
  const deployTx = await f.deploy(onChainId, method, ORDER);
  await syncClock();
  const chainNow = Number(await f.chainTime()) * 1000;
  const deployed = {
    type: 'RecordDeployed',
    txHash: deployTx,
    chain: f.chain.caip2,
    payer: f.payer.address,
    payerFinalAt: new Date(chainNow + 86_400_000),
    amount: ORDER.toString(),
  } as const;
  await append(
    paymentId,
    method === 'DIRECT'
      ? { ...deployed, method, settlementAddress: f.settlement }
      : { ...deployed, method, authorizationExpiry: new Date(chainNow + 7 * 86_400_000) },
  );
  return { paymentId, onChainId, deposit };
}

async function state(paymentId: string) {
  const events = await store.readStream(paymentStreamId(paymentId));
  const s = events.reduce((acc, e) => evolvePayment(acc, e as never), initialPaymentState());
  return { types: events.map((e) => e.type), object: toPaymentObject(s) };
}

async function refusal(run: Promise<unknown>): Promise<DomainError> {
  try {
    await run;
  } catch (error) {
    if (error instanceof DomainError) return error;
    throw error;
  }
  throw new Error('expected a DomainError');
}

const soon = async () => (await f.chainTime()) + 3_600n;

/** The capture body of the whole order, signed by the merchant. */
const signedCapture = async (p: { onChainId: string; deposit: string }) => {
  const deadline = await soon();
  const { signature } = await signCapture(
    f.merchantSigner,
    { chain: f.chain.caip2, verifyingContract: p.deposit },
    { paymentId: p.onChainId, token: usdcAsset(), amount: ORDER, epoch: 0, deadline },
  );
  return { amount: ORDER.toString(), deadline: deadline.toString(), signature };
};

/** The merchant's DisputePayer body of the payment's attested payer, signed now. */
const signedDispute = async (p: { onChainId: string; deposit: string }) => {
  const deadline = await soon();
  const { signature } = await signDisputePayer(
    f.merchantSigner,
    { chain: f.chain.caip2, verifyingContract: p.deposit },
    { paymentId: p.onChainId, payer: f.payer.address, epoch: 0, deadline },
  );
  return { deadline: deadline.toString(), signature };
};

describe('PaymentActions (use cases over the payment stream and the deposit on anvil)', () => {
  it('captures a TWO_STEP escrow: request, transaction, PaymentCaptured.v1 and status settled', async () => {
    const p = await deployedPayment('TWO_STEP');
    const deadline = await soon();
    const { signature } = await signCapture(
      f.merchantSigner,
      { chain: f.chain.caip2, verifyingContract: p.deposit },
      {
        paymentId: p.onChainId,
        token: usdcAsset(),
        amount: ORDER,
        epoch: 0,
        deadline,
      },
    );
    const before = await f.deposits.balanceOf(f.usdc, f.settlement);
    const answer = await actions.capture(
      owner,
      p.paymentId,
      { amount: ORDER.toString(), deadline: deadline.toString(), signature },
      'cmd-capture-1',
    );
    expect(answer.submission).toBe('confirmed');
    expect((await f.deposits.balanceOf(f.usdc, f.settlement)) - before).toBe(ORDER);
    const { types, object } = await state(p.paymentId);
    expect(types.slice(-2)).toEqual(['PaymentCaptureRequested.v1', 'PaymentCaptured.v1']);
    expect(object.status).toBe('settled');
    expect(object.amount_captured).toBe(ORDER.toString());

    // Replaying the same signature (a new request id): burned on chain, refused before anything is sent.
    const replay = await refusal(
      actions.capture(
        owner,
        p.paymentId,
        { amount: ORDER.toString(), deadline: deadline.toString(), signature },
        'cmd-capture-2',
      ),
    );
    expect([replay.status, replay.code]).toEqual([409, 'payment_not_capturable']);
  });

  it('a retried capture (same command id) answers what happened; a replay under a new id is signature_already_used', async () => {
    const p = await deployedPayment('TWO_STEP');
    const deadline = await soon();
    const { signature } = await signCapture(
      f.merchantSigner,
      { chain: f.chain.caip2, verifyingContract: p.deposit },
      {
        paymentId: p.onChainId,
        token: usdcAsset(),
        amount: 10n * USDC,
        epoch: 0,
        deadline,
      },
    );
    const body = { amount: (10n * USDC).toString(), deadline: deadline.toString(), signature };
    const first = await actions.capture(owner, p.paymentId, body, 'cmd-same');
    const nonce = await f.provider.getTransactionCount(f.relayer.address);
    const retried = await actions.capture(owner, p.paymentId, body, 'cmd-same');
    expect(retried).toMatchObject({ submission: 'replayed', revision: first.revision });
    const again = await refusal(actions.capture(owner, p.paymentId, body, 'cmd-other'));
    expect(again.code).toBe('signature_already_used');
    expect(await f.provider.getTransactionCount(f.relayer.address)).toBe(nonce);
  });

  it("a relayed dispute shows dispute_pending (its log is the indexer's to record); a second one is refused 409 payer_dispute_pending, nothing sent", async () => {
    const p = await deployedPayment('TWO_STEP');
    const answer = await actions.disputePayer(owner, p.paymentId, await signedDispute(p), 'dispute-1');
    expect(answer.submission).toBe('confirmed');
    expect(await f.deposits.readDeposit(p.deposit)).toMatchObject({ payer: ZeroAddress });
    const after = await state(p.paymentId);
    // One confirmation is no depth and no retraction would follow it: the receipt's PayerDisputed is not recorded.
    expect(after.types.at(-1)).toBe('PaymentPayerDisputeRequested.v1');
    expect(after.object).toMatchObject({
      payer_status: 'dispute_pending',
      payer_addresses: [f.payer.address],
    });

    const nonce = await f.provider.getTransactionCount(f.relayer.address);
    const again = await refusal(
      actions.disputePayer(owner, p.paymentId, await signedDispute(p), 'dispute-2'),
    );
    expect([again.status, again.code]).toEqual([409, 'payer_dispute_pending']);
    expect(await f.provider.getTransactionCount(f.relayer.address)).toBe(nonce);
    expect((await state(p.paymentId)).types).toEqual(after.types);
  });

  it('refunds the escrow to the attested payer: PaymentRefunded.v1, status refunded', async () => {
    const p = await deployedPayment('TWO_STEP');
    const deadline = await soon();
    const { signature } = await signRefund(
      f.merchantSigner,
      { chain: f.chain.caip2, verifyingContract: p.deposit },
      {
        paymentId: p.onChainId,
        token: usdcAsset(),
        payer: f.payer.address,
        amount: ORDER,
        epoch: 0,
        deadline,
      },
    );
    const before = await f.deposits.balanceOf(f.usdc, f.payer.address);
    await actions.refund(
      owner,
      p.paymentId,
      { amount: ORDER.toString(), deadline: Number(deadline), signature },
      'r1',
    );
    expect((await f.deposits.balanceOf(f.usdc, f.payer.address)) - before).toBe(ORDER);
    const { types, object } = await state(p.paymentId);
    expect(types.at(-1)).toBe('PaymentRefunded.v1');
    expect(object.status).toBe('refunded');
  });

  it("refuses a capture signed by another key, and another merchant's payment as not found, sending nothing", async () => {
    const p = await deployedPayment('TWO_STEP');
    const deadline = await soon();
    const { signature } = await signCapture(
      f.stranger,
      { chain: f.chain.caip2, verifyingContract: p.deposit },
      {
        paymentId: p.onChainId,
        token: usdcAsset(),
        amount: ORDER,
        epoch: 0,
        deadline,
      },
    );
    const body = { amount: ORDER.toString(), deadline: deadline.toString(), signature };
    const nonce = await f.provider.getTransactionCount(f.relayer.address);
    const bad = await refusal(actions.capture(owner, p.paymentId, body, 'x1'));
    expect([bad.status, bad.type, bad.code, bad.param]).toEqual([
      422,
      'cannot_process',
      'invalid_signature',
      'signature',
    ]);
    const other = await refusal(
      actions.capture({ merchantId: 'mer_other', mode: 'test' }, p.paymentId, body, 'x2'),
    );
    expect(other.status).toBe(404);
    const live = await refusal(actions.capture({ ...owner, mode: 'live' }, p.paymentId, body, 'x3'));
    expect(live.status).toBe(404);
    expect(await f.provider.getTransactionCount(f.relayer.address)).toBe(nonce);
    expect((await state(p.paymentId)).types.at(-1)).toBe('PaymentEscrowFunded.v1');
  });

  it('refuses capture and refund of a flagged payment', async () => {
    const p = await deployedPayment('TWO_STEP');
    await append(p.paymentId, {
      type: 'RecordScreening',
      result: { kind: 'match', address: f.payer.address },
    });
    const body = { amount: '1', deadline: (await soon()).toString(), signature: `0x${'11'.repeat(64)}1b` };
    expect((await refusal(actions.capture(owner, p.paymentId, body, 'f1'))).code).toBe('payment_flagged');
    expect((await refusal(actions.refund(owner, p.paymentId, body, 'f2'))).code).toBe('payment_flagged');
  });

  it('rescues another ERC-20 and the native coin sent to a DIRECT deposit; refuses the payment token', async () => {
    const p = await deployedPayment('DIRECT', ORDER, { dai: parseEther('2'), native: parseEther('0.25') });
    const to = f.stranger.address;
    const domain = { chain: f.chain.caip2, verifyingContract: p.deposit };
    const deadline = await soon();
    const dai = await signRescue(f.merchantSigner, domain, {
      paymentId: p.onChainId,
      token: f.dai,
      to,
      amount: parseEther('2'),
      epoch: 0,
      deadline,
    });
    const daiBefore = await f.deposits.balanceOf(f.dai, to);
    await actions.rescue(
      owner,
      p.paymentId,
      {
        token: formatCaip19(f.chain.chainId, f.dai),
        to,
        amount: parseEther('2').toString(),
        deadline: deadline.toString(),
        signature: dai.signature,
      },
      'rescue-dai',
    );
    expect((await f.deposits.balanceOf(f.dai, to)) - daiBefore).toBe(parseEther('2'));

    const native = await signRescue(f.merchantSigner, domain, {
      paymentId: p.onChainId,
      token: ZeroAddress,
      to,
      amount: parseEther('0.25'),
      epoch: 0,
      deadline,
    });
    const nativeBefore = await f.deposits.balanceOf(ZeroAddress, to);
    await actions.rescue(
      owner,
      p.paymentId,
      {
        token: 'native',
        to,
        amount: parseEther('0.25').toString(),
        deadline: deadline.toString(),
        signature: native.signature,
      },
      'rescue-native',
    );
    expect((await f.deposits.balanceOf(ZeroAddress, to)) - nativeBefore).toBe(parseEther('0.25'));
    expect((await state(p.paymentId)).types.filter((t) => t === 'PaymentRescued.v1')).toHaveLength(2);

    const own = await refusal(
      actions.rescue(
        owner,
        p.paymentId,
        { token: f.usdc, to, amount: '1', deadline: deadline.toString(), signature: native.signature },
        'rescue-own',
      ),
    );
    expect(own.code).toBe('payer_owned_token');
  });

  it('recovers an over-deposit to the payer once final: recoverable -> PaymentRecovered.v1 -> settled', async () => {
    const p = await deployedPayment('DIRECT', ORDER + 30n * USDC);
    const recoverable = await state(p.paymentId);
    expect(recoverable.object).toMatchObject({
      status: 'recoverable',
      recoverable_reason: 'over_deposit',
      recovery_destination: f.payer.address,
    });
    expect((await refusal(actions.recover(owner, p.paymentId, 'rec-early'))).code).toBe('payer_not_final');
    await f.increaseTime(86_400n + 1n);
    // The service clock stays inside the challenge period: the check follows block time, as the contract does.
    const before = await f.deposits.balanceOf(f.usdc, f.payer.address);
    await actions.recover(owner, p.paymentId, 'rec-1');
    expect((await f.deposits.balanceOf(f.usdc, f.payer.address)) - before).toBe(30n * USDC);
    const { types, object } = await state(p.paymentId);
    expect(types.slice(-2)).toEqual(['PaymentRecoverRequested.v1', 'PaymentRecovered.v1']);
    expect(object.status).toBe('settled');
    expect((await refusal(actions.recover(owner, p.paymentId, 'rec-2'))).code).toBe('nothing_to_recover');
  });

  it('reclaims an escrow whose authorization expired through recover: PaymentReclaimed.v1, status refunded', async () => {
    const p = await deployedPayment('TWO_STEP');
    await f.increaseTime(7n * 86_400n + 1n);
    // Only the chain moved on: the authorization expiry is judged by block time.
    const before = await f.deposits.balanceOf(f.usdc, f.payer.address);
    await actions.recover(owner, p.paymentId, 'reclaim-1');
    expect((await f.deposits.balanceOf(f.usdc, f.payer.address)) - before).toBe(ORDER);
    const { types, object } = await state(p.paymentId);
    expect(types.at(-1)).toBe('PaymentReclaimed.v1');
    expect(object.status).toBe('refunded');
  });

  describe('crash safety and actions taken by others', () => {
    /** The deposit chain of a process that dies in `submit`: before the broadcast, or after it landed. */
    const dying = (when: 'before_broadcast' | 'after_landing'): DepositChains => ({
      for: () =>
        Object.assign(Object.create(f.deposits) as DepositChain, {
          submit: async (call: DepositCall) => {
            if (when === 'after_landing') await f.deposits.submit(call);
            throw new Error('the process died');
          },
        }),
    });
    const processDyingIn = (when: 'before_broadcast' | 'after_landing') =>
      new PaymentActions(store, clock, new PaymentCommands(store, clock), dying(when), submissions);
    const restarted = () =>
      new PaymentActions(
        store,
        clock,
        new PaymentCommands(store, clock),
        { for: () => f.deposits },
        submissions,
      );
    it('a capture requested but never sent (the process died first) is sent by the retry, once', async () => {
      const p = await deployedPayment('TWO_STEP');
      const body = await signedCapture(p);
      const crashed = processDyingIn('before_broadcast');
      await expect(crashed.capture(owner, p.paymentId, body, 'cmd-crash')).rejects.toThrow(
        'the process died',
      );
      expect((await state(p.paymentId)).types.at(-1)).toBe('PaymentCaptureRequested.v1');
      const before = await f.deposits.balanceOf(f.usdc, f.settlement);

      const retried = await restarted().capture(owner, p.paymentId, body, 'cmd-crash');
      expect(retried.submission).toBe('confirmed');
      expect((await f.deposits.balanceOf(f.usdc, f.settlement)) - before).toBe(ORDER);
      const { types, object } = await state(p.paymentId);
      expect(types.slice(-2)).toEqual(['PaymentCaptureRequested.v1', 'PaymentCaptured.v1']);
      expect(object.status).toBe('settled');
      // Done: another retry answers and sends nothing.
      const nonce = await f.provider.getTransactionCount(f.relayer.address);
      expect((await restarted().capture(owner, p.paymentId, body, 'cmd-crash')).submission).toBe('replayed');
      expect(await f.provider.getTransactionCount(f.relayer.address)).toBe(nonce);
    });

    it('the next start sends an unfinished action without any retry (PaymentActionResumer)', async () => {
      const p = await deployedPayment('TWO_STEP');
      const body = await signedCapture(p);
      const crashed = processDyingIn('before_broadcast');
      await expect(crashed.capture(owner, p.paymentId, body, 'cmd-boot')).rejects.toThrow();
      await new PaymentActionResumer(submissions, restarted()).resumeAll();
      const { types, object } = await state(p.paymentId);
      expect(types.at(-1)).toBe('PaymentCaptured.v1');
      expect(object.amount_captured).toBe(ORDER.toString());
      expect(await submissions.unfinished(10)).toEqual([]);
    });

    it('an action that landed before the crash is recorded from the deposit logs on retry, not sent twice', async () => {
      const p = await deployedPayment('TWO_STEP');
      const body = await signedCapture(p);
      const crashed = processDyingIn('after_landing');
      await expect(crashed.capture(owner, p.paymentId, body, 'cmd-landed')).rejects.toThrow();
      expect((await state(p.paymentId)).types.at(-1)).toBe('PaymentCaptureRequested.v1');
      const nonce = await f.provider.getTransactionCount(f.relayer.address);
      const retried = await restarted().capture(owner, p.paymentId, body, 'cmd-landed');
      expect(retried.submission).toBe('replayed');
      expect(await f.provider.getTransactionCount(f.relayer.address)).toBe(nonce);
      const { types, object } = await state(p.paymentId);
      expect(types.at(-1)).toBe('PaymentCaptured.v1');
      expect(object.status).toBe('settled');
    });

    /** The deposit chain after it moved on: every call's simulation (or broadcast) is refused. */
    const refusing = (where: 'simulate' | 'submit'): DepositChains => ({
      for: () =>
        Object.assign(Object.create(f.deposits) as DepositChain, {
          [where]: async () => ({ kind: 'rejected', errorName: 'SignatureExpired' }),
        }),
    });
    const processOn = (chains: DepositChains, kept = submissions) =>
      new PaymentActions(store, clock, new PaymentCommands(store, clock), chains, kept);

    it('a resumed dispute the chain now refuses records PaymentPayerDisputeFailed.v1: a new dispute is accepted', async () => {
      const p = await deployedPayment('TWO_STEP');
      const body = await signedDispute(p);
      await expect(
        processDyingIn('before_broadcast').disputePayer(owner, p.paymentId, body, 'dispute-crash'),
      ).rejects.toThrow('the process died');
      expect((await state(p.paymentId)).types.at(-1)).toBe('PaymentPayerDisputeRequested.v1');

      // The merchant's retry (same Idempotency-Key) finds the call refused by the simulation: nothing to send.
      const retried = await processOn(refusing('simulate')).disputePayer(
        owner,
        p.paymentId,
        body,
        'dispute-crash',
      );
      expect(retried.submission).toBe('replayed');
      const after = await state(p.paymentId);
      expect(after.types.at(-1)).toBe('PaymentPayerDisputeFailed.v1');
      expect(after.object.payer_status).not.toBe('dispute_pending');

      const again = await restarted().disputePayer(owner, p.paymentId, await signedDispute(p), 'dispute-new');
      expect(again.submission).toBe('confirmed');
      expect(await f.deposits.readDeposit(p.deposit)).toMatchObject({ payer: ZeroAddress });
    });

    it('a dispute the next start relays and the chain refuses at the broadcast records PaymentPayerDisputeFailed.v1', async () => {
      const p = await deployedPayment('TWO_STEP');
      await expect(
        processDyingIn('before_broadcast').disputePayer(owner, p.paymentId, await signedDispute(p), 'd-boot'),
      ).rejects.toThrow('the process died');
      await new PaymentActionResumer(submissions, processOn(refusing('submit'))).resumeAll();
      expect((await state(p.paymentId)).types.at(-1)).toBe('PaymentPayerDisputeFailed.v1');
      expect(await submissions.unfinished(10)).toEqual([]);
      const again = await restarted().disputePayer(owner, p.paymentId, await signedDispute(p), 'd-boot-2');
      expect(again.submission).toBe('confirmed');
    });

    it('a refused dispute relay is recorded failed before its call is marked done (a death in between loses nothing)', async () => {
      const p = await deployedPayment('TWO_STEP');
      // The process dies right after the call is marked done.
      const dyingAfterDone = Object.assign(Object.create(submissions) as InMemoryActionSubmissions, {
        markDone: async (...args: Parameters<InMemoryActionSubmissions['markDone']>) => {
          await submissions.markDone(...args);
          throw new Error('the process died');
        },
      });
      await expect(
        processOn(refusing('submit'), dyingAfterDone).disputePayer(
          owner,
          p.paymentId,
          await signedDispute(p),
          'd-done',
        ),
      ).rejects.toThrow('the process died');
      expect((await state(p.paymentId)).types.at(-1)).toBe('PaymentPayerDisputeFailed.v1');
      const again = await restarted().disputePayer(owner, p.paymentId, await signedDispute(p), 'd-done-2');
      expect(again.submission).toBe('confirmed');
    });

    it('a capture relayed by a third party and a reclaim by the payer are recorded from the deposit logs', async () => {
      const captured = await deployedPayment('TWO_STEP');
      const body = await signedCapture(captured);
      // Someone else submits the merchant's signature straight to the deposit.
      const move = {
        token: f.usdc,
        amount: ORDER,
        deadline: BigInt(body.deadline),
        signature: body.signature,
      };
      const byStranger = f.deposits.captureCall(captured.deposit, move);
      await (await f.stranger.sendTransaction(byStranger)).wait();
      await actions.reconcileDeposit(captured.paymentId);
      expect((await state(captured.paymentId)).object).toMatchObject({
        status: 'settled',
        amount_captured: ORDER.toString(),
      });
      // Recorded once, however often it is reconciled.
      const { types } = await state(captured.paymentId);
      await actions.reconcileDeposit(captured.paymentId);
      expect((await state(captured.paymentId)).types).toEqual(types);

      const reclaimed = await deployedPayment('TWO_STEP');
      await f.increaseTime(7n * 86_400n + 1n);
      await (await f.payer.sendTransaction(f.deposits.reclaimCall(reclaimed.deposit))).wait();
      await actions.reconcileDeposit(reclaimed.paymentId);
      const after = await state(reclaimed.paymentId);
      expect(after.types.at(-1)).toBe('PaymentReclaimed.v1');
      expect(after.object.status).toBe('refunded');
    });
  });

  it('our capture a reorg undid, mined again at the same log index, is recorded again when the deposit is reconciled', async () => {
    const p = await deployedPayment('TWO_STEP');
    await actions.capture(owner, p.paymentId, await signedCapture(p), 'cmd-undone');
    const events = await store.readStream(paymentStreamId(p.paymentId));
    const captured = events.find((e) => e.type === 'PaymentCaptured.v1')?.data as {
      txHash: string;
      logIndex: number;
    };
    // The indexer's retraction of the receipt's block undid it (the deposit flow's RetractOutflow); the chain here
    // holds the transaction as the new fork mined it again, at the same log index.
    await append(p.paymentId, {
      type: 'RetractOutflow',
      txHash: captured.txHash,
      logIndex: captured.logIndex,
    });
    expect((await state(p.paymentId)).object).toMatchObject({
      status: 'escrow_confirmed',
      amount_captured: '0',
    });
    await actions.reconcileDeposit(p.paymentId);
    const after = await state(p.paymentId);
    expect(after.types.slice(-2)).toEqual(['PaymentOutflowRetracted.v1', 'PaymentCaptured.v1']);
    expect(after.object).toMatchObject({ status: 'settled', amount_captured: ORDER.toString() });
    // Recorded once, however often it is reconciled.
    await actions.reconcileDeposit(p.paymentId);
    expect((await state(p.paymentId)).types).toEqual(after.types);
  });

  it('a capture and a refund batched into one transaction by the merchant wallet are both recorded from the deposit logs', async () => {
    const p = await deployedPayment('TWO_STEP');
    const deadline = await soon();
    const domain = { chain: f.chain.caip2, verifyingContract: p.deposit };
    const facts = { paymentId: p.onChainId, token: usdcAsset(), epoch: 0, deadline };
    const captured = 60n * USDC + 1n;
    const refunded = ORDER - captured;
    const capture = f.deposits.captureCall(p.deposit, {
      token: f.usdc,
      amount: captured,
      deadline,
      signature: (await signCapture(f.merchantSigner, domain, { ...facts, amount: captured })).signature,
    });
    const refund = f.deposits.refundCall(p.deposit, {
      token: f.usdc,
      amount: refunded,
      deadline,
      payer: f.payer.address,
      signature: (
        await signRefund(f.merchantSigner, domain, { ...facts, payer: f.payer.address, amount: refunded })
      ).signature,
    });
    // A wallet that batches calls (a Safe's multisend, a smart account) sends both in one transaction.
    const batch = await deployCallBatcher(f.stranger);
    const sent = await batch.getFunction('run')([capture.to, refund.to], [capture.data, refund.data]);
    await sent.wait();
    await actions.reconcileDeposit(p.paymentId);
    const { types, object } = await state(p.paymentId);
    expect(types.slice(-2)).toEqual(['PaymentCaptured.v1', 'PaymentRefunded.v1']);
    expect(object).toMatchObject({
      status: 'settled',
      amount_captured: captured.toString(),
      amount_refunded: refunded.toString(),
    });
    expect(await f.deposits.balanceOf(f.usdc, p.deposit)).toBe(0n);
    // Recorded once, however often it is reconciled.
    await actions.reconcileDeposit(p.paymentId);
    expect((await state(p.paymentId)).types).toEqual(types);
  });

  it('a refund refused 409 payer_screening_pending for a payer attested without a screening wakes the deposit worker for it', async () => {
    const testbed = await startDepositTestbed();
    try {
      const p = await deployedPayment('TWO_STEP');
      const log = { chain: f.chain.caip2, logIndex: 0, payer: f.payer.address };
      await append(p.paymentId, {
        type: 'RecordPayerDisputed',
        ...log,
        txHash: id('disputed'),
        blockNumber: '100',
        blockHash: id('block100'),
      });
      // What a stream recorded before attested payers were screened replays to: no event left to start it.
      await append(p.paymentId, {
        type: 'RecordPayerAttested',
        ...log,
        payer: f.stranger.address,
        txHash: id('attested'),
        blockNumber: '101',
        blockHash: id('block101'),
        finalAt: new Date(clock.now().getTime() + 86_400_000),
      });
      const withQueue = new PaymentActions(
        store,
        clock,
        new PaymentCommands(store, clock),
        { for: () => f.deposits },
        submissions,
        undefined,
        testbed.dataSource,
      );
      const refused = await refusal(
        withQueue.refund(
          owner,
          p.paymentId,
          { amount: ORDER.toString(), deadline: '0', signature: '0x' },
          'r-1',
        ),
      );
      expect([refused.status, refused.code]).toEqual([409, 'payer_screening_pending']);
      const jobs = new DepositStore(testbed.dataSource);
      expect(await jobs.dueRetries(clock.now())).toContain(p.paymentId);
      expect(await jobs.attempts(p.paymentId)).toBe(0);
      // What the woken worker's pass screens (deposit-flow advance): the attested payer.
      const events = await store.readStream(paymentStreamId(p.paymentId));
      const replayed = events.reduce((acc, e) => evolvePayment(acc, e as never), initialPaymentState());
      expect(addressesToScreen(replayed).map((a) => a.toLowerCase())).toContain(
        f.stranger.address.toLowerCase(),
      );
    } finally {
      await testbed.stop();
    }
  });

  describe("a payment of the other mode than the deployment's chains (recorded before such checkouts were refused)", () => {
    /** The same service on a live deployment: the test payments of this suite are of the other mode. */
    const onLiveChains = (chains: DepositChains = { for: () => f.deposits }) =>
      new PaymentActions(store, clock, new PaymentCommands(store, clock), chains, submissions, {
        enabled: true,
        mode: 'live',
      });
    const signed = async (p: { onChainId: string; deposit: string }) => {
      const deadline = await soon();
      const domain = { chain: f.chain.caip2, verifyingContract: p.deposit };
      const facts = { paymentId: p.onChainId, token: usdcAsset(), amount: 10n * USDC, epoch: 0, deadline };
      const body = (signature: string) => ({
        amount: (10n * USDC).toString(),
        deadline: deadline.toString(),
        signature,
      });
      return {
        capture: body((await signCapture(f.merchantSigner, domain, facts)).signature),
        refund: body(
          (await signRefund(f.merchantSigner, domain, { ...facts, payer: f.payer.address })).signature,
        ),
        rescue: {
          ...body(
            (
              await signRescue(f.merchantSigner, domain, {
                ...facts,
                token: f.dai,
                to: f.stranger.address,
                amount: parseEther('1'),
              })
            ).signature,
          ),
          token: formatCaip19(f.chain.chainId, f.dai),
          to: f.stranger.address,
          amount: parseEther('1').toString(),
        },
      };
    };

    it('refuses capture, refund, rescue and recover with 409 chain_mode_mismatch, sending and recording nothing', async () => {
      const p = await deployedPayment('TWO_STEP', ORDER, { dai: parseEther('1') });
      const bodies = await signed(p);
      const actionsHere = onLiveChains();
      const before = (await state(p.paymentId)).types;
      const nonce = await f.provider.getTransactionCount(f.relayer.address);
      const balance = await f.deposits.balanceOf(f.usdc, p.deposit);
      const refusals = [
        await refusal(actionsHere.capture(owner, p.paymentId, bodies.capture, 'm-capture')),
        await refusal(actionsHere.refund(owner, p.paymentId, bodies.refund, 'm-refund')),
        await refusal(actionsHere.rescue(owner, p.paymentId, bodies.rescue, 'm-rescue')),
        await refusal(actionsHere.recover(owner, p.paymentId, 'm-recover')),
      ];
      for (const r of refusals)
        expect([r.status, r.type, r.code]).toEqual([409, 'invalid_request', 'chain_mode_mismatch']);
      expect((await state(p.paymentId)).types).toEqual(before);
      expect(await submissions.unfinished(10)).toEqual([]);
      expect(await f.provider.getTransactionCount(f.relayer.address)).toBe(nonce);
      expect(await f.deposits.balanceOf(f.usdc, p.deposit)).toBe(balance);
      // The same signatures on a deployment of the payment's own mode still capture.
      expect((await actions.capture(owner, p.paymentId, bodies.capture, 'm-capture')).submission).toBe(
        'confirmed',
      );
    });

    it('a start on chains of the other mode does not send an unfinished action of such a payment; it stays kept', async () => {
      const p = await deployedPayment('TWO_STEP');
      const body = (await signed(p)).capture;
      const crashed = new PaymentActions(
        store,
        clock,
        new PaymentCommands(store, clock),
        {
          for: () =>
            Object.assign(Object.create(f.deposits) as DepositChain, {
              submit: () => Promise.reject(new Error('the process died')),
            }),
        },
        submissions,
      );
      await expect(crashed.capture(owner, p.paymentId, body, 'm-boot')).rejects.toThrow('the process died');
      const nonce = await f.provider.getTransactionCount(f.relayer.address);
      await new PaymentActionResumer(submissions, onLiveChains()).resumeAll();
      expect(await f.provider.getTransactionCount(f.relayer.address)).toBe(nonce);
      expect((await state(p.paymentId)).types.at(-1)).toBe('PaymentCaptureRequested.v1');
      expect(await submissions.unfinished(10)).toEqual([
        expect.objectContaining({ paymentId: p.paymentId, commandId: 'm-boot' }),
      ]);
    });
  });
});
