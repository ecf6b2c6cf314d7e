import {
  MaxUint256,
  TypedDataEncoder,
  Wallet,
  ZeroHash,
  id,
  keccak256,
  parseEther,
  toUtf8Bytes,
  type HDNodeWallet,
} from 'ethers';
import {
  CANCEL_SUBSCRIPTION_TYPES,
  CHARGE_TYPES,
  SUBSCRIBE_AUTHORIZATION_TYPES,
  encodeType,
  stablepayDomain,
  typeHash as evmTypeHash,
  type SubscribeAuthorizationMessage,
} from '@stablepay/evm';
import { computeSubscriptionManagerAddress } from './deployment';
import { Canceller, PauserRole, SubscriptionStatus } from './enums';
import {
  connectSubscriptionManager,
  type SubscriptionManagerEventArgs,
} from './generated/SubscriptionManager';
import { deployFeeOnTransferToken, deployHookToken, deployNoReturnToken } from './generated/test-doubles';
import { startTestChain, type TestChain } from './test-support/anvil';
import {
  blockTimestamp,
  changeMerchant,
  soon,
  deployFixture,
  eventIn,
  eventsIn,
  expectRevert,
  mined,
  signCancel,
  signCharge,
  signSubscribe,
  type Fixture,
} from './test-support/fixture';

type Ev = SubscriptionManagerEventArgs;

const USDC = 10n ** 6n;
const PERIOD = 30n * 24n * 3600n;
const DEFAULT_TERMS = {
  cap: 100n * USDC,
  budget: 300n * USDC,
  periodDuration: PERIOD,
  firstChargeAmount: 50n * USDC,
};

let chain: TestChain;
let f: Fixture;
let clean: string;
let idCounter = 0;

beforeAll(async () => {
  chain = await startTestChain(8453);
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

function newSubscriptionId(): string {
  idCounter += 1;
  return id(`subscription-${idCounter}`);
}

interface SubscribeOptions {
  readonly terms?: Partial<Omit<SubscribeAuthorizationMessage, 'subscriptionId'>>;
  readonly subscriber?: HDNodeWallet;
  readonly fund?: bigint;
  readonly approve?: bigint;
  readonly authSigner?: Wallet | HDNodeWallet;
  readonly manager?: string;
  readonly id?: string;
}

async function authorization(
  o: SubscribeOptions = {},
): Promise<{ auth: SubscribeAuthorizationMessage; sig: string }> {
  const manager = o.manager ?? (await f.manager.getAddress());
  const auth: SubscribeAuthorizationMessage = {
    subscriptionId: o.id ?? newSubscriptionId(),
    subscriber: (o.subscriber ?? f.subscriber).address,
    token: await f.usdc.getAddress(),
    deadline: await soon(f),
    ...DEFAULT_TERMS,
    ...o.terms,
  };
  const sig = await signSubscribe(o.authSigner ?? f.operator, f.chainId, manager, auth);
  return { auth, sig };
}

async function fundSubscriber(
  who: HDNodeWallet,
  amount: bigint,
  approve: bigint = MaxUint256,
): Promise<void> {
  await mined(f.usdc.connect(who).mint(who.address, amount));
  await mined(f.usdc.connect(who).approve(await f.manager.getAddress(), approve));
}

async function subscribe(
  o: SubscribeOptions = {},
): Promise<{ id: string; startedAt: bigint; auth: SubscribeAuthorizationMessage }> {
  const who = o.subscriber ?? f.subscriber;
  await fundSubscriber(who, o.fund ?? 10_000n * USDC, o.approve ?? MaxUint256);
  const { auth, sig } = await authorization(o);
  const receipt = await mined(f.manager.connect(who).subscribe(auth, sig));
  return { id: auth.subscriptionId, startedAt: await blockTimestamp(receipt), auth };
}

interface ChargeOptions {
  readonly quoteHash?: string;
  readonly deadline?: bigint;
  readonly signer?: Wallet | HDNodeWallet;
  readonly manager?: string;
  readonly chainId?: bigint;
  readonly epoch?: bigint;
}

async function chargeArgs(
  subscriptionId: string,
  amount: bigint,
  nonce: bigint,
  o: ChargeOptions = {},
): Promise<[string, bigint, bigint, string, bigint, string]> {
  const quoteHash = o.quoteHash ?? id('refq_test');
  const deadline = o.deadline ?? (await soon(f));
  const sig = await signCharge(
    o.signer ?? f.merchantSigner,
    o.chainId ?? f.chainId,
    o.manager ?? (await f.manager.getAddress()),
    {
      subscriptionId,
      amount,
      nonce,
      quoteHash,
      deadline,
      ...(o.epoch === undefined ? {} : { epoch: o.epoch }),
    },
  );
  return [subscriptionId, amount, nonce, quoteHash, deadline, sig];
}

async function charge(subscriptionId: string, amount: bigint, nonce: bigint, o: ChargeOptions = {}) {
  return mined(f.manager.charge(...(await chargeArgs(subscriptionId, amount, nonce, o))));
}

/** Sends a charge mined at exactly `timestamp`. */
async function chargeAt(timestamp: bigint, subscriptionId: string, amount: bigint, nonce: bigint) {
  const args = await chargeArgs(subscriptionId, amount, nonce, { deadline: timestamp + 3600n });
  await chain.setNextTimestamp(timestamp);
  return mined(f.manager.charge(...args, { gasLimit: 500_000 }));
}

/** Simulates a charge as if mined at exactly `timestamp` (the relayer's preflight), expecting error `name`. */
async function expectChargeRevertAt(
  timestamp: bigint,
  subscriptionId: string,
  amount: bigint,
  nonce: bigint,
  name: string,
) {
  const args = await chargeArgs(subscriptionId, amount, nonce, { deadline: timestamp + 3600n });
  await chain.setNextTimestamp(timestamp);
  return expectRevert(f.manager.charge.staticCall(...args, { blockTag: 'pending' }), name);
}

describe('SubscriptionManager: subscribe', () => {
  it('registers the subscription and pays the first charge (nonce 0) from the subscriber wallet in one transaction', async () => {
    await fundSubscriber(f.subscriber, 1_000n * USDC);
    const { auth, sig } = await authorization();
    const receipt = await mined(f.manager.connect(f.subscriber).subscribe(auth, sig));
    const startedAt = await blockTimestamp(receipt);

    const created = eventIn<Ev, 'SubscriptionCreated'>(receipt, f.manager, 'SubscriptionCreated');
    expect(created).toEqual({
      subscriptionId: auth.subscriptionId,
      subscriber: f.subscriber.address,
      token: auth.token,
      cap: auth.cap,
      budget: auth.budget,
      periodDuration: PERIOD,
      startedAt,
    });
    const charged = eventIn<Ev, 'SubscriptionCharged'>(receipt, f.manager, 'SubscriptionCharged');
    expect(charged).toMatchObject({
      subscriptionId: auth.subscriptionId,
      subscriber: f.subscriber.address,
      payee: f.settlement,
      amount: 50n * USDC,
      received: 50n * USDC,
      nonce: 0n,
      windowIndex: 0n,
      windowSpent: 50n * USDC,
      quoteHash: ZeroHash,
      timestamp: startedAt,
    });
    expect(await f.usdc.balanceOf(f.settlement)).toBe(50n * USDC);
    expect(await f.usdc.balanceOf(f.subscriber.address)).toBe(950n * USDC);
    const s = await f.manager.getSubscription(auth.subscriptionId);
    expect(s.subscriber).toBe(f.subscriber.address);
    expect(s.status).toBe(SubscriptionStatus.Active);
    expect(s.chargeNonce).toBe(1n);
    expect(s.startedAt).toBe(startedAt);
    expect(s.windowSpent).toBe(50n * USDC);
  });

  it('rejects an authorization that the operator did not sign', async () => {
    await fundSubscriber(f.subscriber, 1_000n * USDC);
    const { auth, sig } = await authorization({ authSigner: f.merchantSigner });
    await expectRevert(f.manager.connect(f.subscriber).subscribe(auth, sig), 'InvalidSignature');
  });

  it('rejects terms the subscriber changed after the operator signed them', async () => {
    await fundSubscriber(f.subscriber, 1_000n * USDC);
    const { auth, sig } = await authorization();
    await expectRevert(
      f.manager
        .connect(f.subscriber)
        .subscribe({ ...auth, cap: auth.cap * 2n, budget: auth.budget * 2n }, sig),
      'InvalidSignature',
    );
  });

  it('rejects an expired authorization', async () => {
    await fundSubscriber(f.subscriber, 1_000n * USDC);
    const now = await chain.now();
    const { auth, sig } = await authorization({ terms: { deadline: now + 60n } });
    await chain.increaseTime(61);
    await expectRevert(f.manager.connect(f.subscriber).subscribe(auth, sig), 'SignatureExpired');
  });

  it('binds the subscriber: a front-runner replaying the pending authorization from another wallet is refused', async () => {
    await fundSubscriber(f.subscriber, 1_000n * USDC);
    await fundSubscriber(f.stranger, 1_000n * USDC); // funded and approved: only the binding stops it
    const { auth, sig } = await authorization();
    const err = await expectRevert(f.manager.connect(f.stranger).subscribe(auth, sig), 'SubscriberMismatch');
    expect(err.args).toEqual({ expected: f.subscriber.address, actual: f.stranger.address });
    // Naming itself as the subscriber voids the operator signature.
    await expectRevert(
      f.manager.connect(f.stranger).subscribe({ ...auth, subscriber: f.stranger.address }, sig),
      'InvalidSignature',
    );
    // Nothing moved and the id is still free: the real subscriber's transaction goes through.
    expect(await f.usdc.balanceOf(f.stranger.address)).toBe(1_000n * USDC);
    expect(await f.usdc.balanceOf(f.settlement)).toBe(0n);
    expect((await f.manager.getSubscription(auth.subscriptionId)).status).toBe(SubscriptionStatus.None);
    const receipt = await mined(f.manager.connect(f.subscriber).subscribe(auth, sig));
    const created = eventIn<Ev, 'SubscriptionCreated'>(receipt, f.manager, 'SubscriptionCreated');
    expect(created.subscriber).toBe(f.subscriber.address);
    expect(await f.usdc.balanceOf(f.subscriber.address)).toBe(950n * USDC);
  });

  it('cannot register the same subscription id twice (the authorization is single-use)', async () => {
    const { auth } = await subscribe();
    const again = await signSubscribe(f.operator, f.chainId, await f.manager.getAddress(), auth);
    const err = await expectRevert(
      f.manager.connect(f.subscriber).subscribe(auth, again),
      'SubscriptionAlreadyExists',
    );
    expect(err.args['subscriptionId']).toBe(auth.subscriptionId);
  });

  it('rejects a period shorter than 3600 seconds and accepts exactly 3600', async () => {
    await fundSubscriber(f.subscriber, 1_000n * USDC);
    const short = await authorization({ terms: { periodDuration: 3599n } });
    const err = await expectRevert(
      f.manager.connect(f.subscriber).subscribe(short.auth, short.sig),
      'PeriodTooShort',
    );
    expect(err.args).toEqual({ periodDuration: 3599n, minimum: 3600n });
    const ok = await authorization({ terms: { periodDuration: 3600n } });
    await mined(f.manager.connect(f.subscriber).subscribe(ok.auth, ok.sig));
  });

  it('enforces first charge <= cap <= budget on the signed terms', async () => {
    await fundSubscriber(f.subscriber, 1_000n * USDC);
    const overCap = await authorization({ terms: { firstChargeAmount: 101n * USDC } });
    await expectRevert(
      f.manager.connect(f.subscriber).subscribe(overCap.auth, overCap.sig),
      'ChargeAmountExceedsCap',
    );
    const capOverBudget = await authorization({ terms: { cap: 301n * USDC } });
    await expectRevert(
      f.manager.connect(f.subscriber).subscribe(capOverBudget.auth, capOverBudget.sig),
      'CapExceedsBudget',
    );
  });

  it('reveals InsufficientBalance and InsufficientAllowance by name before moving funds', async () => {
    await fundSubscriber(f.subscriber, 10n * USDC);
    const poor = await authorization();
    const e1 = await expectRevert(
      f.manager.connect(f.subscriber).subscribe(poor.auth, poor.sig),
      'InsufficientBalance',
    );
    expect(e1.args).toEqual({ balance: 10n * USDC, amount: 50n * USDC });
    await fundSubscriber(f.subscriber, 1_000n * USDC, 49n * USDC);
    const e2 = await expectRevert(
      f.manager.connect(f.subscriber).subscribe(poor.auth, poor.sig),
      'InsufficientAllowance',
    );
    expect(e2.args).toEqual({ allowance: 49n * USDC, amount: 50n * USDC });
  });
});

describe('SubscriptionManager: charge', () => {
  it('moves a merchant-signed amount to the settlement address and reports nonce, window and window spend', async () => {
    const { id: sid } = await subscribe();
    const quoteHash = id('refq_abc');
    const receipt = await charge(sid, 30n * USDC, 1n, { quoteHash });
    const ev = eventIn<Ev, 'SubscriptionCharged'>(receipt, f.manager, 'SubscriptionCharged');
    expect(ev).toMatchObject({
      subscriptionId: sid,
      subscriber: f.subscriber.address,
      payee: f.settlement,
      token: await f.usdc.getAddress(),
      amount: 30n * USDC,
      received: 30n * USDC,
      nonce: 1n,
      windowIndex: 0n,
      windowSpent: 80n * USDC,
      quoteHash,
      timestamp: await blockTimestamp(receipt),
    });
    expect(await f.usdc.balanceOf(f.settlement)).toBe(80n * USDC);
    expect((await f.manager.getSubscription(sid)).chargeNonce).toBe(2n);
  });

  it('allows several charges inside one window as long as their sum stays within the budget', async () => {
    const { id: sid } = await subscribe();
    await charge(sid, 100n * USDC, 1n);
    await charge(sid, 100n * USDC, 2n);
    await charge(sid, 50n * USDC, 3n); // 50 + 100 + 100 + 50 = 300 = budget
    const state = await f.manager.budgetState(sid);
    expect(state.spent).toBe(300n * USDC);
    expect(state.remaining).toBe(0n);
  });

  it('rejects an amount above the cap with ChargeAmountExceedsCap, in simulation and before any transfer', async () => {
    const { id: sid } = await subscribe();
    const args = await chargeArgs(sid, 100n * USDC + 1n, 1n);
    const simulated = await expectRevert(f.manager.charge.staticCall(...args), 'ChargeAmountExceedsCap');
    expect(simulated.args).toEqual({ amount: 100n * USDC + 1n, cap: 100n * USDC });
    const before = await f.usdc.balanceOf(f.settlement);
    await expectRevert(f.manager.charge(...args), 'ChargeAmountExceedsCap');
    expect(await f.usdc.balanceOf(f.settlement)).toBe(before);
  });

  it('rejects a charge that would push the window spend past the budget with BudgetExceeded', async () => {
    const { id: sid } = await subscribe();
    await charge(sid, 100n * USDC, 1n);
    await charge(sid, 100n * USDC, 2n);
    const err = await expectRevert(
      f.manager.charge(...(await chargeArgs(sid, 50n * USDC + 1n, 3n))),
      'BudgetExceeded',
    );
    expect(err.args).toEqual({ amount: 50n * USDC + 1n, windowSpent: 250n * USDC, budget: 300n * USDC });
  });

  it('reports InsufficientBalance when the wallet holds less than the amount', async () => {
    const { id: sid } = await subscribe({ fund: 60n * USDC });
    const err = await expectRevert(
      f.manager.charge(...(await chargeArgs(sid, 20n * USDC, 1n))),
      'InsufficientBalance',
    );
    expect(err.args).toEqual({ balance: 10n * USDC, amount: 20n * USDC });
  });

  it('reports InsufficientAllowance when the subscriber revoked the allowance', async () => {
    const { id: sid } = await subscribe();
    await mined(f.usdc.connect(f.subscriber).approve(await f.manager.getAddress(), 0n));
    await expectRevert(f.manager.charge(...(await chargeArgs(sid, 20n * USDC, 1n))), 'InsufficientAllowance');
  });

  it('reports SubscriptionNotActive for a cancelled or unknown subscription', async () => {
    const { id: sid } = await subscribe();
    await mined(f.manager.connect(f.subscriber).subscriberCancel(sid));
    await expectRevert(f.manager.charge(...(await chargeArgs(sid, 20n * USDC, 1n))), 'SubscriptionNotActive');
    await expectRevert(
      f.manager.charge(...(await chargeArgs(id('nope'), 20n * USDC, 1n))),
      'SubscriptionNotActive',
    );
  });

  it('rejects a charge signed by any key other than the registered merchant signer', async () => {
    const { id: sid } = await subscribe();
    await expectRevert(
      f.manager.charge(...(await chargeArgs(sid, 20n * USDC, 1n, { signer: f.operator }))),
      'InvalidSignature',
    );
    await expectRevert(
      f.manager.charge(...(await chargeArgs(sid, 20n * USDC, 1n, { signer: Wallet.createRandom() }))),
      'InvalidSignature',
    );
  });

  it('stops honouring the old key once the merchant rotates its signer (consented change bumps the epoch)', async () => {
    const { id: sid } = await subscribe();
    const rotated = Wallet.createRandom();
    const signedBefore = await chargeArgs(sid, 20n * USDC, 1n);
    await changeMerchant(f, rotated.address, f.settlement);
    await expectRevert(f.manager.charge(...signedBefore), 'InvalidSignature');
    await expectRevert(f.manager.charge(...(await chargeArgs(sid, 20n * USDC, 1n))), 'InvalidSignature');
    await charge(sid, 20n * USDC, 1n, { signer: rotated, epoch: 1n });
  });

  it('refuses a deadline beyond the 7-day horizon, and honours no signature after the merchant revokes', async () => {
    const { id: sid } = await subscribe();
    const tooFar = (await chain.now()) + 7n * 86_400n + 60n;
    await expectRevert(
      f.manager.charge(...(await chargeArgs(sid, 1n, 1n, { deadline: tooFar }))),
      'DeadlineTooFar',
    );
    const outstanding = await chargeArgs(sid, 1n, 1n);
    // The signer key revokes from its own address (it needs gas for that; revokeAuthorizationsBySig does not).
    const signerKey = f.merchantSigner.connect(chain.provider);
    await chain.provider.send('anvil_setBalance', [signerKey.address, '0xde0b6b3a7640000']);
    await expectRevert(
      f.registry.connect(f.stranger).revokeAuthorizations(f.merchantId),
      'NotMerchantSigner',
    );
    await mined(f.registry.connect(signerKey).revokeAuthorizations(f.merchantId));
    expect(await f.registry.merchantEpoch(f.merchantId)).toBe(1n);
    await expectRevert(f.manager.charge(...outstanding), 'InvalidSignature');
    await charge(sid, 1n, 1n, { epoch: 1n });
  });

  it('rejects a charge whose signed deadline has passed', async () => {
    const { id: sid } = await subscribe();
    const deadline = (await chain.now()) + 30n;
    const args = await chargeArgs(sid, 20n * USDC, 1n, { deadline });
    await chain.increaseTime(31);
    await expectRevert(f.manager.charge(...args), 'SignatureExpired');
  });

  it('rejects a replayed charge signature with NonceAlreadyUsed, and a nonce ahead with InvalidNonce', async () => {
    const { id: sid } = await subscribe();
    const args = await chargeArgs(sid, 20n * USDC, 1n);
    await mined(f.manager.charge(...args));
    const err = await expectRevert(f.manager.charge(...args), 'NonceAlreadyUsed');
    expect(err.args).toEqual({ subscriptionId: sid, nonce: 1n });
    const ahead = await expectRevert(f.manager.charge(...(await chargeArgs(sid, 1n, 5n))), 'InvalidNonce');
    expect(ahead.args).toEqual({ expected: 2n, provided: 5n });
  });

  it('lets the service recognise that its charge landed when someone else submitted the signature first', async () => {
    const { id: sid } = await subscribe();
    expect(await f.manager.nextChargeNonce(sid)).toBe(1n);
    expect(await f.manager.chargeNonceUsed(sid, 1n)).toBe(false);
    const args = await chargeArgs(sid, 20n * USDC, 1n, { quoteHash: id('refq_mine') });
    // A stranger front-runs the relayer with the same signature.
    const theirs = await mined(f.manager.connect(f.stranger).charge(...args));
    // The service's own submission reverts by name (the subscription is not paused for it, nothing moves twice)...
    const before = await f.usdc.balanceOf(f.subscriber.address);
    await expectRevert(f.manager.charge(...args), 'NonceAlreadyUsed');
    expect(await f.usdc.balanceOf(f.subscriber.address)).toBe(before);
    // ...and the chain says which charge used the nonce: the same amount and quote hash the merchant signed.
    expect(await f.manager.chargeNonceUsed(sid, 1n)).toBe(true);
    expect(await f.manager.nextChargeNonce(sid)).toBe(2n);
    const chargedTopic = f.manager.interface.getEvent('SubscriptionCharged')?.topicHash;
    const logs = await chain.provider.getLogs({
      address: await f.manager.getAddress(),
      topics: [chargedTopic ?? null, sid],
      fromBlock: 0,
    });
    const landed = logs
      .map((l) => ({ log: l, ev: f.manager.interface.parseLog(l)?.args.toObject(true) }))
      .find((x) => (x.ev as Ev['SubscriptionCharged'] | undefined)?.nonce === 1n);
    expect(landed?.ev).toMatchObject({ amount: 20n * USDC, quoteHash: id('refq_mine'), nonce: 1n });
    expect(landed?.log.transactionHash).toBe(theirs.hash);
    // Even on a paused manager the used nonce is reported first.
    await mined(f.manager.connect(f.merchantPauser).pause());
    await expectRevert(f.manager.charge(...args), 'NonceAlreadyUsed');
  });

  it('binds amount, nonce and quoteHash: changing any of them voids the signature', async () => {
    const { id: sid } = await subscribe();
    const [s, amount, nonce, quoteHash, deadline, sig] = await chargeArgs(sid, 20n * USDC, 1n);
    await expectRevert(f.manager.charge(s, amount + 1n, nonce, quoteHash, deadline, sig), 'InvalidSignature');
    await expectRevert(
      f.manager.charge(s, amount, nonce, id('refq_other'), deadline, sig),
      'InvalidSignature',
    );
    await expectRevert(f.manager.charge(s, amount, nonce, quoteHash, deadline + 1n, sig), 'InvalidSignature');
  });

  it("rejects a charge signature made for another merchant's manager, even with the same key and subscription id", async () => {
    const otherMerchant = id('merchant:other');
    await mined(f.registry.registerMerchant(otherMerchant, f.merchantSigner.address, f.settlement));
    await mined(f.managerFactory.deployManager(otherMerchant, f.merchantPauser.address));
    const other = connectSubscriptionManager(await f.managerFactory.managerOf(otherMerchant), f.relayer);
    const sid = id('shared-subscription-id');
    await subscribe({ id: sid });
    await mined(f.usdc.connect(f.subscriber).approve(await other.getAddress(), MaxUint256));
    const { auth, sig } = await authorization({ id: sid, manager: await other.getAddress() });
    await mined(other.connect(f.subscriber).subscribe(auth, sig));

    const forA = await chargeArgs(sid, 20n * USDC, 1n);
    await expectRevert(other.charge(...forA), 'InvalidSignature');
    await mined(f.manager.charge(...forA));
  });
});

describe('SubscriptionManager: budget windows', () => {
  it('anchors windows at the on-chain start, not at the last charge, and resets the spend at each boundary', async () => {
    const { id: sid, startedAt } = await subscribe(); // 50 spent in window 0
    await chargeAt(startedAt + PERIOD - 10n, sid, 100n * USDC, 1n);
    await chargeAt(startedAt + PERIOD - 5n, sid, 100n * USDC, 2n);
    const receipt = await chargeAt(startedAt + PERIOD, sid, 100n * USDC, 3n);
    const ev = eventIn<Ev, 'SubscriptionCharged'>(receipt, f.manager, 'SubscriptionCharged');
    expect(ev.windowIndex).toBe(1n);
    expect(ev.windowSpent).toBe(100n * USDC);
    // Had the window been anchored at the last charge, this would still be window 0 of that anchor.
    const state = await f.manager.budgetState(sid);
    expect(state.windowStart).toBe(startedAt + PERIOD);
    expect(state.windowEnd).toBe(startedAt + 2n * PERIOD);
    expect(state.remaining).toBe(200n * USDC);
  });

  it('caps the exposure across one boundary at 2 x budget: full budget at the end of window n and at the start of n+1, and no more', async () => {
    const terms = { cap: 300n * USDC, budget: 300n * USDC, firstChargeAmount: 1n };
    const { id: sid, startedAt } = await subscribe({ terms, fund: 1_000_000n * USDC });
    const n = 3n;
    const boundary = startedAt + (n + 1n) * PERIOD; // first second of window n+1
    const before = await f.usdc.balanceOf(f.settlement);

    const endOfN = await chargeAt(boundary - 2n, sid, 300n * USDC, 1n);
    expect(eventIn<Ev, 'SubscriptionCharged'>(endOfN, f.manager, 'SubscriptionCharged').windowIndex).toBe(n);
    await expectChargeRevertAt(boundary - 1n, sid, 1n, 2n, 'BudgetExceeded'); // window n is spent to its last second

    const startOfN1 = await chargeAt(boundary, sid, 300n * USDC, 2n);
    expect(eventIn<Ev, 'SubscriptionCharged'>(startOfN1, f.manager, 'SubscriptionCharged').windowIndex).toBe(
      n + 1n,
    );
    expect((await f.usdc.balanceOf(f.settlement)) - before).toBe(600n * USDC);

    // Nothing more in window n+1, however small, and however late inside it.
    await expectChargeRevertAt(boundary + 1n, sid, 1n, 3n, 'BudgetExceeded');
    await expectChargeRevertAt(boundary + PERIOD - 1n, sid, 1n, 3n, 'BudgetExceeded');
    // The next budget opens only at the start of window n+2, a full period after the n+1 boundary.
    await chargeAt(boundary + PERIOD, sid, 1n, 3n);
  });

  it('rejects a second full-budget charge at the last second of window n (same window)', async () => {
    const terms = { cap: 300n * USDC, budget: 300n * USDC, firstChargeAmount: 1n };
    const { id: sid, startedAt } = await subscribe({ terms, fund: 1_000_000n * USDC });
    await chargeAt(startedAt + PERIOD - 2n, sid, 299n * USDC, 1n);
    await expectChargeRevertAt(startedAt + PERIOD - 1n, sid, 1n * USDC, 2n, 'BudgetExceeded');
    await chargeAt(startedAt + PERIOD - 1n, sid, 1n * USDC - 1n, 2n); // exactly the rest of the budget
  });

  it('moves to the next window with evm_increaseTime + evm_mine', async () => {
    const { id: sid } = await subscribe({ terms: { periodDuration: 3600n } });
    await charge(sid, 100n * USDC, 1n);
    await charge(sid, 100n * USDC, 2n);
    await expectRevert(f.manager.charge(...(await chargeArgs(sid, 100n * USDC, 3n))), 'BudgetExceeded');
    await chain.increaseTime(3600);
    const receipt = await charge(sid, 100n * USDC, 3n);
    expect(eventIn<Ev, 'SubscriptionCharged'>(receipt, f.manager, 'SubscriptionCharged').windowIndex).toBe(
      1n,
    );
  });
});

describe('SubscriptionManager: cancel', () => {
  it('the merchant cancels with a CancelSubscription signature at the current nonce', async () => {
    const { id: sid } = await subscribe();
    const manager = await f.manager.getAddress();
    const deadline = await soon(f);
    const sig = await signCancel(f.merchantSigner, f.chainId, manager, {
      subscriptionId: sid,
      nonce: 1n,
      deadline,
    });
    const receipt = await mined(f.manager.merchantCancel(sid, 1n, deadline, sig));
    const ev = eventIn<Ev, 'SubscriptionCancelled'>(receipt, f.manager, 'SubscriptionCancelled');
    expect(ev).toMatchObject({
      subscriptionId: sid,
      subscriber: f.subscriber.address,
      cancelledBy: Canceller.Merchant,
      sender: f.relayer.address,
      nonce: 1n,
    });
    expect((await f.manager.getSubscription(sid)).status).toBe(SubscriptionStatus.Cancelled);
    await expectRevert(f.manager.charge(...(await chargeArgs(sid, 1n, 1n))), 'SubscriptionNotActive');
  });

  it('rejects a merchant cancel signed at a nonce a charge has since used, or by another key', async () => {
    const { id: sid } = await subscribe();
    const manager = await f.manager.getAddress();
    const deadline = await soon(f);
    const stale = await signCancel(f.merchantSigner, f.chainId, manager, {
      subscriptionId: sid,
      nonce: 1n,
      deadline,
    });
    await charge(sid, 1n, 1n);
    await expectRevert(f.manager.merchantCancel(sid, 1n, deadline, stale), 'InvalidNonce');
    const byOperator = await signCancel(f.operator, f.chainId, manager, {
      subscriptionId: sid,
      nonce: 2n,
      deadline,
    });
    await expectRevert(f.manager.merchantCancel(sid, 2n, deadline, byOperator), 'InvalidSignature');
  });

  it('the subscriber cancels from their own wallet; nobody else can without a merchant signature', async () => {
    const { id: sid } = await subscribe();
    await expectRevert(f.manager.connect(f.stranger).subscriberCancel(sid), 'NotSubscriber');
    await expectRevert(f.manager.connect(f.operator).subscriberCancel(sid), 'NotSubscriber');
    const receipt = await mined(f.manager.connect(f.subscriber).subscriberCancel(sid));
    const ev = eventIn<Ev, 'SubscriptionCancelled'>(receipt, f.manager, 'SubscriptionCancelled');
    expect(ev.cancelledBy).toBe(Canceller.Subscriber);
    await expectRevert(f.manager.connect(f.subscriber).subscriberCancel(sid), 'SubscriptionNotActive');
  });

  it('a cancel voids a pending migration with MigrationVoided, as a change of terms does', async () => {
    const manager = await f.manager.getAddress();
    const bySubscriber = (sid: string) => f.manager.connect(f.subscriber).subscriberCancel(sid);
    const byMerchant = async (sid: string) => {
      const deadline = await soon(f);
      const sig = await signCancel(f.merchantSigner, f.chainId, manager, {
        subscriptionId: sid,
        nonce: 1n,
        deadline,
      });
      return f.manager.merchantCancel(sid, 1n, deadline, sig);
    };
    for (const cancel of [bySubscriber, byMerchant]) {
      const { id: sid } = await subscribe();
      await mined(f.manager.connect(f.subscriber).proposeMigration(sid, f.newWallet.address));
      const receipt = await mined(cancel(sid));
      expect(eventIn<Ev, 'MigrationVoided'>(receipt, f.manager, 'MigrationVoided')).toEqual({
        subscriptionId: sid,
        subscriber: f.subscriber.address,
        proposedSubscriber: f.newWallet.address,
      });
      // Without a pending proposal a cancel voids nothing.
      const { id: other } = await subscribe();
      const plain = await mined(cancel(other));
      expect(eventsIn<Ev, 'MigrationVoided'>(plain, f.manager, 'MigrationVoided')).toEqual([]);
    }
  });
});

describe('SubscriptionManager: cap and budget belong to the subscriber', () => {
  it('updateCap lowers and raises the per-charge maximum, with a CapUpdated event', async () => {
    const { id: sid } = await subscribe();
    const receipt = await mined(f.manager.connect(f.subscriber).updateCap(sid, 20n * USDC));
    expect(eventIn<Ev, 'CapUpdated'>(receipt, f.manager, 'CapUpdated')).toMatchObject({
      subscriptionId: sid,
      subscriber: f.subscriber.address,
      oldCap: 100n * USDC,
      newCap: 20n * USDC,
    });
    await expectRevert(
      f.manager.charge(...(await chargeArgs(sid, 21n * USDC, 1n))),
      'ChargeAmountExceedsCap',
    );
    await mined(f.manager.connect(f.subscriber).updateCap(sid, 200n * USDC));
    await charge(sid, 200n * USDC, 1n);
  });

  it('updateBudget applies to the current window at once, with a BudgetUpdated event carrying the window spend', async () => {
    const { id: sid } = await subscribe();
    const receipt = await mined(f.manager.connect(f.subscriber).updateBudget(sid, 60n * USDC));
    expect(eventIn<Ev, 'BudgetUpdated'>(receipt, f.manager, 'BudgetUpdated')).toMatchObject({
      oldBudget: 300n * USDC,
      newBudget: 60n * USDC,
      windowIndex: 0n,
      windowSpent: 50n * USDC,
    });
    await expectRevert(f.manager.charge(...(await chargeArgs(sid, 10n * USDC + 1n, 1n))), 'BudgetExceeded');
    await charge(sid, 10n * USDC, 1n);
  });

  it('no other key can change cap or budget: not the merchant signer, the pausers, the operator or the relayer', async () => {
    const { id: sid } = await subscribe();
    const merchantKey = f.merchantSigner.connect(chain.provider);
    await chain.provider.send('anvil_setBalance', [merchantKey.address, '0x' + parseEther('1').toString(16)]);
    for (const who of [merchantKey, f.merchantPauser, f.operatorPauser, f.operator, f.relayer]) {
      await expectRevert(f.manager.connect(who).updateCap(sid, MaxUint256), 'NotSubscriber');
      await expectRevert(f.manager.connect(who).updateBudget(sid, MaxUint256), 'NotSubscriber');
    }
    const s = await f.manager.getSubscription(sid);
    expect([s.cap, s.budget]).toEqual([100n * USDC, 300n * USDC]);
  });
});

describe('SubscriptionManager: migration to a new wallet', () => {
  it('needs the subscriber to propose and the new wallet to accept; later charges pull from the new wallet', async () => {
    const { id: sid } = await subscribe();
    await fundSubscriber(f.newWallet, 500n * USDC);
    const proposed = await mined(f.manager.connect(f.subscriber).proposeMigration(sid, f.newWallet.address));
    expect(eventIn<Ev, 'MigrationProposed'>(proposed, f.manager, 'MigrationProposed')).toEqual({
      subscriptionId: sid,
      subscriber: f.subscriber.address,
      proposedSubscriber: f.newWallet.address,
    });
    const accepted = await mined(
      f.manager.connect(f.newWallet).acceptMigration(sid, 100n * USDC, 300n * USDC),
    );
    expect(eventIn<Ev, 'SubscriptionMigrated'>(accepted, f.manager, 'SubscriptionMigrated')).toMatchObject({
      subscriptionId: sid,
      oldSubscriber: f.subscriber.address,
      newSubscriber: f.newWallet.address,
      newSubscriberBalance: 500n * USDC,
      newSubscriberAllowance: MaxUint256,
    });
    const s = await f.manager.getSubscription(sid);
    expect(s.subscriber).toBe(f.newWallet.address);
    expect(s.windowSpent).toBe(50n * USDC); // window, nonce and limits carry over
    await charge(sid, 20n * USDC, 1n);
    expect(await f.usdc.balanceOf(f.newWallet.address)).toBe(480n * USDC);
    await expectRevert(f.manager.connect(f.subscriber).updateCap(sid, 1n), 'NotSubscriber');
  });

  it('cannot be proposed by anyone but the subscriber, nor accepted by anyone but the proposed wallet', async () => {
    const { id: sid } = await subscribe();
    await expectRevert(
      f.manager.connect(f.stranger).proposeMigration(sid, f.stranger.address),
      'NotSubscriber',
    );
    const terms = [100n * USDC, 300n * USDC] as const;
    await expectRevert(f.manager.connect(f.newWallet).acceptMigration(sid, ...terms), 'NotPendingSubscriber');
    await mined(f.manager.connect(f.subscriber).proposeMigration(sid, f.newWallet.address));
    await expectRevert(f.manager.connect(f.stranger).acceptMigration(sid, ...terms), 'NotPendingSubscriber');
    await mined(
      f.manager.connect(f.subscriber).proposeMigration(sid, '0x0000000000000000000000000000000000000000'),
    );
    await expectRevert(f.manager.connect(f.newWallet).acceptMigration(sid, ...terms), 'NotPendingSubscriber');
  });

  it('binds the terms the new wallet saw: a cap raised before acceptance makes it revert, nothing is charged above them', async () => {
    // The reproduced attack: the new wallet agrees to a cap of 10, the old subscriber raises cap and budget.
    const { id: sid } = await subscribe({
      terms: { cap: 10n * USDC, budget: 30n * USDC, firstChargeAmount: 10n * USDC },
    });
    await fundSubscriber(f.newWallet, 10_000n * USDC);
    await mined(f.manager.connect(f.subscriber).updateCap(sid, 9_000n * USDC));
    await mined(f.manager.connect(f.subscriber).updateBudget(sid, 9_000n * USDC));
    await mined(f.manager.connect(f.subscriber).proposeMigration(sid, f.newWallet.address));
    const err = await expectRevert(
      f.manager.connect(f.newWallet).acceptMigration(sid, 10n * USDC, 30n * USDC),
      'MigrationTermsChanged',
    );
    expect(err.args).toEqual({
      expectedCap: 10n * USDC,
      cap: 9_000n * USDC,
      expectedBudget: 30n * USDC,
      budget: 9_000n * USDC,
    });
    expect((await f.manager.getSubscription(sid)).subscriber).toBe(f.subscriber.address);
    // A charge at the raised cap can only ever pull from the wallet that raised it.
    await charge(sid, 8_990n * USDC, 1n);
    expect(await f.usdc.balanceOf(f.newWallet.address)).toBe(10_000n * USDC);
  });

  it('voids a pending proposal on any change of cap or budget (a front-run raise leaves nothing to accept)', async () => {
    const { id: sid } = await subscribe();
    await fundSubscriber(f.newWallet, 500n * USDC);
    for (const change of [
      () => f.manager.connect(f.subscriber).updateCap(sid, 200n * USDC),
      () => f.manager.connect(f.subscriber).updateBudget(sid, 600n * USDC),
    ]) {
      await mined(f.manager.connect(f.subscriber).proposeMigration(sid, f.newWallet.address));
      const receipt = await mined(change());
      expect(eventIn<Ev, 'MigrationVoided'>(receipt, f.manager, 'MigrationVoided')).toEqual({
        subscriptionId: sid,
        subscriber: f.subscriber.address,
        proposedSubscriber: f.newWallet.address,
      });
      expect((await f.manager.getSubscription(sid)).pendingSubscriber).toBe(
        '0x0000000000000000000000000000000000000000',
      );
      const s = await f.manager.getSubscription(sid);
      await expectRevert(
        f.manager.connect(f.newWallet).acceptMigration(sid, s.cap, s.budget),
        'NotPendingSubscriber',
      );
    }
  });
});

describe('SubscriptionManager: pause authority', () => {
  it('the merchant pauser and the operator pauser each hold a pause that blocks charge and subscribe', async () => {
    const { id: sid } = await subscribe();
    const paused = await mined(f.manager.connect(f.merchantPauser).pause());
    expect(eventIn<Ev, 'Paused'>(paused, f.manager, 'Paused')).toEqual({
      account: f.merchantPauser.address,
      role: PauserRole.Merchant,
    });
    await expectRevert(f.manager.charge(...(await chargeArgs(sid, 1n, 1n))), 'ManagerPaused');
    const { auth, sig } = await authorization();
    await expectRevert(f.manager.connect(f.subscriber).subscribe(auth, sig), 'ManagerPaused');

    await mined(f.manager.connect(f.operatorPauser).pause());
    await mined(f.manager.connect(f.merchantPauser).unpause());
    expect(await f.manager.paused()).toBe(true); // the merchant cannot lift the operator's pause
    await expectRevert(f.manager.charge(...(await chargeArgs(sid, 1n, 1n))), 'ManagerPaused');
    await mined(f.manager.connect(f.operatorPauser).unpause());
    expect(await f.manager.paused()).toBe(false);
    await charge(sid, 1n, 1n);
  });

  it('nobody else can pause: not the operator key, the merchant signer or the subscriber', async () => {
    for (const who of [f.operator, f.subscriber, f.relayer]) {
      await expectRevert(f.manager.connect(who).pause(), 'NotPauser');
    }
  });

  it('cancels still go through while paused', async () => {
    const { id: sid } = await subscribe();
    await mined(f.manager.connect(f.operatorPauser).pause());
    await mined(f.manager.connect(f.subscriber).subscriberCancel(sid));
  });
});

describe('SubscriptionManager: input guards', () => {
  it('rejects a zero charge, a zero token, a period beyond uint32, and a merchant not registered on the chain', async () => {
    const { id: sid } = await subscribe();
    await expectRevert(f.manager.charge(...(await chargeArgs(sid, 0n, 1n))), 'ZeroAmount');
    const zeroToken = await authorization({ terms: { token: '0x0000000000000000000000000000000000000000' } });
    await expectRevert(
      f.manager.connect(f.subscriber).subscribe(zeroToken.auth, zeroToken.sig),
      'ZeroAddress',
    );
    const tooLong = await authorization({ terms: { periodDuration: 2n ** 32n } });
    await expectRevert(f.manager.connect(f.subscriber).subscribe(tooLong.auth, tooLong.sig), 'PeriodTooLong');
    const unregistered = id('merchant:unregistered');
    await mined(f.managerFactory.deployManager(unregistered, f.merchantPauser.address));
    const orphan = await f.managerFactory.managerOf(unregistered);
    await mined(f.usdc.connect(f.subscriber).approve(orphan, MaxUint256));
    const early = await authorization({ manager: orphan });
    await expectRevert(
      connectSubscriptionManager(orphan, f.subscriber).subscribe(early.auth, early.sig),
      'MerchantNotConfigured',
    );
  });

  it('reports an unknown subscription in budgetState and refuses a migration to the same wallet', async () => {
    await expectRevert(f.manager.budgetState(id('unknown')), 'UnknownSubscription');
    const { id: sid } = await subscribe();
    await expectRevert(
      f.manager.connect(f.subscriber).proposeMigration(sid, f.subscriber.address),
      'InvalidMigrationTarget',
    );
    await expectRevert(
      f.managerFactory.deployManager(id('m3'), '0x0000000000000000000000000000000000000000'),
      'ZeroAddress',
    );
  });
});

describe('SubscriptionManagerFactory', () => {
  it("binds the merchant pauser into the manager's address, computable offline", async () => {
    const registry = await f.registry.getAddress();
    const factory = await f.managerFactory.getAddress();
    const expected = computeSubscriptionManagerAddress(
      factory,
      registry,
      f.merchantId,
      f.merchantPauser.address,
    );
    expect(await f.manager.getAddress()).toBe(expected);
    expect(await f.managerFactory.managerAddress(f.merchantId, f.merchantPauser.address)).toBe(expected);
    expect(await f.manager.merchantPauser()).toBe(f.merchantPauser.address);
    expect(computeSubscriptionManagerAddress(factory, registry, f.merchantId, f.stranger.address)).not.toBe(
      expected,
    );
  });

  it('deploys one manager per merchant, only for the operator, never with the operator pauser', async () => {
    await expectRevert(
      f.managerFactory.deployManager(f.merchantId, f.stranger.address),
      'ManagerAlreadyDeployed',
    );
    await expectRevert(
      f.managerFactory.connect(f.stranger).deployManager(id('m2'), f.stranger.address),
      'NotOperator',
    );
    await expectRevert(
      f.managerFactory.deployManager(id('m2'), f.operatorPauser.address),
      'PauserIsOperatorPauser',
    );
  });
});

describe('SubscriptionManager: EIP-712 and token safety', () => {
  it('computes the same digests as the @stablepay/evm typed data for Charge, CancelSubscription and SubscribeAuthorization', async () => {
    const manager = await f.manager.getAddress();
    const domain = stablepayDomain(f.chainId, manager);
    const charge = {
      subscriptionId: id('s'),
      amount: 123n,
      nonce: 7n,
      quoteHash: id('q'),
      epoch: 4n,
      deadline: 99n,
    };
    expect(
      await f.manager.hashCharge(
        charge.subscriptionId,
        charge.amount,
        charge.nonce,
        charge.quoteHash,
        charge.epoch,
        charge.deadline,
      ),
    ).toBe(TypedDataEncoder.hash(domain, CHARGE_TYPES, charge));
    const cancel = { subscriptionId: id('s'), nonce: 3n, epoch: 4n, deadline: 5n };
    expect(
      await f.manager.hashCancelSubscription(
        cancel.subscriptionId,
        cancel.nonce,
        cancel.epoch,
        cancel.deadline,
      ),
    ).toBe(TypedDataEncoder.hash(domain, CANCEL_SUBSCRIPTION_TYPES, cancel));
    const { auth } = await authorization();
    expect(await f.manager.hashSubscribeAuthorization(auth)).toBe(
      TypedDataEncoder.hash(domain, SUBSCRIBE_AUTHORIZATION_TYPES, auth),
    );
    const typeHash = (types: Parameters<typeof TypedDataEncoder.from>[0], name: string) =>
      keccak256(toUtf8Bytes(TypedDataEncoder.from(types).encodeType(name)));
    expect(await f.manager.CHARGE_TYPEHASH()).toBe(typeHash(CHARGE_TYPES, 'Charge'));
    expect(await f.manager.CANCEL_SUBSCRIPTION_TYPEHASH()).toBe(
      typeHash(CANCEL_SUBSCRIPTION_TYPES, 'CancelSubscription'),
    );
    expect(await f.manager.SUBSCRIBE_AUTHORIZATION_TYPEHASH()).toBe(
      typeHash(SUBSCRIBE_AUTHORIZATION_TYPES, 'SubscribeAuthorization'),
    );
    expect(await f.manager.SUBSCRIBE_AUTHORIZATION_TYPEHASH()).toBe(evmTypeHash('SubscribeAuthorization'));
    expect(encodeType('SubscribeAuthorization')).toContain(
      '(bytes32 subscriptionId,address subscriber,address token,',
    );
    const d = await f.manager.eip712Domain();
    expect([d.name, d.version, d.chainId, d.verifyingContract]).toEqual([
      'Stablepay',
      '1',
      f.chainId,
      manager,
    ]);
    expect(await f.manager.domainSeparator()).toBe(TypedDataEncoder.hashDomain(domain));
  });

  it('with a fee-on-transfer token, reports what the payee received and counts what the subscriber paid', async () => {
    const fee = await deployFeeOnTransferToken(f.operator);
    const token = await fee.getAddress();
    await mined(fee.connect(f.subscriber).mint(f.subscriber.address, 1_000n * USDC));
    await mined(fee.connect(f.subscriber).approve(await f.manager.getAddress(), MaxUint256));
    const { auth, sig } = await authorization({ terms: { token } });
    const receipt = await mined(f.manager.connect(f.subscriber).subscribe(auth, sig));
    const ev = eventIn<Ev, 'SubscriptionCharged'>(receipt, f.manager, 'SubscriptionCharged');
    expect(ev.amount).toBe(50n * USDC);
    expect(ev.received).toBe(49_500_000n);
    expect(ev.windowSpent).toBe(50n * USDC);
    expect(await fee.balanceOf(f.settlement)).toBe(49_500_000n);
  });

  it('pulls a token whose transferFrom returns nothing (USDT-style), and refuses one that returns false', async () => {
    const noReturn = await deployNoReturnToken(f.operator);
    const token = await noReturn.getAddress();
    await mined(noReturn.mint(f.subscriber.address, 1_000n * USDC));
    await mined(noReturn.connect(f.subscriber).approve(await f.manager.getAddress(), MaxUint256));
    const { auth, sig } = await authorization({ terms: { token } });
    await mined(noReturn.setReturnFalse(true));
    await expectRevert(f.manager.connect(f.subscriber).subscribe(auth, sig), 'TokenTransferFailed');
    await mined(noReturn.setReturnFalse(false));
    const receipt = await mined(f.manager.connect(f.subscriber).subscribe(auth, sig));
    expect(eventIn<Ev, 'SubscriptionCharged'>(receipt, f.manager, 'SubscriptionCharged').received).toBe(
      50n * USDC,
    );
    expect(await noReturn.balanceOf(f.settlement)).toBe(50n * USDC);
  });

  it('a token that calls back into the manager during a charge is stopped by the reentrancy lock', async () => {
    const hook = await deployHookToken(f.operator);
    const token = await hook.getAddress();
    await mined(hook.connect(f.subscriber).mint(f.subscriber.address, 1_000n * USDC));
    await mined(hook.connect(f.subscriber).approve(await f.manager.getAddress(), MaxUint256));
    const { auth, sig } = await authorization({ terms: { token } });
    await mined(f.manager.connect(f.subscriber).subscribe(auth, sig));
    const sid = auth.subscriptionId;
    const reenter = f.manager.interface.encodeFunctionData('charge', await chargeArgs(sid, 1n, 1n));
    await mined(hook.setHook(await f.manager.getAddress(), reenter));
    await expectRevert(f.manager.charge(...(await chargeArgs(sid, 2n, 1n))), 'ReentrantCall');
    await mined(hook.setHook('0x0000000000000000000000000000000000000000', '0x'));
    await charge(sid, 2n, 1n);
  });
});
