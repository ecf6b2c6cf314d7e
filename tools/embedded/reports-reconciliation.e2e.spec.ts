import { parse } from 'csv-parse/sync';
import { Wallet } from 'ethers';
import { connectSubscriptionManager, connectTestStablecoin } from '@stablepay/contracts';
import { quoteHash } from '@stablepay/evm';
import { deployCallBatcher } from '@stablepay/local-chains';
import { signCapture, signRefund, signRescue } from '@stablepay/merchant-sdk';
import { type Json, until } from './test-support/http';
import { newPayment, paymentSigning, paymentUntil, transferToken } from './test-support/payments';
import { OnChainStack } from './test-support/stack';
import {
  authorizeSubscribe,
  ledgerListed,
  newArsSubscriptionCheckout,
  readyForSubscriptions,
  sendSubscribe,
  signedChargeBody,
} from './test-support/subscriptions';

/**
 * An auditor's reconciliation, end to end through HTTP on the embedded stack and a local anvil: one period of mixed
 * activity in two tokens of different decimals (USDC 6, DAI 18) -- DIRECT payments paid at once, in parts and over
 * the order, TWO_STEP escrows partly captured and partly refunded, subscriptions subscribed and charged (the plan's
 * price and an ad-hoc amount) -- then the CSV exports of that period are added up and compared, to the smallest unit,
 * with what the chain holds: the settlement address's gain per token, what each deposit still holds, what the
 * subscribers paid, and the charge ledger's own list. Period bounds are cut exactly at a row's own timestamp: the row
 * falls on one side only.
 */
type Row = Record<string, string>;
const CHAIN = 'eip155:8453';

describe('reports reconcile to the smallest unit with the chain and the ledger (USDC 6 and DAI 18 decimals)', () => {
  const env = new OnChainStack();
  const chain = env.chain(CHAIN);
  const signer = Wallet.createRandom();
  const pauser = Wallet.createRandom();
  const settlement = Wallet.createRandom().address;
  const api = env.api;

  const token = (symbol: 'USDC' | 'DAI') => chain.local.addresses.stablecoins[symbol];
  const balance = (symbol: 'USDC' | 'DAI', holder: string) =>
    connectTestStablecoin(token(symbol), chain.provider()).balanceOf(holder);
  const csv = async (path: string): Promise<Row[]> => {
    const res = await fetch(`${env.stack.url}/reports/${path}`, {
      headers: { authorization: `Bearer ${env.stack.demoApiKey}` },
    });
    expect(res.status).toBe(200);
    return parse(await res.text(), { columns: true }) as Row[];
  };
  const sum = (values: readonly string[]) => values.reduce((a, v) => a + BigInt(v === '' ? '0' : v), 0n);

  beforeAll(async () => {
    await env.start('8453');
    await readyForSubscriptions(api, undefined, env.stack.demoMerchantId, [chain], {
      signer,
      pauser,
      settlement,
    });
  }, 180_000);

  afterAll(async () => {
    await env.stop();
  });

  /** A checkout paid by `payer` with the given transfers; answers the payment once `done` holds. */
  const paid = async (
    body: Json,
    symbol: 'USDC' | 'DAI',
    transfers: readonly bigint[],
    done: (p: Json) => boolean,
  ): Promise<Json> => {
    const p = await newPayment(api, { accepted_chains: [CHAIN], accepted_tokens: [symbol], ...body });
    for (const amount of transfers)
      await transferToken(chain, chain.wallet(4), symbol, String(p['deposit_address']), amount);
    return paymentUntil(api, String(p['id']), done, `payment ${String(p['id'])} paid`);
  };

  const capture = async (p: Json, amount: bigint) => {
    const s = await paymentSigning(chain, env.stack.demoMerchantId, p);
    const { signature } = await signCapture(signer, s.domain, { ...s, amount });
    const res = await api('POST', `/payments/${String(p['id'])}/capture`, {
      amount: amount.toString(),
      deadline: s.deadline.toString(),
      signature,
    });
    expect(res.status).toBe(200);
    return res.body;
  };
  const refund = async (p: Json, amount: bigint, status = 200) => {
    const s = await paymentSigning(chain, env.stack.demoMerchantId, p);
    const payer = (p['payer_addresses'] as string[])[0] ?? '';
    const { signature } = await signRefund(signer, s.domain, { ...s, payer, amount });
    const res = await api('POST', `/payments/${String(p['id'])}/refund`, {
      amount: amount.toString(),
      deadline: s.deadline.toString(),
      signature,
    });
    expect(res.status).toBe(status);
    return res.body;
  };

  /** Subscribes wallet `index` in `symbol` (first charge, nonce 0), then charges the plan price and an ad-hoc amount. */
  const subscribedAndCharged = async (index: number, symbol: 'USDC' | 'DAI') => {
    const subscriber = chain.wallet(index);
    const checkout = await newArsSubscriptionCheckout(api, CHAIN);
    const { path, params, authorization } = await authorizeSubscribe(
      api,
      checkout,
      chain,
      subscriber,
      symbol,
    );
    const txHash = await sendSubscribe(subscriber, authorization);
    const reported = await api('POST', path, { ...params, tx_hash: txHash }, null);
    expect(reported.body['status']).toBe('recorded');
    const subscriptionId = String(checkout['onchain_id']);
    for (const body of [undefined, { fiat_amount: '123457' }]) {
      const q = await api('POST', `/subscriptions/${subscriptionId}/charge-quote`, body);
      expect(q.status).toBe(201);
      const charged = await api(
        'POST',
        `/subscriptions/${subscriptionId}/charge`,
        await signedChargeBody(api, undefined, chain, {
          merchantId: env.stack.demoMerchantId,
          subscriptionId,
          managerAddress: String(authorization['manager_address']),
          amount: String(q.body['amount']),
          quoteCode: String(q.body['quote_code']),
          signer,
        }),
      );
      expect(charged.body).toMatchObject({ status: 'succeeded' });
    }
    return {
      subscriptionId,
      subscriber: subscriber.address,
      manager: String(authorization['manager_address']),
      minted: BigInt(String(authorization['budget_amount'])) * 3n,
    };
  };

  it('adds up: payments and charges exports equal the settlement address gain, the deposits and the subscribers, per token', async () => {
    const start = new Date(Date.now() - 1000).toISOString();
    const settledBefore = { USDC: await balance('USDC', settlement), DAI: await balance('DAI', settlement) };
    const E12 = 10n ** 12n;

    // DIRECT: at once (USDC), in two parts (DAI), over the order (USDC: the surplus stays, recoverable).
    const direct = await paid(
      { amount: '12345678', method: 'DIRECT' },
      'USDC',
      [12_345_678n],
      (p) => p['status'] === 'settled',
    );
    const parts = await paid(
      { amount: '7000001', method: 'DIRECT' },
      'DAI',
      [3_000_000n * E12 + 1n, 4_000_001n * E12 - 1n],
      (p) => p['status'] === 'settled',
    );
    const over = await paid(
      { amount: '2000000', method: 'DIRECT' },
      'USDC',
      [2_000_000n, 1_000_001n],
      (p) => p['recoverable_amount'] === '1000001',
    );
    // Over the order in one transfer (DAI): the surplus is part of amount_paid this time, and recoverable.
    const overAtOnce = await paid(
      { amount: '1000000', method: 'DIRECT' },
      'DAI',
      [1_000_000n * E12 + 5n],
      (p) => p['recoverable_amount'] === '5',
    );
    // TWO_STEP: part captured, the rest refunded (USDC); part refunded, part captured, some left in escrow (DAI).
    const escrowUsdc = await paid(
      { amount: '100000000', method: 'TWO_STEP' },
      'USDC',
      [100_000_000n],
      (p) => p['status'] === 'escrow_confirmed',
    );
    await capture(escrowUsdc, 60_000_001n);
    // One unit more than the escrow left is refused, naming the amount, and moves nothing (the deposit check below).
    expect((await refund(escrowUsdc, 40_000_000n, 400))['error']).toMatchObject({
      param: 'amount',
      code: 'amount_exceeds_escrow',
    });
    await refund(escrowUsdc, 39_999_999n);
    const escrowDai = await paid(
      { amount: '5000000', method: 'TWO_STEP' },
      'DAI',
      [5_000_000n * E12],
      (p) => p['status'] === 'escrow_confirmed',
    );
    await refund(escrowDai, 2_000_000n * E12 + 7n);
    await capture(escrowDai, 2_000_000n * E12);

    const subscriberBefore = {
      USDC: await balance('USDC', chain.wallet(5).address),
      DAI: await balance('DAI', chain.wallet(6).address),
    };
    const usdcSub = await subscribedAndCharged(5, 'USDC');
    const daiSub = await subscribedAndCharged(6, 'DAI');
    await ledgerListed(env.stack);

    const ids = [direct, parts, over, overAtOnce, escrowUsdc, escrowDai].map((p) => String(p['id']));
    const payments = await until(
      async () =>
        (await csv(`payments/export?created[gte]=${start}`)).filter((r) => ids.includes(r['id'] ?? '')),
      (rows) =>
        rows.length === ids.length &&
        rows.every((r) => r['amount_captured'] !== '0' || r['method'] === 'DIRECT'),
      'the payments export to show every payment with its outflows',
    );
    const charges = (await csv(`subscription-charges/export?charged_from=${start}`)).filter((r) =>
      [usdcSub.subscriptionId, daiSub.subscriptionId].includes(r['subscription_id'] ?? ''),
    );
    expect(charges).toHaveLength(6);

    // Every amount is in the smallest units of the token its row names, with that token's decimals.
    for (const r of payments) {
      const decimals = r['token_symbol'] === 'DAI' ? 18 : 6;
      expect(r['token_decimals']).toBe(String(decimals));
      expect(BigInt(r['token_amount'] ?? '')).toBe(BigInt(r['amount'] ?? '') * 10n ** BigInt(decimals - 6));
    }
    for (const r of charges) {
      expect(r['token_decimals']).toBe(r['token_symbol'] === 'DAI' ? '18' : '6');
      expect(r['status']).toBe('succeeded');
      expect(BigInt(r['fee'] ?? '')).toBeGreaterThanOrEqual(0n);
      expect(BigInt(r['fee'] ?? '')).toBeLessThanOrEqual(BigInt(r['amount'] ?? ''));
    }

    // What each deposit still holds is what its row says is left: the payer's `recoverable_amount`, plus, for
    // TWO_STEP, the escrow neither captured nor refunded. (Not amount_paid less the outflows: a surplus sent in the
    // funding transfer is in amount_paid, one sent later is not.)
    for (const r of payments) {
      const symbol = r['token_symbol'] === 'DAI' ? 'DAI' : 'USDC';
      const escrowLeft =
        r['method'] === 'TWO_STEP'
          ? BigInt(r['token_amount'] ?? '') -
            BigInt(r['amount_captured'] ?? '') -
            BigInt(r['amount_refunded'] ?? '')
          : 0n;
      expect(await balance(symbol, r['deposit_address'] ?? '')).toBe(
        escrowLeft + BigInt(r['recoverable_amount'] || '0'),
      );
    }

    // The settlement address gained, per token, exactly what the two exports say reached the merchant.
    for (const symbol of ['USDC', 'DAI'] as const) {
      const fromPayments = payments
        .filter((r) => r['token_symbol'] === symbol)
        .reduce(
          (a, r) =>
            a +
            (r['method'] === 'DIRECT' ? BigInt(r['token_amount'] ?? '') : BigInt(r['amount_captured'] ?? '')),
          0n,
        );
      const fromCharges = sum(
        charges.filter((r) => r['token_symbol'] === symbol).map((r) => r['amount'] ?? ''),
      );
      expect((await balance(symbol, settlement)) - settledBefore[symbol]).toBe(fromPayments + fromCharges);
    }

    // Each subscriber paid exactly what its charges say (sendSubscribe minted it 3x the budget).
    for (const [symbol, sub] of [
      ['USDC', usdcSub],
      ['DAI', daiSub],
    ] as const) {
      const charged = sum(
        charges.filter((r) => r['subscription_id'] === sub.subscriptionId).map((r) => r['amount'] ?? ''),
      );
      expect(subscriberBefore[symbol] + sub.minted - (await balance(symbol, sub.subscriber))).toBe(charged);
    }

    // The export and the ledger list are the same rows with the same amounts.
    const listed = (
      await api('GET', `/merchants/${env.stack.demoMerchantId}/charges?charged_from=${start}&limit=100`)
    ).body['data'] as Json[];
    const byId = new Map(listed.map((c) => [String(c['id']), c]));
    for (const r of charges)
      expect([r['amount'], r['fee'], r['status']]).toEqual([
        byId.get(r['id'] ?? '')?.['amount'],
        byId.get(r['id'] ?? '')?.['fee'],
        byId.get(r['id'] ?? '')?.['status'],
      ]);

    // A period cut exactly at a row's own time counts that row once: in the period it starts, not the one it ends.
    const cutPayment = payments[2]?.['created_at'] ?? '';
    const before = await csv(`payments/export?created[gte]=${start}&created[lt]=${cutPayment}`);
    const after = await csv(`payments/export?created[gte]=${cutPayment}`);
    const mine = (rows: Row[]) => rows.filter((r) => ids.includes(r['id'] ?? '')).map((r) => r['id']);
    expect([...mine(before), ...mine(after)].sort()).toEqual([...ids].sort());
    expect(mine(after)).toContain(payments[2]?.['id']);
    const cutCharge = charges[3]?.['charged_at'] ?? '';
    const early = await csv(`subscription-charges/export?charged_from=${start}&charged_to=${cutCharge}`);
    const late = await csv(`subscription-charges/export?charged_from=${cutCharge}`);
    const chargeIds = charges.map((r) => r['id']);
    const ours = (rows: Row[]) => rows.filter((r) => chargeIds.includes(r['id'])).map((r) => r['id']);
    expect([...ours(early), ...ours(late)].sort()).toEqual([...chargeIds].sort());
    expect(ours(late)).toContain(charges[3]?.['id']);
  }, 300_000);
  it("lists and exports each charge of one transaction that charged two subscriptions (the merchant wallet's batch)", async () => {
    const usdcSub = await subscribedAndCharged(3, 'USDC');
    const daiSub = await subscribedAndCharged(2, 'DAI');
    // The merchant's wallet sends both signed charges itself, in one transaction (anyone may submit them).
    const calls: string[] = [];
    for (const sub of [usdcSub, daiSub]) {
      const q = await api('POST', `/subscriptions/${sub.subscriptionId}/charge-quote`);
      const body = await signedChargeBody(api, undefined, chain, {
        merchantId: env.stack.demoMerchantId,
        subscriptionId: sub.subscriptionId,
        managerAddress: sub.manager,
        amount: String(q.body['amount']),
        quoteCode: String(q.body['quote_code']),
        signer,
      });
      calls.push(
        connectSubscriptionManager(sub.manager, chain.provider()).interface.encodeFunctionData('charge', [
          sub.subscriptionId,
          BigInt(body.amount),
          body.nonce,
          quoteHash(String(q.body['quote_code'])),
          BigInt(body.deadline),
          body.signature,
        ]),
      );
    }
    const batcher = await deployCallBatcher(chain.wallet(3));
    const sent = await batcher.getFunction('run')([usdcSub.manager, daiSub.manager], calls);
    await sent.wait();

    const ids = [usdcSub.subscriptionId, daiSub.subscriptionId];
    const ofBatch = (rows: ReadonlyArray<Record<string, unknown>>) =>
      rows
        .filter((r) => String(r['tx_hash']).toLowerCase() === String(sent.hash).toLowerCase())
        .map((r) => [r['subscription_id'], String(r['charge_nonce']), r['status']]);
    const listed = await until(
      async () =>
        ((await api('GET', `/merchants/${env.stack.demoMerchantId}/charges?limit=100`)).body['data'] ??
          []) as Json[],
      (rows) => ofBatch(rows).length === 2,
      'both charges of the batch listed',
    );
    expect(ofBatch(listed).sort()).toEqual(ids.map((id) => [id, '3', 'succeeded']).sort());
    expect(ofBatch(await csv('subscription-charges/export')).sort()).toEqual(
      ids.map((id) => [id, '3', 'succeeded']).sort(),
    );
    for (const id of ids) expect((await api('GET', `/subscriptions/${id}`)).body['charge_nonce']).toBe(4);
  }, 300_000);

  // Last: it moves the chain's time a day past the service clock (the payer attestation's challenge period).
  it("keeps a recovered over-deposit and a rescued wrong token in the payment's row: the deposit's history adds up per token", async () => {
    const asset = (symbol: 'USDC' | 'DAI') => `${CHAIN}/erc20:${token(symbol)}`.toLowerCase();
    const payer = chain.wallet(4);
    const stranger = chain.wallet(7);
    const over = await paid(
      { amount: '2000000', method: 'DIRECT' },
      'USDC',
      [2_000_000n, 1_000_001n],
      (p) => p['recoverable_amount'] === '1000001',
    );
    const id = String(over['id']);
    const deposit = String(over['deposit_address']);
    // A token the checkout does not accept: the merchant's rescue moves it (here back to its sender).
    await transferToken(chain, stranger, 'DAI', deposit, 3n * 10n ** 18n);
    await paymentUntil(
      api,
      id,
      (p) => (p['transactions'] as Json[]).filter((t) => t['confirmed'] === true).length === 3,
      'the DAI transfer confirmed',
    );
    const s = await paymentSigning(chain, env.stack.demoMerchantId, over);
    const { signature } = await signRescue(signer, s.domain, {
      paymentId: s.paymentId,
      token: token('DAI'),
      to: stranger.address,
      amount: 3n * 10n ** 18n,
      epoch: s.epoch,
      deadline: s.deadline,
    });
    const rescued = await until(
      () =>
        api('POST', `/payments/${id}/rescue`, {
          token: `${CHAIN}/erc20:${token('DAI')}`,
          to: stranger.address,
          amount: (3n * 10n ** 18n).toString(),
          deadline: s.deadline.toString(),
          signature,
        }),
      (r) => (r.body['error'] as Json | undefined)?.['code'] !== 'sender_screening_pending',
      'the DAI sender screened',
    );
    expect(rescued.body['error']).toBeUndefined();
    await chain.increaseTime(86_401);
    const recovered = await api('POST', `/payments/${id}/recover`);
    expect(recovered.body['error']).toBeUndefined();
    expect(recovered.body).not.toHaveProperty('recoverable_amount');

    const row = await until(
      async () => (await csv(`payments/export?checkout_id=${String(over['checkout_id'])}`))[0] ?? ({} as Row),
      (r) => (r['amount_recovered'] ?? '') !== '' && (r['amount_rescued'] ?? '') !== '',
      'the row to show the recover and the rescue',
    );
    const perToken = (cell: string | undefined) =>
      new Map(
        (cell ?? '')
          .split(' ')
          .filter((e) => e !== '')
          .map((e) => [
            e.slice(0, e.lastIndexOf('=')).toLowerCase(),
            BigInt(e.slice(e.lastIndexOf('=') + 1)),
          ]),
      );
    expect(perToken(row['amount_recovered'])).toEqual(new Map([[asset('USDC'), 1_000_001n]]));
    expect(perToken(row['amount_rescued'])).toEqual(new Map([[asset('DAI'), 3n * 10n ** 18n]]));
    expect(perToken(row['amount_non_funding'])).toEqual(
      new Map([
        [asset('USDC'), 1_000_001n],
        [asset('DAI'), 3n * 10n ** 18n],
      ]),
    );
    expect(row['non_funding_tx_hashes']?.split(' ')).toHaveLength(2);
    expect(row['recoverable_amount']).toBe('');
    // Per token: what came in (funding and not) less what went out (the order forwarded, recovered, rescued) is
    // what the deposit holds, and the payer got the surplus back.
    for (const symbol of ['USDC', 'DAI'] as const) {
      const paidIn = symbol === 'USDC' ? BigInt(row['amount_paid'] ?? '') : 0n;
      const forwarded = symbol === 'USDC' ? BigInt(row['token_amount'] ?? '') : 0n;
      const inflow = paidIn + (perToken(row['amount_non_funding']).get(asset(symbol)) ?? 0n);
      const outflow =
        forwarded +
        (perToken(row['amount_recovered']).get(asset(symbol)) ?? 0n) +
        (perToken(row['amount_rescued']).get(asset(symbol)) ?? 0n);
      expect(await balance(symbol, deposit)).toBe(inflow - outflow);
    }
    expect(String(row['payer_addresses'])).toBe(payer.address);
  }, 300_000);
});
