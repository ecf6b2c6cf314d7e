import { Wallet } from 'ethers';
import { Client } from 'pg';
import {
  computeStablepayAddresses,
  connectStablepayRegistry,
  connectTestStablecoin,
  toOnChainId,
} from '@stablepay/contracts';
import { parseCaip19 } from '@stablepay/evm';
import {
  ANVIL_DEV_PRIVATE_KEYS,
  type AnvilNode,
  localChainProvider,
  startAnvil,
} from '@stablepay/local-chains';
import { createTestDatabase, eventually, freePort, type TestDatabase } from '@stablepay/testing';
import { cleanEnv, type SpawnedProcess, spawnNode } from './process-harness';

/**
 * A payments process killed with SIGKILL while a payment is in flight (its deposit contract's deploy broadcast, the
 * receipt not yet back) completes the payment after it starts again: the payment event whose handling died is
 * delivered again, the deploy finds the deposit already deployed and reads its facts back from the chain. The
 * gateway, payments and indexer run as separate processes over TCP commands; the test holds anvil's mining so the
 * kill lands exactly between the broadcast and the receipt.
 */
type Json = Record<string, unknown>;
const CHAIN = 'eip155:8453';
const ADMIN_TOKEN = 'admin-token-for-the-payments-kill-test';
const READY_MS = 90_000;
const ORDER = 25_000_000n; // 25.000000 USD

describe('a payments process killed mid-payment completes the payment after restart', () => {
  let db: TestDatabase;
  let anvil: AnvilNode;
  const procs: SpawnedProcess[] = [];
  let gatewayUrl = '';
  let apiKey = '';
  let merchantId = '';
  let startPayments: () => Promise<SpawnedProcess> = () => Promise.reject(new Error('not set up'));
  const operator = Wallet.createRandom();
  const admin = Wallet.createRandom().address;
  const operatorPauser = Wallet.createRandom().address;
  const addresses = computeStablepayAddresses({ admin, operator: operator.address, operatorPauser });
  const merchantSigner = Wallet.createRandom();
  const settlement = Wallet.createRandom().address;

  const provider = () => localChainProvider(anvil.rpcUrl, 8453);
  const api = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${gatewayUrl}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${apiKey}`,
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    return { status: res.status, body: (await res.json()) as Json };
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
    const job = spawnNode(
      ['-r', '@swc-node/register', 'tools/local-chains/deploy.ts'],
      cleanEnv({
        ...chainEnv,
        DEPLOYER_PRIVATE_KEY: ANVIL_DEV_PRIVATE_KEYS[9],
        FUND_OPERATOR_WEI: (10n ** 19n).toString(),
      }),
    );
    expect(await new Promise<number | null>((resolve) => job.child.once('exit', resolve))).toBe(0);

    const [gatewayPort, payPort, payCommands, indexerPort, indexerCommands] = await Promise.all([
      freePort(),
      freePort(),
      freePort(),
      freePort(),
      freePort(),
    ]);
    const common = {
      DATABASE_URL: db.url,
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      COMMAND_TRANSPORT: 'tcp',
      COMMANDS_HOST: '127.0.0.1',
      PAYMENTS_COMMANDS_ADDRESS: `127.0.0.1:${payCommands}`,
      INDEXER_COMMANDS_ADDRESS: `127.0.0.1:${indexerCommands}`,
      COMMAND_TIMEOUT_MS: '30000',
      WEBHOOK_SECRET_ENCRYPTION_KEY: 'ef'.repeat(32),
      HOSTED_URL: 'https://pay.example.test/hosted',
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
    const start = async (app: string, port: number, commands: number, extra: Record<string, string>) => {
      const proc = spawnNode(
        ['-r', '@swc-node/register', `apps/${app}/src/main.ts`],
        cleanEnv({ ...common, PORT: String(port), COMMANDS_PORT: String(commands), ...extra }),
      );
      procs.push(proc);
      await proc.waitForLine((l) => l.includes(`"msg":"${app} listening"`), READY_MS);
      return proc;
    };
    startPayments = () => start('payments', payPort, payCommands, chainEnv);
    await Promise.all([
      startPayments(),
      start('indexer', indexerPort, indexerCommands, { INDEXER_CONFIRMATIONS: '0', INDEXER_POLL_MS: '100' }),
    ]);

    const merchant = await fetch(`${gatewayUrl}/admin/merchants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Kill Restart Store', mode: 'test' }),
    });
    expect(merchant.status).toBe(201);
    const created = (await merchant.json()) as Json;
    apiKey = String(created['api_key']);
    merchantId = String(created['id']);
  }, 4 * READY_MS);

  afterAll(async () => {
    await provider()
      .send('evm_setAutomine', [true])
      .catch(() => undefined);
    await Promise.all(procs.map((p) => p.stop('SIGTERM')));
    await anvil?.stop();
    await db?.drop();
  }, 60_000);

  it('SIGKILL between the deploy broadcast and its receipt: after restart the payment settles with that deploy', async () => {
    const chain = provider();
    expect(
      (
        await api('POST', '/settings', {
          merchant_signer: merchantSigner.address,
          settlement_address: settlement,
        })
      ).status,
    ).toBe(200);
    const registry = connectStablepayRegistry(addresses.registry, chain);
    await eventually(
      async () => (await registry.merchant(toOnChainId(merchantId))).signer as string,
      (signer) => signer === merchantSigner.address,
      'the merchant registered on chain',
    );

    const checkout = await api('POST', '/checkouts', {
      amount: ORDER.toString(),
      currency: 'USD',
      method: 'DIRECT',
      accepted_chains: [CHAIN],
      accepted_tokens: ['USDC'],
    });
    expect(checkout.status).toBe(201);
    const paymentId = String(checkout.body['payment_id']);
    const deposit = String(checkout.body['deposit_address']);
    const token = parseCaip19(
      String((checkout.body['accepted_assets'] as Json[] | undefined)?.[0]?.['asset']),
    ).address;
    const payer = new Wallet(ANVIL_DEV_PRIVATE_KEYS[5] ?? '', chain);
    const coin = connectTestStablecoin(token, payer);
    await (await coin.mint(payer.address, ORDER)).wait();
    // The watch on the deposit address reaches the indexer before anything is paid (a watch that arrived after the
    // transfer's block would start past it).
    const sql = new Client({ connectionString: db.url });
    await sql.connect();
    try {
      await eventually(
        async () =>
          (
            await sql.query('SELECT 1 FROM indexer_watched_addresses WHERE address = $1', [
              deposit.toLowerCase(),
            ])
          ).rowCount,
        (rows) => rows === 1,
        'the deposit address watched',
      );
    } finally {
      await sql.end();
    }

    // From here blocks are mined by the test: the deploy the payments process broadcasts waits in the mempool.
    await chain.send('evm_setAutomine', [false]);
    const pendingOperatorTxs = async () =>
      (await chain.getTransactionCount(operator.address, 'pending')) -
      (await chain.getTransactionCount(operator.address, 'latest'));
    expect(await pendingOperatorTxs()).toBe(0);
    await coin.transfer(deposit, ORDER);
    await chain.send('evm_mine', []);
    // Observed, confirmed, screened; the deploy is sent and its receipt awaited.
    await eventually(pendingOperatorTxs, (n) => n === 1, 'the deploy broadcast', { timeoutMs: 60_000 });

    const payments = procs.find((p) => p.output.some((l) => l.includes('"msg":"payments listening"')));
    if (!payments) throw new Error('no payments process');
    await payments.stop('SIGKILL');
    procs.splice(procs.indexOf(payments), 1);
    const before = (await api('GET', `/payments/${paymentId}`)).body;
    expect(before).toMatchObject({ status: 'pending', deploy_tx_hash: null });

    // The deploy lands while no payments process runs; then the process starts again.
    await chain.send('evm_mine', []);
    await chain.send('evm_setAutomine', [true]);
    const block = await chain.getBlock('latest', true);
    const deployTx = block?.prefetchedTransactions.find(
      (t) => t.from.toLowerCase() === operator.address.toLowerCase(),
    )?.hash;
    expect(deployTx).toBeDefined();
    await startPayments();

    const settled = await eventually(
      async () => (await api('GET', `/payments/${paymentId}`)).body,
      (p) => p['status'] === 'settled',
      'the payment settled after the restart',
      { timeoutMs: 60_000 },
    );
    expect(settled).toMatchObject({ deploy_tx_hash: deployTx, amount_paid: ORDER.toString() });
    expect(await connectTestStablecoin(token, chain).balanceOf(settlement)).toBe(ORDER);
    // Nothing was deployed twice: the operator sent the one deploy only.
    expect(await pendingOperatorTxs()).toBe(0);
  }, 240_000);
});
