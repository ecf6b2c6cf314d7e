import { type Signer, Wallet } from 'ethers';
import { connectStablepayRegistry, toOnChainId } from '@stablepay/contracts';
import { localChainProvider } from '@stablepay/local-chains';
import { signMerchantChange } from '@stablepay/merchant-sdk';
import { createTestDatabase, eventually, type TestDatabase } from '@stablepay/testing';
import { type EmbeddedStack, startEmbedded } from './embedded';

/**
 * The merchant on chain through HTTP (embedded stack, a local anvil): GET /settings shows the registration per chain;
 * after the registry holds a merchant, a new signer in the settings needs the current signer's consent, given as a
 * MerchantChange signed with the SDK and relayed by POST /settings/merchant-change (preflighted like the payment
 * actions: bad shapes 400 with `param`, a wrong signer or deadline refused before anything is sent).
 */
type Json = Record<string, unknown>;
const CHAIN = 'eip155:8453';
const ADMIN_TOKEN = 'admin-token-for-the-merchant-change-test';

describe('merchant change on chain through the API (embedded stack, anvil)', () => {
  let db: TestDatabase;
  let stack: EmbeddedStack;

  beforeAll(async () => {
    db = await createTestDatabase();
    stack = await startEmbedded({
      env: { DATABASE_URL: db.url, PORT: '0', ADMIN_TOKEN, LOG_LEVEL: 'error', LOCAL_CHAIN_IDS: '8453' },
      dataDir: 'memory',
    });
  }, 120_000);

  afterAll(async () => {
    await stack?.stop();
    await db?.drop();
  });

  const chain = () => {
    const local = stack.chains?.chains[0];
    if (!local) throw new Error('no local chain');
    return local;
  };
  const withRegistry = async <T>(read: (r: ReturnType<typeof connectStablepayRegistry>) => Promise<T>) => {
    const provider = localChainProvider(chain().rpcUrl, chain().chainId);
    try {
      return await read(connectStablepayRegistry(chain().addresses.registry, provider));
    } finally {
      provider.destroy();
    }
  };
  const newMerchant = async (): Promise<{ id: string; key: string }> => {
    const res = await fetch(`${stack.url}/admin/merchants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Signer Rotation Co', mode: 'test' }),
    });
    const body = (await res.json()) as Json;
    return { id: String(body['id']), key: String(body['api_key']) };
  };
  const call = async (key: string, method: string, path: string, body?: unknown) => {
    const res = await fetch(`${stack.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${key}`,
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    return { status: res.status, body: (await res.json()) as Json };
  };
  const registrationOf = (settings: Json) => (settings['chain_registrations'] as Json[])[0] ?? {};
  const operatorNonce = async () => {
    const provider = localChainProvider(chain().rpcUrl, chain().chainId);
    try {
      return await provider.getTransactionCount(stack.chains?.operator.address ?? '');
    } finally {
      provider.destroy();
    }
  };

  it('shows the registration per chain, then relays a MerchantChange signed by the current signer', async () => {
    const merchant = await newMerchant();
    const oldSigner = Wallet.createRandom();
    const newSigner = Wallet.createRandom();
    const settlement = Wallet.createRandom().address;
    const before = await call(merchant.key, 'GET', '/settings');
    expect(before.body['chain_registrations']).toEqual([
      {
        chain: CHAIN,
        status: 'not_started',
        signer: null,
        settlement_address: null,
        tx_hash: null,
        updated_at: null,
        on_chain: null,
        registry_address: chain().addresses.registry,
        // Not in the registry yet: no signature of the merchant is honoured there.
        epoch: null,
      },
    ]);
    await call(merchant.key, 'POST', '/settings', {
      merchant_signer: oldSigner.address,
      settlement_address: settlement,
    });
    const registered = await eventually(
      () => call(merchant.key, 'GET', '/settings'),
      (r) => registrationOf(r.body)['status'] === 'registered',
      'the operator to register the merchant',
    );
    expect(registrationOf(registered.body)).toMatchObject({
      signer: oldSigner.address,
      settlement_address: settlement,
      tx_hash: expect.stringMatching(/^0x[0-9a-f]{64}$/),
      registry_address: chain().addresses.registry,
      epoch: '0',
    });

    // A new signer in the settings: the operator cannot bring it on chain.
    await call(merchant.key, 'POST', '/settings', { merchant_signer: newSigner.address });
    const pending = await eventually(
      () => call(merchant.key, 'GET', '/settings'),
      (r) => registrationOf(r.body)['status'] === 'change_requires_merchant_signature',
      'the change to need the merchant',
    );
    // What the registry still holds, and the transaction that put it there, beside what the settings ask for.
    expect(registrationOf(pending.body)).toMatchObject({
      signer: newSigner.address,
      tx_hash: null,
      on_chain: {
        signer: oldSigner.address,
        settlement_address: settlement,
        tx_hash: registrationOf(registered.body)['tx_hash'],
      },
    });

    // Everything the signature binds comes from the API: the registry (verifying contract) and the epoch.
    const onChainId = toOnChainId(merchant.id);
    const epoch = BigInt(String(registrationOf(pending.body)['epoch']));
    const registryAddress = String(registrationOf(pending.body)['registry_address']);
    const deadline = Math.floor(Date.now() / 1000) + 3600;
    const sign = (by: Signer, over: { signer?: string; epoch?: bigint; deadline?: number } = {}) =>
      signMerchantChange(
        by,
        { chain: CHAIN, verifyingContract: registryAddress },
        {
          merchantId: onChainId,
          signer: over.signer ?? newSigner.address,
          settlement,
          epoch: over.epoch ?? epoch,
          deadline: over.deadline ?? deadline,
        },
      );
    const good = (await sign(oldSigner)).signature;
    const nonce = await operatorNonce();
    const refusals: Array<[unknown, number, string, string | undefined]> = [
      [{ chain: CHAIN, deadline, signature: '0x12' }, 400, 'invalid_signature', 'signature'],
      [{ chain: CHAIN, deadline: 'soon', signature: good }, 400, 'invalid_deadline', 'deadline'],
      [{ deadline, signature: good }, 400, 'parameter_missing', 'chain'],
      [{ chain: 'eip155:56', deadline, signature: good }, 400, 'unsupported_chain', 'chain'],
      [{ chain: CHAIN, deadline, signature: good, color: 'red' }, 400, 'unknown_parameter', 'color'],
      [
        { chain: CHAIN, deadline, signature: good, merchant_signer: Wallet.createRandom().address },
        400,
        'settings_mismatch',
        'merchant_signer',
      ],
      // Signed by the new key: the current signer must consent.
      [
        { chain: CHAIN, deadline, signature: (await sign(newSigner)).signature },
        422,
        'invalid_signature',
        'signature',
      ],
      // Over other values than the settings'.
      [
        { chain: CHAIN, deadline, signature: (await sign(oldSigner, { signer: settlement })).signature },
        422,
        'invalid_signature',
        'signature',
      ],
      // At a stale epoch.
      [
        { chain: CHAIN, deadline, signature: (await sign(oldSigner, { epoch: epoch + 1n })).signature },
        422,
        'invalid_signature',
        'signature',
      ],
      [
        { chain: CHAIN, deadline: 1_000, signature: (await sign(oldSigner, { deadline: 1_000 })).signature },
        422,
        'signature_expired',
        'deadline',
      ],
      [
        {
          chain: CHAIN,
          deadline: deadline + 8 * 86_400,
          signature: (await sign(oldSigner, { deadline: deadline + 8 * 86_400 })).signature,
        },
        422,
        'signature_deadline_too_far',
        'deadline',
      ],
    ];
    for (const [body, status, code, param] of refusals) {
      const res = await call(merchant.key, 'POST', '/settings/merchant-change', body);
      const error = res.body['error'] as Json;
      expect([res.status, error['code'] ?? error['type'], error['param']]).toEqual([status, code, param]);
    }
    // Another merchant in the same position cannot use this merchant's signature (it binds the merchant id).
    const other = await newMerchant();
    await call(other.key, 'POST', '/settings', {
      merchant_signer: oldSigner.address,
      settlement_address: settlement,
    });
    await eventually(
      () => call(other.key, 'GET', '/settings'),
      (r) => registrationOf(r.body)['status'] === 'registered',
      'the other merchant registered',
    );
    // A settlement-only change: the registry still holds the signer, so it stays registered there (was `pending`).
    await call(other.key, 'PUT', '/settings', { settlement_address: Wallet.createRandom().address });
    const settlementOnly = await eventually(
      () => call(other.key, 'GET', '/settings'),
      (r) => registrationOf(r.body)['status'] === 'change_requires_merchant_signature',
      'the settlement change to need the merchant',
    );
    expect(settlementOnly.body['signers']).toContainEqual({
      chain: CHAIN,
      address: oldSigner.address,
      status: 'registered',
    });
    await call(other.key, 'POST', '/settings', { merchant_signer: newSigner.address });
    const foreign = await call(other.key, 'POST', '/settings/merchant-change', {
      chain: CHAIN,
      deadline,
      signature: good,
    });
    expect([foreign.status, (foreign.body['error'] as Json)['code']]).toEqual([422, 'invalid_signature']);
    // Nothing was sent by any refusal (the other merchant's registration is its only transaction).
    expect(await operatorNonce()).toBe(nonce + 1);
    expect((await withRegistry((r) => r.merchantAuth(onChainId))).signer).toBe(oldSigner.address);

    const changed = await call(merchant.key, 'POST', '/settings/merchant-change', {
      chain: CHAIN,
      deadline: String(deadline),
      signature: good,
      merchant_signer: newSigner.address,
    });
    expect(changed.status).toBe(200);
    expect(changed.body['merchant_signer']).toBe(newSigner.address);
    const row = registrationOf(changed.body);
    expect(row).toMatchObject({
      status: 'registered',
      signer: newSigner.address,
      settlement_address: settlement,
      // The change bumped the epoch: the next signature names the new one.
      epoch: (epoch + 1n).toString(),
    });
    expect(row['tx_hash']).not.toBe(registrationOf(registered.body)['tx_hash']);
    const auth = await withRegistry((r) => r.merchantAuth(onChainId));
    expect([auth.signer, auth.epoch]).toEqual([newSigner.address, epoch + 1n]);

    // A retry (its answer lost) sends nothing and answers the same settings.
    const sent = await operatorNonce();
    const again = await call(merchant.key, 'POST', '/settings/merchant-change', {
      chain: CHAIN,
      deadline,
      signature: good,
    });
    expect(again.status).toBe(200);
    expect(registrationOf(again.body)).toEqual(row);
    expect(await operatorNonce()).toBe(sent);

    // Nothing to change still answers only a signature of the merchant's: before, any well-formed signature was
    // answered 200 here because no work was needed.
    const noop: Array<[string, number]> = [
      [(await sign(Wallet.createRandom())).signature, 422],
      [(await sign(Wallet.createRandom(), { epoch: epoch + 1n })).signature, 422],
      // The old signer's at the current epoch: it no longer speaks for the merchant.
      [(await sign(oldSigner, { epoch: epoch + 1n })).signature, 422],
      // Bytes that recover to no address: 400, as on the path that sends.
      [`0x${'11'.repeat(64)}1b`, 400],
    ];
    for (const [signature, status] of noop) {
      const res = await call(merchant.key, 'POST', '/settings/merchant-change', {
        chain: CHAIN,
        deadline,
        signature,
      });
      const error = res.body['error'] as Json | undefined;
      expect([res.status, error?.['code'], error?.['param']]).toEqual([
        status,
        'invalid_signature',
        'signature',
      ]);
    }
    // Signed now by the signer the chain holds, at its epoch: answered, nothing sent.
    const current = await call(merchant.key, 'POST', '/settings/merchant-change', {
      chain: CHAIN,
      deadline,
      signature: (await sign(newSigner, { epoch: epoch + 1n })).signature,
    });
    expect(current.status).toBe(200);
    expect(registrationOf(current.body)).toEqual(row);
    expect(await operatorNonce()).toBe(sent);
  }, 180_000);

  it('refuses a change before the merchant is on chain or has a signer', async () => {
    const merchant = await newMerchant();
    const signature = `0x${'11'.repeat(64)}1b`;
    const res = await call(merchant.key, 'POST', '/settings/merchant-change', {
      chain: CHAIN,
      deadline: Math.floor(Date.now() / 1000) + 60,
      signature,
    });
    expect(res.status).toBe(409);
    expect(res.body['error']).toMatchObject({ code: 'merchant_signer_required' });
  });
});
