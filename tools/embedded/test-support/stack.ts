import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import type { Clock } from '@stablepay/util';
import { type EmbeddedStack, startEmbedded } from '../embedded';
import { type AnvilChain, anvilChain } from './anvil';
import { type Api, stackApi } from './http';
import { SignedWebhookReceiver } from './signed-webhooks';

/**
 * The embedded stack on its own test database and local anvil chains, with a signed-webhook receiver, for the
 * on-chain end-to-end tests: `start` in beforeAll, `stop` in afterAll; `api`, `chain` and `webhooks` are usable from
 * the tests (they read the stack when called).
 */
export class OnChainStack {
  readonly webhooks: SignedWebhookReceiver;
  readonly api: Api = stackApi(() => this.stack);
  private db: TestDatabase | undefined;
  private running: EmbeddedStack | undefined;

  /** `clock`: the service clock a test moves (the stack runs on it and webhooks are verified by it). */
  constructor(private readonly clock?: Clock) {
    this.webhooks = new SignedWebhookReceiver(clock ? () => clock.now() : undefined);
  }

  get stack(): EmbeddedStack {
    if (!this.running) throw new Error('stack not started');
    return this.running;
  }

  chain(caip2: string): AnvilChain {
    return anvilChain(() => this.stack, caip2);
  }

  /** Starts on `chainIds` (indexer polling every 100 ms, webhooks to 127.0.0.1 allowed); `env` adds or overrides. */
  async start(chainIds: string, env: Record<string, string> = {}): Promise<EmbeddedStack> {
    await this.webhooks.start();
    this.db = await createTestDatabase();
    this.running = await startEmbedded({
      env: {
        DATABASE_URL: this.db.url,
        PORT: '0',
        LOG_LEVEL: 'error',
        STABLEPAY_LOCAL_CHAINS: 'true',
        LOCAL_CHAIN_IDS: chainIds,
        INDEXER_POLL_MS: '100',
        ALLOW_LOCAL_WEBHOOKS: 'true',
        WEBHOOK_POLL_INTERVAL_MS: '100',
        ...env,
      },
      dataDir: 'memory',
      ...(this.clock ? { clock: this.clock } : {}),
    });
    return this.running;
  }

  /** Points the merchant's webhooks (the demo merchant's unless `key`) at the receiver. */
  async receiveWebhooks(key?: string): Promise<void> {
    const res = await this.api('PATCH', '/settings', { webhook_url: this.webhooks.url }, key);
    if (res.status !== 200) throw new Error(`webhook url refused: ${JSON.stringify(res.body)}`);
    this.webhooks.secret = String(res.body['webhook_secret']);
  }

  async stop(): Promise<void> {
    await this.running?.stop();
    await this.db?.drop();
    await this.webhooks.stop();
  }
}

/**
 * The embedded stack on its own test database without chains, for the end-to-end tests of HTTP routes: call in
 * beforeAll, `stop` in afterAll (it drops the database). `env` adds to or overrides the defaults.
 */
export async function startStackWithoutChains(
  env: Record<string, string> = {},
  clock?: Clock,
): Promise<{ stack: EmbeddedStack; db: TestDatabase; stop: () => Promise<void> }> {
  const db = await createTestDatabase();
  const stack = await startEmbedded({
    env: { DATABASE_URL: db.url, PORT: '0', LOG_LEVEL: 'error', ...env },
    dataDir: 'memory',
    localChains: false,
    ...(clock ? { clock } : {}),
  });
  return {
    stack,
    db,
    stop: async () => {
      await stack.stop();
      await db.drop();
    },
  };
}
