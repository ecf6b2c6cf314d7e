import { MaxUint256, Wallet } from 'ethers';
import {
  computeStablepayAddresses,
  connectStablepayRegistry,
  connectTestStablecoin,
  toOnChainId,
} from '@stablepay/contracts';
import {
  ANVIL_DEV_PRIVATE_KEYS,
  type AnvilNode,
  localChainProvider,
  startAnvil,
} from '@stablepay/local-chains';
import { signCancelSubscription } from '@stablepay/merchant-sdk';
import { createTestDatabase, eventually, freePort, type TestDatabase } from '@stablepay/testing';
import { cleanEnv, type SpawnedProcess, spawnNode } from './process-harness';

/**
 * Subscriptions distributed, as docker-compose runs them: a bare anvil given the contracts by the one-shot deploy
 * job (tools/local-chains/deploy.ts, with an operator key of its own that the job funds), then the gateway,
 * subscriptions, payments and indexer apps as separate processes over TCP commands, each configured from its
 * environment only. The payments process registers the merchant on chain; a subscribe (authorization, the wallet's
 * transactions, report) and a merchant-signed cancel go through the gateway to the subscriptions process, and the
 * indexer process feeds the cancel back.
 */
type Json = Record<string, unknown>;
const CHAIN = 'eip155:8453';
const ADMIN_TOKEN = 'admin-token-for-the-subscriptions-processes-test';
const READY_MS = 90_000;

describe('subscribe and merchant cancel across separate processes (compose-like chain bootstrap)', () => {
  let db: TestDatabase;
  let anvil: AnvilNode;
  const procs: SpawnedProcess[] = [];
  let gatewayUrl = '';
  let apiKey = '';
  let merchantId = '';
  // The deployment's roles: a fresh operator (no anvil dev key: the deploy job funds it) and a distinct admin.
  const operator = Wallet.createRandom();
  const admin = Wallet.createRandom().address;
  const operatorPauser = Wallet.createRandom().address;
  const addresses = computeStablepayAddresses({ admin, operator: operator.address, operatorPauser });
  const merchantSigner = Wallet.createRandom();
  const merchantPauser = Wallet.createRandom();
  const settlement = Wallet.createRandom().address;

  const provider = () => localChainProvider(anvil.rpcUrl, 8453);
  const api = async (method: string, path: string, body?: unknown, auth = true) => {
    const res = await fetch(`${gatewayUrl}${path}`, {
      method,
      headers: {
        ...(auth ? { authorization: `Bearer ${apiKey}` } : {}),
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    return { status: res.status, body: (await res.json()) as Json };
  };

  const deployJob = async (env: Record<string, string>): Promise<{ code: number | null; output: string }> => {
    const job = spawnNode(['-r', '@swc-node/register', 'tools/local-chains/deploy.ts'], cleanEnv(env));
    const code = await new Promise<number | null>((resolve) => job.child.once('exit', resolve));
    return { code, output: job.output.join('\n') };
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    anvil = await startAnvil({ chainId: 8453 });
    const chainEnv = {
      CHAIN_RPC_URLS: `${CHAIN}=${anvil.rpcUrl}`,
      CHAIN_MODE: 'test',
      OPERATOR_PRIVATE_KEY: operator.privateKey,
      REGISTRY_ADMIN_ADDRESS: admin,
      OPERATOR_PAUSER_ADDRESS: operatorPauser,
    };
    const job = await deployJob({
      ...chainEnv,
      DEPLOYER_PRIVATE_KEY: ANVIL_DEV_PRIVATE_KEYS[9],
      FUND_OPERATOR_WEI: (10n ** 19n).toString(),
    });
    expect(job).toMatchObject({ code: 0, output: expect.stringContaining('stablepay contracts deployed') });

    const [gatewayPort, subsPort, subsCommands, payPort, payCommands, indexerPort, indexerCommands] =
      await Promise.all([freePort(), freePort(), freePort(), freePort(), freePort(), freePort(), freePort()]);
    const common = {
      DATABASE_URL: db.url,
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      COMMAND_TRANSPORT: 'tcp',
      COMMANDS_HOST: '127.0.0.1',
      SUBSCRIPTIONS_COMMANDS_ADDRESS: `127.0.0.1:${subsCommands}`,
      PAYMENTS_COMMANDS_ADDRESS: `127.0.0.1:${payCommands}`,
      INDEXER_COMMANDS_ADDRESS: `127.0.0.1:${indexerCommands}`,
      COMMAND_TIMEOUT_MS: '30000',
      WEBHOOK_SECRET_ENCRYPTION_KEY: 'cd'.repeat(32),
      HOSTED_URL: 'https://pay.example.test/hosted',
      // What every service reads of the chains (compose's common environment): no key.
      CHAIN_RPC_URLS: chainEnv.CHAIN_RPC_URLS,
      CHAIN_MODE: 'test',
      CHAIN_CONFIRMATIONS: '1',
      // The roles as public addresses (compose's common environment): the gateway computes the contract addresses
      // from them; the key holders check OPERATOR_ADDRESS against their key.
      OPERATOR_ADDRESS: operator.address,
      REGISTRY_ADMIN_ADDRESS: admin,
      OPERATOR_PAUSER_ADDRESS: operatorPauser,
    };
    gatewayUrl = `http://127.0.0.1:${gatewayPort}`;
    const gateway = spawnNode(
      ['-r', '@swc-node/register', 'apps/gateway/src/main.ts'],
      cleanEnv({ ...common, PORT: String(gatewayPort), ADMIN_TOKEN }),
    );
    procs.push(gateway);
    await gateway.waitForLine((l) => l.includes('"msg":"gateway listening"'), READY_MS);
    // The services that send transactions get the operator key and the registry admin (compose: only them).
    const start = (app: string, port: number, commands: number, extra: Record<string, string> = {}) => {
      const proc = spawnNode(
        ['-r', '@swc-node/register', `apps/${app}/src/main.ts`],
        cleanEnv({ ...common, PORT: String(port), COMMANDS_PORT: String(commands), ...extra }),
      );
      procs.push(proc);
      return proc.waitForLine((l) => l.includes(`"msg":"${app} listening"`), READY_MS);
    };
    await Promise.all([
      start('subscriptions', subsPort, subsCommands, chainEnv),
      start('payments', payPort, payCommands, chainEnv),
      start('indexer', indexerPort, indexerCommands, { INDEXER_CONFIRMATIONS: '0', INDEXER_POLL_MS: '100' }),
    ]);

    const merchant = await fetch(`${gatewayUrl}/admin/merchants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Distributed Subscriptions', mode: 'test' }),
    });
    expect(merchant.status).toBe(201);
    const created = (await merchant.json()) as Json;
    apiKey = String(created['api_key']);
    merchantId = String(created['id']);
  }, 4 * READY_MS);

  afterAll(async () => {
    await Promise.all(procs.map((p) => p.stop('SIGTERM')));
    await anvil?.stop();
    await db?.drop();
  }, 60_000);

  it('the deploy job is idempotent: a second run finds every contract and sends nothing', async () => {
    const chain = provider();
    const deployer = new Wallet(ANVIL_DEV_PRIVATE_KEYS[9] ?? '').address;
    const nonce = await chain.getTransactionCount(deployer);
    expect(await chain.getCode(addresses.registry)).not.toBe('0x');
    const again = await deployJob({
      CHAIN_RPC_URLS: `${CHAIN}=${anvil.rpcUrl}`,
      CHAIN_MODE: 'test',
      OPERATOR_PRIVATE_KEY: operator.privateKey,
      REGISTRY_ADMIN_ADDRESS: admin,
      OPERATOR_PAUSER_ADDRESS: operatorPauser,
      DEPLOYER_PRIVATE_KEY: ANVIL_DEV_PRIVATE_KEYS[9],
    });
    expect(again.code).toBe(0);
    expect(await chain.getTransactionCount(deployer)).toBe(nonce);
    const refused = await deployJob({ CHAIN_RPC_URLS: `${CHAIN}=${anvil.rpcUrl}`, CHAIN_MODE: 'test' });
    expect(refused.code).toBe(78);
    expect(refused.output).toContain('OPERATOR_PRIVATE_KEY');
    chain.destroy();
  }, 120_000);

  it('subscribes through the gateway to the subscriptions process, then the merchant cancels; the indexer process records it', async () => {
    expect(
      (
        await api('POST', '/settings', {
          merchant_signer: merchantSigner.address,
          settlement_address: settlement,
        })
      ).status,
    ).toBe(200);
    const declaration = await api('GET', '/settings/pauser');
    expect(
      (
        await api('POST', '/settings/pauser', {
          merchant_pauser: merchantPauser.address,
          signature: await merchantPauser.signMessage(String(declaration.body['declaration_message'])),
        })
      ).status,
    ).toBe(200);
    // The payments process's registration worker puts the merchant in the registry (with the funded operator).
    const chain = provider();
    const registry = connectStablepayRegistry(addresses.registry, chain);
    await eventually(
      async () => (await registry.merchant(toOnChainId(merchantId))).signer as string,
      (signer) => signer === merchantSigner.address,
      'the merchant registered on chain',
    );
    // The gateway, holding no key, shows the contracts the key holders computed from the same public roles.
    const onChain = (res: { body: Json }) =>
      (res.body['chain_registrations'] as Json[] | undefined)?.find((r) => r['chain'] === CHAIN);
    const settings = await eventually(
      () => api('GET', '/settings'),
      (res) => onChain(res)?.['status'] === 'registered',
      'settings show the registration',
    );
    expect(settings.body['payment_factory_address']).toBe(addresses.paymentFactory);
    expect(onChain(settings)).toMatchObject({
      registry_address: addresses.registry,
      epoch: expect.any(String),
    });

    const checkout = await api('POST', '/subscription-checkouts', {
      price: '150000',
      price_currency: 'ARS',
      supported_chains: [CHAIN],
      external_customer_id: 'cus_distributed',
    });
    expect(checkout.status).toBe(201);
    const usdc = (checkout.body['subscription_options'] as Json[]).find((o) => o['token_symbol'] === 'USDC');
    // The gateway offers the test stablecoin the deploy job put on the chain (CHAIN_MODE=test).
    expect(String(usdc?.['asset'])).toContain(
      String(await connectTestStablecoin(String(usdc?.['token_address']), chain).getAddress()),
    );
    const subscriber = new Wallet(ANVIL_DEV_PRIVATE_KEYS[3] ?? '', chain);
    const subscribePath = `/subscription-checkouts/${String(checkout.body['id'])}/subscribe`;
    const request = { chain: CHAIN, asset: usdc?.['asset'], subscriber: subscriber.address };
    const auth = await api('POST', subscribePath, request, false);
    expect(auth.status).toBe(200);
    expect(auth.body).toMatchObject({
      object: 'subscribe_authorization',
      approval: { spender: auth.body['manager_address'], amount: MaxUint256.toString() },
    });
    const manager = String(auth.body['manager_address']);
    expect(await chain.getCode(manager)).not.toBe('0x');

    const token = connectTestStablecoin(String(auth.body['token_address']), subscriber);
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
    const reported = await api('POST', subscribePath, { ...request, tx_hash: sent.hash }, false);
    expect(reported.status).toBe(200);
    const subscriptionId = String(checkout.body['onchain_id']);
    expect(reported.body).toMatchObject({
      status: 'recorded',
      subscription: { id: subscriptionId, status: 'active', charge_nonce: 1, subscriber: subscriber.address },
    });

    const { epoch } = await registry.merchantAuth(toOnChainId(merchantId));
    const deadline = Math.floor(Date.now() / 1000) + 3600;
    const { signature } = await signCancelSubscription(
      merchantSigner,
      { chain: CHAIN, verifyingContract: manager },
      { subscriptionId, nonce: 1, epoch, deadline },
    );
    const cancelled = await api('POST', `/subscriptions/${subscriptionId}/cancel`, {
      nonce: 1,
      deadline,
      signature,
    });
    expect(cancelled.status).toBe(200);
    expect(['cancelling', 'cancelled']).toContain(cancelled.body['status']);
    const final = await eventually(
      () => api('GET', `/subscriptions/${subscriptionId}`),
      (r) => r.body['status'] === 'cancelled',
      'the indexer process to record the cancel',
    );
    expect(final.body).toMatchObject({ status: 'cancelled', next_charge_at: null });
    chain.destroy();
  }, 180_000);
});
