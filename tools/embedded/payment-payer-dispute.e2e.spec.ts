import { Wallet, ZeroAddress, id, type TransactionReceipt } from 'ethers';
import {
  connectPaymentDeposit,
  connectStablepayRegistry,
  connectTestStablecoin,
  toOnChainId,
} from '@stablepay/contracts';
import { ANVIL_DEV_PRIVATE_KEYS, localChainProvider } from '@stablepay/local-chains';
import { signDisputePayer, signRefund } from '@stablepay/merchant-sdk';
import { createTestDatabase, eventually, type TestDatabase } from '@stablepay/testing';
import { ManualClock } from '@stablepay/util';
import { type EmbeddedStack, startEmbedded } from './embedded';
import { TRANSFER_GAS } from './test-support/payments';

/**
 * The payer safeguard of the deposit contract through HTTP on the embedded stack with a local anvil: the merchant
 * disputes the payer the deploy attested (POST /payments/:id/dispute_payer, signDisputePayer), the operator's route
 * answers the admin's attestPayer call, the admin's cold key sends it, the indexer records it on the payment, and a
 * refund then goes to the attested payer. Balances and the deposit's payer are read on chain.
 */
type Json = Record<string, unknown>;
const ADMIN_TOKEN = 'admin-token-for-tests-0123456789';
const CHAIN = 'eip155:8453';
const ORDER = '100000000'; // 100.000000 USD

describe('payer dispute and attestation through HTTP (embedded stack, anvil)', () => {
  let db: TestDatabase;
  let stack: EmbeddedStack;
  const clock = new ManualClock(new Date());
  const merchantSigner = new Wallet(id('payer-dispute e2e merchant signer'));
  const strangerKey = new Wallet(id('payer-dispute e2e stranger'));
  const settlement = Wallet.createRandom().address;
  /** The customer's own wallet: the exchange hot wallet that paid for it was attested instead. */
  const rightPayer = Wallet.createRandom().address;
  let otherKey: string;

  const request = async (method: string, path: string, key: string, body?: unknown) => {
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
  const api = (method: string, path: string, body?: unknown, key = stack.demoApiKey) =>
    request(method, path, key, body);
  const admin = (path: string, body: unknown) => request('POST', path, ADMIN_TOKEN, body);

  const local = () => {
    const chain = stack.chains?.chains.find((c) => c.caip2 === CHAIN);
    if (!chain) throw new Error('no local chain');
    return chain;
  };
  const provider = () => localChainProvider(local().rpcUrl, local().chainId);
  /** The wallet that paid (an exchange's hot wallet, say): attested by the deploy. */
  const hotWallet = () => new Wallet(ANVIL_DEV_PRIVATE_KEYS[5] ?? '', provider());
  const usdc = () => local().addresses.stablecoins.USDC;
  const balance = (holder: string) => connectTestStablecoin(usdc(), provider()).balanceOf(holder);
  const chainTime = async () => BigInt((await provider().getBlock('latest'))?.timestamp ?? 0);
  const merchantOnChainId = () => toOnChainId(stack.demoMerchantId);
  const epoch = async () =>
    connectStablepayRegistry(local().addresses.registry, provider()).merchantEpoch(merchantOnChainId());
  const payment = async (paymentId: string) => (await api('GET', `/payments/${paymentId}`)).body;
  const onChainPayer = async (p: Json) =>
    (await connectPaymentDeposit(String(p['deposit_address']), provider()).payment()).payer;

  const paidAndDeployed = async (): Promise<Json> => {
    const created = await api('POST', '/checkouts', {
      amount: ORDER,
      currency: 'USD',
      method: 'TWO_STEP',
      accepted_chains: [CHAIN],
      accepted_tokens: ['USDC'],
    });
    expect(created.status).toBe(201);
    const paymentId = String(created.body['payment_id']);
    const deposit = String((await payment(paymentId))['deposit_address']);
    const coin = connectTestStablecoin(usdc(), hotWallet());
    await (await coin.mint(hotWallet().address, BigInt(ORDER))).wait();
    (await (
      await coin.transfer(deposit, BigInt(ORDER), { gasLimit: TRANSFER_GAS })
    ).wait()) as TransactionReceipt;
    return eventually(
      () => payment(paymentId),
      (p) => typeof p['deploy_tx_hash'] === 'string',
      'the deposit deployed by the payment flow',
    );
  };

  const disputeBody = async (p: Json, signer: Wallet = merchantSigner) => {
    const deadline = (await chainTime()) + 3_600n;
    const { signature } = await signDisputePayer(
      signer,
      { chain: String(p['detected_chain']), verifyingContract: String(p['deposit_address']) },
      {
        paymentId: String(p['on_chain_id']),
        payer: (p['payer_addresses'] as string[])[0] ?? '',
        epoch: await epoch(),
        deadline,
      },
    );
    return { deadline: deadline.toString(), signature };
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
    await eventually(
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
  }, 300_000);

  afterAll(async () => {
    await stack?.stop();
    await db?.drop();
  });

  it('dispute clears the payer, the admin attests the right one, and a refund then goes to it', async () => {
    const p = await paidAndDeployed();
    const paymentId = String(p['id']);
    expect(p).toMatchObject({
      status: 'escrow_confirmed',
      payer_status: 'attested',
      payer_addresses: [hotWallet().address],
    });
    expect(typeof p['payer_final_at']).toBe('string');
    const attestPath = `/admin/merchants/${stack.demoMerchantId}/payments/${paymentId}/payer-attestations`;
    // A payer that stands cannot be replaced by the operator.
    const standing = await admin(attestPath, { payer: rightPayer });
    expect(standing.status).toBe(409);
    expect(standing.body['error']).toMatchObject({ code: 'payer_not_disputed' });

    // Refused before anything is sent: another merchant's payment, a signature of another key.
    const path = `/payments/${paymentId}/dispute_payer`;
    const body = await disputeBody(p);
    expect((await api('POST', path, body, otherKey)).status).toBe(404);
    const stranger = await api('POST', path, await disputeBody(p, strangerKey));
    expect(stranger.status).toBe(422);
    expect(stranger.body['error']).toMatchObject({ code: 'invalid_signature', param: 'signature' });
    expect(await onChainPayer(p)).toBe(hotWallet().address);

    const disputed = await api('POST', path, body);
    expect(disputed.body['error']).toBeUndefined();
    expect(disputed.status).toBe(200);
    // The receipt's log is not recorded at one confirmation: the indexer's sighting records it.
    expect(disputed.body).toMatchObject({ payer_status: 'dispute_pending' });
    expect(await onChainPayer(p)).toBe(ZeroAddress);
    // A second dispute is refused whether or not the indexer has recorded the first one's log yet (it reads with no
    // confirmation delay here, so it may have): payer_dispute_pending before, payer_disputed after. The pending case
    // alone is proved without a race by payment-actions.int.
    const pending = await api('POST', path, await disputeBody(p));
    expect(pending.status).toBe(409);
    expect(['payer_dispute_pending', 'payer_disputed']).toContain(
      (pending.body['error'] as { code?: string } | undefined)?.code,
    );
    const cleared = await eventually(
      () => payment(paymentId),
      (q) => q['payer_status'] === 'disputed',
      'the dispute seen by the indexer on the payment',
    );
    expect(cleared).toMatchObject({ payer_final_at: null, payer_addresses: [] });
    const again = await api('POST', path, await disputeBody(p));
    expect(again.status).toBe(409);
    expect(again.body['error']).toMatchObject({ code: 'payer_disputed' });

    // Nothing can be refunded while no payer is attested.
    const deadline = (await chainTime()) + 3_600n;
    const refundTo = async (to: string) =>
      (
        await signRefund(
          merchantSigner,
          { chain: CHAIN, verifyingContract: String(p['deposit_address']) },
          {
            paymentId: String(p['on_chain_id']),
            token: String(p['detected_asset']),
            payer: to,
            amount: BigInt(ORDER),
            epoch: await epoch(),
            deadline,
          },
        )
      ).signature;
    const early = await api('POST', `/payments/${paymentId}/refund`, {
      amount: ORDER,
      deadline: deadline.toString(),
      signature: await refundTo(hotWallet().address),
    });
    expect(early.status).toBe(422);
    expect(early.body['error']).toMatchObject({ code: 'payer_unknown' });

    // A contract that keeps what it is sent (a stablecoin, a Stablepay contract) is never the payer: refunds and
    // recovered funds would stay there. Refused as settlement addresses are, nothing answered to sign.
    for (const contract of [usdc(), local().addresses.registry, local().addresses.paymentFactory]) {
      const refused = await admin(attestPath, { payer: contract });
      expect(refused.status).toBe(422);
      expect(refused.body['error']).toMatchObject({ code: 'invalid_payer', param: 'payer' });
    }

    // The operator's route answers the admin's call; the admin's cold key sends it.
    const call = await admin(attestPath, { payer: rightPayer });
    expect(call.body['error']).toBeUndefined();
    expect(call.body).toMatchObject({
      object: 'payer_attestation',
      payment_id: paymentId,
      payer: rightPayer,
      chain: CHAIN,
      from: stack.chains?.admin.address,
      to: p['deposit_address'],
    });
    const adminKey = new Wallet(stack.chains?.admin.privateKey ?? '', provider());
    const sent = await (
      await adminKey.sendTransaction({ to: String(call.body['to']), data: String(call.body['data']) })
    ).wait();
    expect(await onChainPayer(p)).toBe(rightPayer);
    const attestedAt = BigInt((await provider().getBlock(sent?.blockNumber ?? 'latest'))?.timestamp ?? 0);

    // The indexer brings the attestation to the payment.
    const attested = await eventually(
      () => payment(paymentId),
      (q) => q['payer_status'] === 'attested',
      'the attested payer on the payment',
    );
    expect((attested['payer_addresses'] as string[])[0]).toBe(rightPayer);
    expect(Date.parse(String(attested['payer_final_at']))).toBe(Number(attestedAt + 86_400n) * 1000);

    const before = await balance(rightPayer);
    // The attested payer is screened first (409 payer_screening_pending until then; the refusal changes nothing).
    const refundSignature = await refundTo(rightPayer);
    const refund = await eventually(
      () =>
        api('POST', `/payments/${paymentId}/refund`, {
          amount: ORDER,
          deadline: deadline.toString(),
          signature: refundSignature,
        }),
      (r) => (r.body['error'] as Json | undefined)?.['code'] !== 'payer_screening_pending',
      'the refund once the attested payer is screened',
    );
    expect(refund.body['error']).toBeUndefined();
    expect(refund.status).toBe(200);
    expect(refund.body).toMatchObject({ status: 'refunded', amount_refunded: ORDER });
    expect((await balance(rightPayer)) - before).toBe(BigInt(ORDER));
  });

  it('refuses a dispute once the payer is final (409 payer_already_final), nothing sent', async () => {
    const p = await paidAndDeployed();
    await provider().send('evm_increaseTime', [86_401]);
    await provider().send('evm_mine', []);
    const body = await disputeBody(p);
    const late = await api('POST', `/payments/${String(p['id'])}/dispute_payer`, body);
    expect(late.status).toBe(409);
    expect(late.body['error']).toMatchObject({ code: 'payer_already_final' });
    expect(await onChainPayer(p)).toBe(hotWallet().address);
  });
});
