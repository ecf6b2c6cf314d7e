import { Wallet, id, parseEther, toQuantity, type TransactionReceipt } from 'ethers';
import {
  connectPaymentDeposit,
  connectStablepayRegistry,
  connectTestStablecoin,
  toOnChainId,
} from '@stablepay/contracts';
import { OperatorRelayers } from '@stablepay/chain-operator';
import { ANVIL_DEV_PRIVATE_KEYS, localChainProvider } from '@stablepay/local-chains';
import { signCapture, signRefund, signRescue, signRevokeAuthorizations } from '@stablepay/merchant-sdk';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { ManualClock } from '@stablepay/util';
import { type EmbeddedStack, startEmbedded } from './embedded';
import { TRANSFER_GAS } from './test-support/payments';

/**
 * The merchant's actions on a payment after its deposit, through HTTP on the embedded stack with a local anvil:
 * TWO_STEP capture and refund signed with the SDK signers, an over-deposit recovered to the payer, a wrong-token
 * transfer counted as non-funding and rescued, and the hostile cases (another key, an expired deadline, a replayed
 * signature, another merchant's payment). Balances are read on chain.
 *
 * The deposit is funded by a real transfer from an anvil wallet and deployed by the service's own flow (indexer,
 * screening, the operator's deploy).
 */
type Json = Record<string, unknown>;
const ADMIN_TOKEN = 'admin-token-for-tests-0123456789';
const CHAIN = 'eip155:8453';
const USDC = 10n ** 6n;
const ORDER = '100000000'; // 100.000000 USD

const until = async <T>(read: () => Promise<T>, done: (v: T) => boolean, what: string): Promise<T> => {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(value)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
};

describe('payment actions through HTTP (embedded stack, anvil)', () => {
  let db: TestDatabase;
  let stack: EmbeddedStack;
  const clock = new ManualClock(new Date());
  const merchantSigner = new Wallet(id('payment-actions e2e merchant signer'));
  const strangerKey = new Wallet(id('payment-actions e2e stranger'));
  const settlement = Wallet.createRandom().address;
  const rescueTo = Wallet.createRandom().address;
  let otherKey: string;

  const api = async (method: string, path: string, body?: unknown, key = stack.demoApiKey) => {
    const res = await fetch(`${stack.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${key}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    return { status: res.status, body: (text ? JSON.parse(text) : {}) as Json };
  };

  const local = () => {
    const chain = stack.chains?.chains.find((c) => c.caip2 === CHAIN);
    if (!chain) throw new Error('no local chain');
    return chain;
  };
  const provider = () => localChainProvider(local().rpcUrl, local().chainId);
  const payer = () => new Wallet(ANVIL_DEV_PRIVATE_KEYS[5] ?? '', provider());
  const balance = (token: string, holder: string) =>
    connectTestStablecoin(token, provider()).balanceOf(holder);
  const chainTime = async () => BigInt((await provider().getBlock('latest'))?.timestamp ?? 0);
  const relayer = () => stack.service.app.get(OperatorRelayers, { strict: false }).require().for(CHAIN);
  const merchantOnChainId = () => toOnChainId(stack.demoMerchantId);

  const payment = async (paymentId: string) => (await api('GET', `/payments/${paymentId}`)).body;
  /** A POST with an Idempotency-Key: its status and body. */
  const keyed = async (path: string, key: string, body: unknown) => {
    const res = await fetch(`${stack.url}${path}`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${stack.demoApiKey}`,
        'content-type': 'application/json',
        'idempotency-key': key,
      },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Json };
  };

  /** The customer's transfer from an anvil wallet to the deposit address. */
  const transfer = async (token: string, to: string, amount: bigint): Promise<string> => {
    const coin = connectTestStablecoin(token, payer());
    await (await coin.mint(payer().address, amount)).wait();
    const receipt = (await (
      await coin.transfer(to, amount, { gasLimit: TRANSFER_GAS })
    ).wait()) as TransactionReceipt;
    return receipt.hash;
  };

  /**
   * A checkout paid on chain and deployed by the service's own flow (indexer -> payment facts -> screening ->
   * the operator deploys): answers the payment object once the read model shows the deployment.
   */
  const paidAndDeployed = async (
    method: 'DIRECT' | 'TWO_STEP',
    paid: bigint,
    extras: { daiStray?: bigint } = {},
  ): Promise<Json> => {
    const created = await api('POST', '/checkouts', {
      amount: ORDER,
      currency: 'USD',
      method,
      accepted_chains: [CHAIN],
      accepted_tokens: ['USDC'],
    });
    expect(created.status).toBe(201);
    const paymentId = String(created.body['payment_id']);
    const deposit = String((await payment(paymentId))['deposit_address']);
    if (extras.daiStray) await transfer(local().addresses.stablecoins.DAI, deposit, extras.daiStray);
    await transfer(local().addresses.stablecoins.USDC, deposit, paid);
    return until(
      () => payment(paymentId),
      (p) =>
        typeof p['deploy_tx_hash'] === 'string' &&
        (extras.daiStray === undefined || p['non_funding_transactions_count'] === 1),
      'the deposit deployed by the payment flow',
    );
  };

  const signing = (p: Json) => ({
    domain: { chain: String(p['detected_chain']), verifyingContract: String(p['deposit_address']) },
    paymentId: String(p['on_chain_id']),
    token: String(p['detected_asset']),
  });
  const epoch = async () =>
    connectStablepayRegistry(local().addresses.registry, provider()).merchantEpoch(merchantOnChainId());

  const captureBody = async (p: Json, amount: bigint, signer: Wallet = merchantSigner, deadline?: bigint) => {
    const s = signing(p);
    const until_ = deadline ?? (await chainTime()) + 3_600n;
    const { signature } = await signCapture(signer, s.domain, {
      paymentId: s.paymentId,
      token: s.token,
      amount,
      epoch: await epoch(),
      deadline: until_,
    });
    return { amount: amount.toString(), deadline: until_.toString(), signature };
  };

  const webhookTypes = async (paymentId: string) => {
    const res = await api('GET', `/merchants/${stack.demoMerchantId}/webhook-events?limit=100`);
    return ((res.body['data'] as Json[] | undefined) ?? [])
      .filter((e) => ((e['data'] as Json | undefined)?.['object'] as Json | undefined)?.['id'] === paymentId)
      .map((e) => String(e['type']));
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    stack = await startEmbedded({
      env: {
        DATABASE_URL: db.url,
        PORT: '0',
        ADMIN_TOKEN,
        LOG_LEVEL: 'error',
        STABLEPAY_LOCAL_CHAINS: 'true',
        LOCAL_CHAIN_IDS: '8453',
        INDEXER_POLL_MS: '100',
      },
      dataDir: 'memory',
      clock,
    });
    expect(
      (
        await api('POST', '/settings', {
          merchant_signer: merchantSigner.address,
          settlement_address: settlement,
        })
      ).status,
    ).toBe(200);
    // The operator registers the merchant on every chain (merchantChainRegistrationService).
    await until(
      () =>
        connectStablepayRegistry(local().addresses.registry, provider()).merchantAuth(merchantOnChainId()),
      (auth) => auth.signer === merchantSigner.address,
      'the merchant registered on chain',
    );
    const other = await fetch(`${stack.url}/admin/merchants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Other Store', mode: 'test', settlement_mode: 'crypto' }),
    });
    otherKey = String(((await other.json()) as Json)['api_key']);
  }, 120_000);

  afterAll(async () => {
    await stack?.stop();
    await db?.drop();
  });

  it('captures a TWO_STEP escrow signed with signCapture: settled, settlement paid, payment.settled', async () => {
    const p = await paidAndDeployed('TWO_STEP', BigInt(ORDER));
    expect(p['status']).toBe('escrow_confirmed');
    const usdc = local().addresses.stablecoins.USDC;
    const before = await balance(usdc, settlement);
    const res = await api(
      'POST',
      `/payments/${String(p['id'])}/capture`,
      await captureBody(p, BigInt(ORDER)),
    );
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'settled', amount_captured: ORDER });
    expect((await balance(usdc, settlement)) - before).toBe(BigInt(ORDER));
    await until(
      () => webhookTypes(String(p['id'])),
      (t) => t.includes('payment.settled'),
      'payment.settled',
    );
  });

  it('refunds a TWO_STEP escrow to the payer signed with signRefund: refunded, payer paid, payment.refunded', async () => {
    const p = await paidAndDeployed('TWO_STEP', BigInt(ORDER));
    const s = signing(p);
    const deadline = (await chainTime()) + 3_600n;
    const { signature } = await signRefund(merchantSigner, s.domain, {
      paymentId: s.paymentId,
      token: s.token,
      payer: (p['payer_addresses'] as string[])[0] ?? '',
      amount: BigInt(ORDER),
      epoch: await epoch(),
      deadline,
    });
    const usdc = local().addresses.stablecoins.USDC;
    const before = await balance(usdc, payer().address);
    const res = await api('POST', `/payments/${String(p['id'])}/refund`, {
      amount: ORDER,
      deadline: Number(deadline),
      signature,
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'refunded', amount_refunded: ORDER });
    expect((await balance(usdc, payer().address)) - before).toBe(BigInt(ORDER));
    await until(
      () => webhookTypes(String(p['id'])),
      (t) => t.includes('payment.refunded'),
      'payment.refunded',
    );
  });

  it('refuses hostile requests before anything is sent: another key, expired deadline, replay, another merchant', async () => {
    const p = await paidAndDeployed('TWO_STEP', BigInt(ORDER));
    const path = `/payments/${String(p['id'])}/capture`;
    const sent = async () => provider().getTransactionCount(relayer().address);
    const nonce = await sent();

    const otherSigner = await api('POST', path, await captureBody(p, 10n * USDC, strangerKey));
    expect(otherSigner.status).toBe(422);
    expect(otherSigner.body['error']).toMatchObject({
      type: 'cannot_process',
      code: 'invalid_signature',
      param: 'signature',
    });

    const expired = await api(
      'POST',
      path,
      await captureBody(p, 10n * USDC, merchantSigner, (await chainTime()) - 1n),
    );
    expect(expired.status).toBe(422);
    expect(expired.body['error']).toMatchObject({ code: 'signature_expired', param: 'deadline' });

    const tooFar = await captureBody(p, 10n * USDC, merchantSigner, (await chainTime()) + 8n * 86_400n);
    expect((await api('POST', path, tooFar)).body['error']).toMatchObject({
      code: 'signature_deadline_too_far',
    });

    const good = await captureBody(p, 10n * USDC);
    const foreign = await api('POST', path, good, otherKey);
    expect(foreign.status).toBe(404);
    expect(await sent()).toBe(nonce);

    expect((await api('POST', path, good)).status).toBe(200);
    const replay = await api('POST', path, good);
    expect(replay.status).toBe(409);
    expect(replay.body['error']).toMatchObject({ code: 'signature_already_used', param: 'signature' });
    expect(await sent()).toBe(nonce + 1);
    expect(await payment(String(p['id']))).toMatchObject({
      status: 'escrow_confirmed',
      amount_captured: (10n * USDC).toString(),
    });

    const destination = await api('POST', `/payments/${String(p['id'])}/recover`, { to: rescueTo });
    expect(destination.status).toBe(400);
    expect(destination.body['error']).toMatchObject({ param: 'to', code: 'unknown_parameter' });
  });

  it('counts a wrong-token transfer as non-funding and rescues it with signRescue', async () => {
    const p = await paidAndDeployed('DIRECT', BigInt(ORDER), { daiStray: parseEther('4') });
    expect(p).toMatchObject({ status: 'settled', non_funding_transactions_count: 1 });
    const dai = local().addresses.stablecoins.DAI;
    const s = signing(p);
    const deadline = (await chainTime()) + 3_600n;
    const { signature } = await signRescue(merchantSigner, s.domain, {
      paymentId: s.paymentId,
      token: dai,
      to: rescueTo,
      amount: parseEther('4'),
      epoch: await epoch(),
      deadline,
    });
    const own = await api('POST', `/payments/${String(p['id'])}/rescue`, {
      token: s.token,
      to: rescueTo,
      amount: '1',
      deadline: deadline.toString(),
      signature,
    });
    expect(own.body['error']).toMatchObject({ code: 'payer_owned_token', param: 'token' });
    const res = await api('POST', `/payments/${String(p['id'])}/rescue`, {
      token: `${CHAIN}/erc20:${dai}`,
      to: rescueTo,
      amount: parseEther('4').toString(),
      deadline: deadline.toString(),
      signature,
    });
    expect(res.status).toBe(200);
    expect(await balance(dai, rescueTo)).toBe(parseEther('4'));
  });

  it('a capture that reverted on chain (502, nothing moved) does not answer its Idempotency-Key retry as done; the capture signed again captures', async () => {
    const p = await paidAndDeployed('TWO_STEP', BigInt(ORDER));
    const path = `/payments/${String(p['id'])}/capture`;
    const key = `capture-reverted-${Date.now()}`;
    // A deadline the chain passes between the simulation and the block that mines the capture: the transaction
    // reverts (SignatureExpired) with nothing moved, as any state change in that window would make it.
    const deadline = (await chainTime()) + 600n;
    const doomed = await captureBody(p, BigInt(ORDER), merchantSigner, deadline);
    await provider().send('evm_setAutomine', [false]);
    let first: { status: number; body: Json };
    try {
      const answer = keyed(path, key, doomed);
      await until(
        async () => ((await provider().send('txpool_status', [])) as { pending: string }).pending,
        (pending) => BigInt(pending) > 0n,
        'the capture broadcast',
      );
      await provider().send('evm_setNextBlockTimestamp', [Number(deadline) + 1]);
      await provider().send('evm_mine', []);
      first = await answer;
    } finally {
      await provider().send('evm_setAutomine', [true]);
    }
    expect(first.status).toBe(502);
    expect(first.body['error']).toMatchObject({ code: 'transaction_reverted' });
    expect(await payment(String(p['id']))).toMatchObject({
      status: 'escrow_confirmed',
      amount_captured: '0',
    });

    // The 502 is not kept, but like any 5xx it leaves the key to its own request (docs/openapi.yaml, Idempotency):
    // the capture signed again is another request, refused with the key and sent with a new one.
    const usdc = local().addresses.stablecoins.USDC;
    const before = await balance(usdc, settlement);
    const resigned = await captureBody(p, BigInt(ORDER));
    const reused = await keyed(path, key, resigned);
    expect([reused.status, reused.body['error']]).toEqual([
      400,
      expect.objectContaining({ code: 'idempotency_key_reused', param: 'Idempotency-Key' }),
    ]);
    // The same request runs again as a new attempt, not answered as the reverted one done: its deadline has passed.
    const again = await keyed(path, key, doomed);
    expect([again.status, again.body['error']]).toEqual([
      422,
      expect.objectContaining({ code: 'signature_expired' }),
    ]);
    const retried = await keyed(path, `${key}-signed-again`, resigned);
    expect(retried.status).toBe(200);
    expect(retried.body).toMatchObject({ status: 'settled', amount_captured: ORDER });
    expect((await balance(usdc, settlement)) - before).toBe(BigInt(ORDER));
  });

  it('a capture whose request was saved before its 500 leaves its Idempotency-Key to that request: another capture with the key is 400 idempotency_key_reused and sends nothing; the same request captures once', async () => {
    const p = await paidAndDeployed('TWO_STEP', BigInt(ORDER));
    const paymentId = String(p['id']);
    const path = `/payments/${paymentId}/capture`;
    const key = `capture-lost-${Date.now()}`;
    const usdc = local().addresses.stablecoins.USDC;
    const before = await balance(usdc, settlement);
    const part = 40n * USDC;
    const first = await captureBody(p, part);
    // The operator has no gas money when the capture is broadcast: the request fact and its call are saved, the
    // broadcast fails and the answer is a 500 (what a command timeout after the append leaves too).
    const operator = relayer().address;
    const funds = await provider().getBalance(operator);
    await provider().send('anvil_setBalance', [operator, '0x0']);
    let failed: { status: number; body: Json };
    try {
      failed = await keyed(path, key, first);
    } finally {
      await provider().send('anvil_setBalance', [operator, toQuantity(funds)]);
    }
    expect(failed.status).toBe(500);

    // Under the key's command id it would be answered with the saved call of the first: 40 captured, not 100.
    const other = await keyed(path, key, await captureBody(p, BigInt(ORDER)));
    expect([other.status, other.body['error']]).toEqual([
      400,
      expect.objectContaining({ code: 'idempotency_key_reused', param: 'Idempotency-Key' }),
    ]);
    expect(await balance(usdc, settlement)).toBe(before);
    expect(await payment(paymentId)).toMatchObject({ status: 'escrow_confirmed', amount_captured: '0' });

    const retried = await keyed(path, key, first);
    expect(retried.status).toBe(200);
    expect(retried.body).toMatchObject({ amount_captured: part.toString() });
    expect((await keyed(path, key, first)).body).toMatchObject({ amount_captured: part.toString() });
    expect((await balance(usdc, settlement)) - before).toBe(part);
  });

  // After the signed actions above: it ends every signature the merchant made so far (recover below needs none).
  it('revokes the merchant signatures through the API (signRevokeAuthorizations, relayed by the operator): a capture signed before is refused, one signed after captures', async () => {
    const p = await paidAndDeployed('TWO_STEP', BigInt(ORDER));
    const path = `/payments/${String(p['id'])}/capture`;
    const signedBefore = await captureBody(p, BigInt(ORDER));
    const was = await epoch();
    const sent = async () => provider().getTransactionCount(relayer().address);
    const deadline = (await chainTime()) + 3_600n;
    const revocation = async (signer: Wallet) => {
      const { signature } = await signRevokeAuthorizations(
        signer,
        { chain: CHAIN, verifyingContract: local().addresses.registry },
        { merchantId: merchantOnChainId(), epoch: was, deadline },
      );
      return { revocations: [{ chain: CHAIN, deadline: Number(deadline), signature }] };
    };
    const revoke = (body: unknown) => api('POST', '/settings/revoke-authorizations', body);

    // Refused before anything is sent: a malformed body, another key's signature.
    const nonce = await sent();
    expect((await revoke({ revocations: [] })).body['error']).toMatchObject({
      type: 'validation_error',
      param: 'revocations',
    });
    const stranger = await revoke(await revocation(strangerKey));
    expect(stranger.status).toBe(422);
    expect(stranger.body['error']).toMatchObject({
      type: 'cannot_process',
      code: 'invalid_signature',
      param: 'revocations[0][signature]',
    });
    expect(await sent()).toBe(nonce);
    expect(await epoch()).toBe(was);

    const signed = await revocation(merchantSigner);
    const res = await revoke(signed);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      object: 'authorization_revocation',
      revocations: [
        {
          chain: CHAIN,
          status: 'revoked',
          epoch: (was + 1n).toString(),
          tx_hash: expect.stringMatching(/^0x[0-9a-f]{64}$/),
        },
      ],
    });
    expect(await epoch()).toBe(was + 1n);
    const receipt = await provider().getTransactionReceipt(
      String((res.body['revocations'] as Json[])[0]?.['tx_hash']),
    );
    expect(receipt?.status).toBe(1);
    // A retry (its answer lost) sends nothing and says so.
    const replay = await revoke(signed);
    expect(replay.body).toMatchObject({
      revocations: [{ chain: CHAIN, status: 'already_revoked', epoch: (was + 1n).toString(), tx_hash: null }],
    });
    expect(await sent()).toBe(nonce + 1);

    // The capture signed before the revocation no longer passes the preflight; nothing moves.
    const stale = await api('POST', path, signedBefore);
    expect(stale.status).toBe(422);
    expect(stale.body['error']).toMatchObject({ code: 'invalid_signature' });
    const named = await api('POST', path, { ...signedBefore, epoch: was.toString() });
    expect(named.body['error']).toMatchObject({ code: 'epoch_mismatch', param: 'epoch' });
    expect(await payment(String(p['id']))).toMatchObject({
      status: 'escrow_confirmed',
      amount_captured: '0',
    });
    // The contract agrees: the old signature reverts when sent straight to the deposit, by anyone.
    const deposit = connectPaymentDeposit(String(p['deposit_address']), payer());
    await expect(
      deposit.capture.staticCall(
        local().addresses.stablecoins.USDC,
        BigInt(ORDER),
        BigInt(signedBefore.deadline),
        signedBefore.signature,
      ),
    ).rejects.toMatchObject({ revert: { name: 'InvalidSignature' } });
    // Signed again at the new epoch: the capture goes through.
    const settled = await api('POST', path, await captureBody(p, BigInt(ORDER)));
    expect(settled.status).toBe(200);
    expect(settled.body).toMatchObject({ status: 'settled', amount_captured: ORDER });
  });

  it('recovers an over-deposit to the payer: recoverable, then recover once the payer is final', async () => {
    const p = await paidAndDeployed('DIRECT', BigInt(ORDER) + 25n * USDC);
    expect(p).toMatchObject({
      status: 'recoverable',
      recoverable_reason: 'over_deposit',
      recovery_destination: payer().address,
    });
    const early = await api('POST', `/payments/${String(p['id'])}/recover`);
    expect(early.status).toBe(422);
    expect(early.body['error']).toMatchObject({ code: 'payer_not_final' });

    await provider().send('evm_increaseTime', [86_401]);
    await provider().send('evm_mine', []);
    // Only the chain moved on: the payer is final by block time (what the contract checks) while the service clock
    // is still inside the challenge period, and the check follows the chain.
    expect(clock.now().getTime()).toBeLessThan(Number(await chainTime()) * 1000 - 86_000_000);
    const usdc = local().addresses.stablecoins.USDC;
    const before = await balance(usdc, payer().address);
    const res = await api('POST', `/payments/${String(p['id'])}/recover`);
    expect(res.body['error']).toBeUndefined();
    expect(res.status).toBe(200);
    expect(res.body['status']).toBe('settled');
    expect((await balance(usdc, payer().address)) - before).toBe(25n * USDC);
    await until(
      () => webhookTypes(String(p['id'])),
      (t) => t.includes('payment.recoverable'),
      'payment.recoverable',
    );
  });
});
