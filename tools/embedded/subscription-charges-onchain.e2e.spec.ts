import { type Signer, Wallet } from 'ethers';
import {
  connectStablepayRegistry,
  connectSubscriptionManager,
  connectTestStablecoin,
  toOnChainId,
} from '@stablepay/contracts';
import { quoteHash } from '@stablepay/evm';
import { ANVIL_DEV_PRIVATE_KEYS, localChainProvider } from '@stablepay/local-chains';
import { signCancelSubscription, signCharge } from '@stablepay/merchant-sdk';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { type EmbeddedStack, startEmbedded } from './embedded';
import { loseKeptAnswer } from './test-support/idempotency';
import { ledgerListed } from './test-support/subscriptions';

/**
 * Subscription charges end to end through HTTP on the embedded stack and a local anvil (SPEC Subscriptions > Charge
 * behavior, Cap and budget rules, the paused brake, "my charge landed via someone else"). One subscription on a
 * fiat-priced plan (ARS, USDC 6 decimals) with cap 2x and budget 4x the price, charged by the merchant with
 * signCharge over quotes. The indexer is held back (a one-hour poll) so the service knows only what its own calls
 * recorded: that is how a subscriber's on-chain change stays unseen and the preflight's state is stale.
 */
type Json = Record<string, unknown>;
const CHAIN = 'eip155:8453';

describe('subscription charges on chain (embedded stack, anvil)', () => {
  let db: TestDatabase;
  let stack: EmbeddedStack;
  const merchantSigner = Wallet.createRandom();
  const merchantPauser = Wallet.createRandom();
  let subscriptionId = '';
  let managerAddress = '';
  let tokenAddress = '';
  let subscriber: Wallet;

  const api = async (method: string, path: string, body?: unknown, auth = true) => {
    const res = await fetch(`${stack.url}${path}`, {
      method,
      headers: {
        ...(auth ? { authorization: `Bearer ${stack.demoApiKey}` } : {}),
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.status, body: (await res.json()) as Json };
  };
  const provider = () => {
    const chain = stack.chains?.chains.find((c) => c.caip2 === CHAIN);
    if (!chain) throw new Error('no local chain');
    return localChainProvider(chain.rpcUrl, chain.chainId);
  };
  const wallet = (index: number) => new Wallet(ANVIL_DEV_PRIVATE_KEYS[index] ?? '', provider());
  const chainNow = async () => BigInt((await provider().getBlock('latest'))?.timestamp ?? 0);
  const subscription = async () => (await api('GET', `/subscriptions/${subscriptionId}`)).body;
  const charges = async () =>
    (
      await api(
        'GET',
        `/merchants/${stack.demoMerchantId}/charges?subscription_id=${subscriptionId}&limit=100`,
      )
    ).body['data'] as Json[];
  const quote = async (body?: Json) => {
    const res = await api('POST', `/subscriptions/${subscriptionId}/charge-quote`, body);
    expect(res.status).toBe(201);
    return res.body;
  };
  /** The merchant's current epoch in the chain's registry (what every merchant signature names). */
  const merchantEpoch = async () =>
    (
      await connectStablepayRegistry(
        String(stack.chains?.chains[0]?.addresses.registry),
        provider(),
      ).merchantAuth(toOnChainId(stack.demoMerchantId))
    ).epoch;
  /** The merchant's signed charge body (signCharge) for `amount` at the subscription's charge_nonce. */
  const signed = async (
    amount: string,
    quoteCode: string | null,
    signer: Signer = merchantSigner,
    over: Json = {},
  ) => {
    const epoch = await merchantEpoch();
    const nonce = Number((await subscription())['charge_nonce']);
    const deadline = (await chainNow()) + 3600n;
    const { signature } = await signCharge(
      signer,
      { chain: CHAIN, verifyingContract: managerAddress },
      { subscriptionId, amount, nonce, deadline, quoteCode, epoch },
    );
    return {
      amount,
      nonce,
      deadline: Number(deadline),
      signature,
      ...(quoteCode ? { quote_code: quoteCode } : {}),
      ...over,
    };
  };
  const charge = (body: Json, key?: string) =>
    fetch(`${stack.url}/subscriptions/${subscriptionId}/charge`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${stack.demoApiKey}`,
        'content-type': 'application/json',
        ...(key ? { 'idempotency-key': key } : {}),
      },
      body: JSON.stringify(body),
    }).then(async (res) => ({ status: res.status, body: (await res.json()) as Json }));
  const balance = () => connectTestStablecoin(tokenAddress, provider()).balanceOf(subscriber.address);

  beforeAll(async () => {
    db = await createTestDatabase();
    stack = await startEmbedded({
      env: {
        DATABASE_URL: db.url,
        PORT: '0',
        LOG_LEVEL: 'error',
        STABLEPAY_LOCAL_CHAINS: 'true',
        LOCAL_CHAIN_IDS: '8453',
        INDEXER_POLL_MS: '3600000',
      },
      dataDir: 'memory',
    });
    expect(
      (
        await api('POST', '/settings', {
          merchant_signer: merchantSigner.address,
          settlement_address: Wallet.createRandom().address,
        })
      ).status,
    ).toBe(200);
    const declaration = await api('GET', '/settings/pauser');
    await api('POST', '/settings/pauser', {
      merchant_pauser: merchantPauser.address,
      signature: await merchantPauser.signMessage(String(declaration.body['declaration_message'])),
    });
    // Subscribe (sub-core's flow): price 1,500.00 ARS, cap 3,000.00, budget 6,000.00, hourly windows.
    const checkout = await api('POST', '/subscription-checkouts', {
      price: '150000',
      price_currency: 'ARS',
      cap: '300000',
      budget: '600000',
      period_duration: 3600,
      supported_chains: [CHAIN],
    });
    expect(checkout.status).toBe(201);
    const usdc = (checkout.body['subscription_options'] as Json[]).find((o) => o['token_symbol'] === 'USDC');
    subscriber = wallet(3);
    const path = `/subscription-checkouts/${String(checkout.body['id'])}/subscribe`;
    const params = { chain: CHAIN, asset: usdc?.['asset'], subscriber: subscriber.address };
    const auth = await api('POST', path, params, false);
    expect(auth.status).toBe(200);
    managerAddress = String(auth.body['manager_address']);
    tokenAddress = String(auth.body['token_address']);
    const token = connectTestStablecoin(tokenAddress, subscriber);
    await (await token.mint(subscriber.address, BigInt(String(auth.body['budget_amount'])) * 3n)).wait();
    const [approve, subscribe] = auth.body['transactions'] as Json[];
    await (
      await subscriber.sendTransaction({ to: String(approve?.['to']), data: String(approve?.['data']) })
    ).wait();
    const sent = await subscriber.sendTransaction({
      to: String(subscribe?.['to']),
      data: String(subscribe?.['data']),
    });
    await sent.wait();
    const reported = await api('POST', path, { ...params, tx_hash: sent.hash }, false);
    expect(reported.body['status']).toBe('recorded');
    subscriptionId = String(checkout.body['onchain_id']);
  }, 180_000);

  afterAll(async () => {
    await stack?.stop();
    await db?.drop();
  });

  it('charges the quoted amount with the merchant signature: succeeded, receipt recorded, ledger row listed with the fiat fields', async () => {
    const q = await quote();
    const before = await balance();
    const res = await charge(await signed(String(q['amount']), String(q['quote_code'])));
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      object: 'subscription_charge',
      subscription_id: subscriptionId,
      subscriber: subscriber.address,
      amount: q['amount'],
      status: 'succeeded',
      charge_nonce: 1,
      chain: CHAIN,
      failure_reason: null,
      fiat_amount: '150000',
      fiat_currency: 'ARS',
      settlement_status: null,
    });
    expect(res.body['tx_hash']).toMatch(/^0x[0-9a-f]{64}$/);
    expect(before - (await balance())).toBe(BigInt(String(q['amount'])));
    // The answer is the row the ledger lists once its projection caught up (crypto-settled business), field by field.
    await ledgerListed(stack);
    expect((await charges()).find((c) => c['id'] === res.body['id'])).toEqual(res.body);
    expect(await subscription()).toMatchObject({ charge_nonce: 2, paused: false });
    // The quote paid this charge: a second charge with it is refused before anything is submitted.
    const reuse = await charge(await signed(String(q['amount']), String(q['quote_code'])));
    expect(reuse.status).toBe(409);
    expect(reuse.body['error']).toMatchObject({ code: 'quote_already_used' });
  }, 60_000);

  it('charges again in the same window within budget (metered: an ad-hoc fiat amount quoted)', async () => {
    const q = await quote({ fiat_amount: '100000' });
    const res = await charge(await signed(String(q['amount']), String(q['quote_code'])));
    expect(res.body).toMatchObject({ status: 'succeeded', charge_nonce: 2 });
    const s = await subscription();
    expect(s).toMatchObject({ charge_nonce: 3 });
    expect(BigInt(String(s['spent_this_period']))).toBeGreaterThan(BigInt(String(q['amount'])));
  }, 60_000);

  it('refuses at quote or preflight, writing and sending nothing: over cap, over budget, a wrong signature, a stale nonce, an unbound quote', async () => {
    await ledgerListed(stack);
    const ledgerBefore = (await charges()).length;
    const nonceBefore = (await subscription())['charge_nonce'];
    // Over the cap: no quote is issued for an amount no charge could carry. The charge's own cap check (a cap the
    // subscriber lowered below a quote already given) runs in subscription-chain-events.e2e, where the indexer runs.
    const overCap = await api('POST', `/subscriptions/${subscriptionId}/charge-quote`, {
      fiat_amount: '310000',
    });
    expect(overCap.status).toBe(422);
    expect(overCap.body['error']).toMatchObject({
      type: 'cannot_process',
      code: 'amount_exceeds_cap',
      param: 'fiat_amount',
    });
    const overBudget = await quote({ fiat_amount: '290000' });
    const budget = await charge(await signed(String(overBudget['amount']), String(overBudget['quote_code'])));
    expect(budget.status).toBe(422);
    expect(budget.body['error']).toMatchObject({ code: 'budget_exceeded' });
    const q = await quote({ fiat_amount: '1000' });
    const forged = await charge(
      await signed(String(q['amount']), String(q['quote_code']), Wallet.createRandom()),
    );
    expect(forged.body['error']).toMatchObject({ code: 'invalid_signature', param: 'signature' });
    const stale = await charge(
      await signed(String(q['amount']), String(q['quote_code']), merchantSigner, { nonce: 1 }),
    );
    expect(stale.status).toBe(409);
    expect(stale.body['error']).toMatchObject({ code: 'nonce_already_used' });
    const other = await quote({ fiat_amount: '2000' });
    // Signed over another quote's code: the amount is not what that quote converted.
    const unbound = await charge(await signed(String(q['amount']), String(other['quote_code'])));
    expect(unbound.body['error']).toMatchObject({ code: 'quote_amount_mismatch', param: 'amount' });
    // A code swapped after signing: the signature does not cover it (quoteHash is keccak256 of the code).
    const swapped = await charge({
      ...(await signed(String(q['amount']), String(q['quote_code']))),
      quote_code: other['quote_code'],
    });
    expect(swapped.body['error']).toMatchObject({ code: 'invalid_signature' });
    const noQuote = await charge(await signed(String(q['amount']), null));
    expect(noQuote.body['error']).toMatchObject({ code: 'quote_required' });
    expect((await charges()).length).toBe(ledgerBefore);
    expect((await subscription())['charge_nonce']).toBe(nonceBefore);
  }, 60_000);

  it('a subscriber cap or budget cut the service has not seen passes preflight and is refused on chain: failed, tx_hash null, not paused', async () => {
    const manager = connectSubscriptionManager(managerAddress, subscriber);
    const { cap } = await manager.getSubscription(subscriptionId);
    await (await manager.updateCap(subscriptionId, 1000n)).wait();
    const q = await quote({ fiat_amount: '10000' });
    const res = await charge(await signed(String(q['amount']), String(q['quote_code'])));
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      status: 'failed',
      tx_hash: null,
      fee: '0',
      block_number: '0',
      failure_reason: 'ChargeAmountExceedsCap',
      fiat_amount: null,
    });
    expect(await subscription()).toMatchObject({ paused: false });
    await (await manager.updateCap(subscriptionId, cap)).wait();

    // The same with the budget: lowered on chain to what this window already spent.
    const { budget } = await manager.getSubscription(subscriptionId);
    const spent = BigInt(String((await subscription())['spent_this_period']));
    await (await manager.updateBudget(subscriptionId, spent)).wait();
    const q2 = await quote({ fiat_amount: '10000' });
    const overBudget = await charge(await signed(String(q2['amount']), String(q2['quote_code'])));
    expect(overBudget.body).toMatchObject({
      status: 'failed',
      tx_hash: null,
      failure_reason: 'BudgetExceeded',
    });
    expect(await subscription()).toMatchObject({ paused: false });
    await (await manager.updateBudget(subscriptionId, budget)).wait();
  }, 60_000);

  it('a charge failing for balance pauses the subscription; after the window boundary a funded charge succeeds and unpauses it', async () => {
    const funds = await balance();
    const token = connectTestStablecoin(tokenAddress, subscriber);
    await (await token.transfer(wallet(6).address, funds)).wait();
    const q = await quote();
    const failed = await charge(await signed(String(q['amount']), String(q['quote_code'])));
    expect(failed.body).toMatchObject({
      status: 'failed',
      failure_reason: 'InsufficientBalance',
      tx_hash: null,
    });
    expect(await subscription()).toMatchObject({ paused: true });
    await ledgerListed(stack);
    expect((await charges()).find((c) => c['id'] === failed.body['id'])).toEqual(failed.body);

    // The next window (tumbling, anchored at the on-chain start): spend resets.
    const s = await subscription();
    const spent = BigInt(String(s['spent_this_period']));
    expect(spent).toBeGreaterThan(0n);
    await provider().send('evm_increaseTime', [3600]);
    await provider().send('evm_mine', []);
    await (await connectTestStablecoin(tokenAddress, wallet(6)).transfer(subscriber.address, funds)).wait();
    const q2 = await quote();
    const ok = await charge(await signed(String(q2['amount']), String(q2['quote_code'])));
    expect(ok.body).toMatchObject({ status: 'succeeded' });
    expect(await subscription()).toMatchObject({ paused: false, spent_this_period: q2['amount'] });
  }, 60_000);

  it('a charge another sender submitted first is recorded as succeeded with its transaction; a merchant retry charges nothing twice', async () => {
    const q = await quote();
    const body = await signed(String(q['amount']), String(q['quote_code']));
    const frontRunner = connectSubscriptionManager(managerAddress, wallet(7));
    const theirs = await frontRunner.charge(
      subscriptionId,
      BigInt(String(body['amount'])),
      body['nonce'] as number,
      quoteHash(String(q['quote_code'])),
      BigInt(body['deadline'] as number),
      String(body['signature']),
    );
    await theirs.wait();
    const after = await balance();
    const res = await charge(body);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      status: 'succeeded',
      tx_hash: theirs.hash,
      charge_nonce: body['nonce'],
    });
    expect(await subscription()).toMatchObject({
      paused: false,
      charge_nonce: (body['nonce'] as number) + 1,
    });
    const retry = await charge(body);
    expect(retry.body).toMatchObject({ id: res.body['id'], tx_hash: theirs.hash });
    expect(await balance()).toBe(after);
    await ledgerListed(stack);
    expect((await charges()).filter((c) => c['tx_hash'] === theirs.hash)).toEqual([res.body]);
  }, 60_000);

  it('answers a retried request (same Idempotency-Key) with the charge it made, without submitting again', async () => {
    const q = await quote({ fiat_amount: '5000' });
    const body = await signed(String(q['amount']), String(q['quote_code']));
    const first = await charge(body, 'charge-retry-1');
    const before = await balance();
    const again = await charge(body, 'charge-retry-1');
    expect(again.body).toEqual(first.body);
    expect(await balance()).toBe(before);
  }, 60_000);
  it('a merchant cancel overtaken by a charge the service has not seen is 409 nonce_mismatch naming the nonce on chain (sign again), not 422 cancel_rejected', async () => {
    const q = await quote();
    const body = await signed(String(q['amount']), String(q['quote_code']));
    const nonce = body['nonce'] as number;
    // Another sender lands the merchant's signed charge; the indexer is held back, so the service's charge_nonce
    // is still `nonce` and a cancel signed at it passes preflight, then the contract refuses it (InvalidNonce).
    const theirs = await connectSubscriptionManager(managerAddress, wallet(7)).charge(
      subscriptionId,
      BigInt(String(body['amount'])),
      nonce,
      quoteHash(String(q['quote_code'])),
      BigInt(body['deadline'] as number),
      String(body['signature']),
    );
    await theirs.wait();
    const epoch = await merchantEpoch();
    const cancel = async (at: number) => {
      const deadline = (await chainNow()) + 3600n;
      const { signature } = await signCancelSubscription(
        merchantSigner,
        { chain: CHAIN, verifyingContract: managerAddress },
        { subscriptionId, nonce: at, epoch, deadline },
      );
      return api('POST', `/subscriptions/${subscriptionId}/cancel`, {
        nonce: at,
        deadline: Number(deadline),
        signature,
      });
    };
    const overtaken = await cancel(nonce);
    expect(overtaken.status).toBe(409);
    expect(overtaken.body['error']).toMatchObject({
      type: 'invalid_request',
      code: 'nonce_mismatch',
      param: 'nonce',
      message: expect.stringContaining(`on chain is ${nonce + 1}`),
    });
    // The charge that overtook it is recorded by then (the indexer is an hour away): read again, sign at the nonce shown.
    const now = await subscription();
    expect(now).toMatchObject({ status: 'active', charge_nonce: nonce + 1 });
  }, 60_000);
  it('refuses an ad-hoc fiat_amount whose token amount no charge could carry (over uint256): 400 naming it, not a 500', async () => {
    for (const digits of [77, 78]) {
      const res = await api('POST', `/subscriptions/${subscriptionId}/charge-quote`, {
        fiat_amount: '9'.repeat(digits),
      });
      expect(res.status).toBe(400);
      expect(res.body['error']).toMatchObject({ type: 'validation_error', param: 'fiat_amount' });
    }
  });
  it('tells a malformed fiat_amount or amount what is wrong: its shape, or its length', async () => {
    const told = async (path: string, body: Json) =>
      String(
        ((await api('POST', `/subscriptions/${subscriptionId}/${path}`, body)).body['error'] as Json)[
          'message'
        ],
      );
    expect(await told('charge-quote', { fiat_amount: '0100' })).toBe(
      'fiat_amount must be a string of digits with no sign, decimal point, separator or leading zero.',
    );
    const max = ((1n << 256n) - 1n).toString();
    expect(await told('charge-quote', { fiat_amount: '9'.repeat(80) })).toBe(
      `fiat_amount must be at most 2^256 - 1 (${max}), the largest uint256.`,
    );
    // 2^256 has 78 digits: it passed as digits and the charge was refused as invalid_signature.
    expect(
      await told('charge', {
        amount: (1n << 256n).toString(),
        nonce: 0,
        deadline: 1,
        signature: `0x${'11'.repeat(65)}`,
      }),
    ).toBe(`amount must be at most 2^256 - 1 (${max}), the largest uint256.`);
    expect(await told('charge', { amount: '00', nonce: 0, deadline: 1, signature: '0x' })).toBe(
      'amount must be a string of digits with no sign, decimal point, separator or leading zero.',
    );
  });

  it('a keyed merchant cancel whose process died before keeping its answer answers the retry with the subscription, not 409', async () => {
    const epoch = await merchantEpoch();
    const nonce = Number((await subscription())['charge_nonce']);
    const deadline = (await chainNow()) + 3600n;
    const { signature } = await signCancelSubscription(
      merchantSigner,
      { chain: CHAIN, verifyingContract: managerAddress },
      { subscriptionId, nonce, epoch, deadline },
    );
    const cancel = () =>
      fetch(`${stack.url}/subscriptions/${subscriptionId}/cancel`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${stack.demoApiKey}`,
          'content-type': 'application/json',
          'idempotency-key': 'cancel-answer-lost',
        },
        body: JSON.stringify({ nonce, deadline: Number(deadline), signature }),
      }).then(async (res) => ({ status: res.status, body: (await res.json()) as Json }));
    const first = await cancel();
    expect(first.status).toBe(200);
    await loseKeptAnswer(stack, 'cancel-answer-lost');
    const retried = await cancel();
    expect(retried.status).toBe(200);
    expect(retried.body).toMatchObject({ id: subscriptionId, status: first.body['status'] });
  }, 60_000);
});
