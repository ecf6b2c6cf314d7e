import { computeDepositAddress, toOnChainId } from '@stablepay/contracts';
import { createTestDatabase, freePort, type TestDatabase } from '@stablepay/testing';
import { cleanEnv, type SpawnedProcess, spawnNode } from './process-harness';

/**
 * The payments service as its own process (apps/payments), the gateway as another, commands over TCP as deployed:
 * a checkout is created, read, refused and cancelled through the gateway, the owner deciding in its own process
 * (its domain errors cross the transport as the same envelope).
 */
const FACTORY = '0x1234567890AbcdEF1234567890aBcdef12345678';
const ADMIN_TOKEN = 'admin-token-for-the-payments-process-test';
const READY_MS = 90_000;

describe('checkouts through the gateway to the payments service over TCP (separate processes)', () => {
  let db: TestDatabase;
  const procs: SpawnedProcess[] = [];
  let gatewayUrl: string;
  let apiKey: string;
  let merchantId: string;

  const api = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${gatewayUrl}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${apiKey}`,
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    const [gatewayPort, paymentsPort, paymentsCommands] = await Promise.all([
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
      PAYMENTS_COMMANDS_ADDRESS: `127.0.0.1:${paymentsCommands}`,
      COMMAND_TIMEOUT_MS: '20000',
      WEBHOOK_SECRET_ENCRYPTION_KEY: 'ab'.repeat(32),
      HOSTED_URL: 'https://pay.example.test/hosted',
    };
    gatewayUrl = `http://127.0.0.1:${gatewayPort}`;
    // The gateway first: it runs the migrations of the scopes it reads (one database for all).
    const gateway = spawnNode(
      ['-r', '@swc-node/register', 'apps/gateway/src/main.ts'],
      cleanEnv({ ...common, PORT: String(gatewayPort), ADMIN_TOKEN }),
    );
    procs.push(gateway);
    await gateway.waitForLine((l) => l.includes('"msg":"gateway listening"'), READY_MS);
    const payments = spawnNode(
      ['-r', '@swc-node/register', 'apps/payments/src/main.ts'],
      cleanEnv({
        ...common,
        PORT: String(paymentsPort),
        COMMANDS_PORT: String(paymentsCommands),
        PAYMENT_FACTORY_ADDRESS: FACTORY,
      }),
    );
    procs.push(payments);
    await payments.waitForLine((l) => l.includes('"msg":"payments listening"'), READY_MS);

    const merchant = await fetch(`${gatewayUrl}/admin/merchants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Process Store', mode: 'test' }),
    });
    expect(merchant.status).toBe(201);
    const body = (await merchant.json()) as Record<string, unknown>;
    apiKey = String(body['api_key']);
    merchantId = String(body['id']);
  }, 3 * READY_MS);

  afterAll(async () => {
    await Promise.all(procs.map((p) => p.stop('SIGTERM')));
    await db?.drop();
  }, 60_000);

  it('creates, reads, refuses and cancels a checkout decided by the payments process', async () => {
    const created = await api('POST', '/checkouts', { amount: '9900000', currency: 'USD' });
    expect(created.status).toBe(201);
    const id = String(created.body['id']);
    const paymentId = String(created.body['payment_id']);
    expect(created.body).toMatchObject({
      status: 'pending',
      checkout_url: `https://pay.example.test/hosted/pay/${id}`,
      deposit_address: computeDepositAddress(FACTORY, toOnChainId(merchantId), toOnChainId(paymentId)),
    });
    expect((await api('GET', `/payments/${paymentId}`)).body).toMatchObject({ status: 'pending' });

    const refused = await api('POST', '/checkouts', {
      amount: '100',
      currency: 'USD',
      accepted_chains: ['eip155:56'],
    });
    expect(refused.status).toBe(400);
    expect(refused.body['error']).toMatchObject({
      type: 'validation_error',
      param: 'accepted_chains',
      code: 'unsupported_chain',
    });

    const cancelled = await api('POST', `/checkouts/${id}/cancel`);
    expect(cancelled.status).toBe(200);
    expect(cancelled.body['status']).toBe('cancelled');
    const again = await api('POST', `/checkouts/${id}/cancel`);
    expect(again.status).toBe(409);
    expect(again.body['error']).toMatchObject({ code: 'checkout_not_pending' });
  });
});
