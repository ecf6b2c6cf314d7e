import 'reflect-metadata';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { chargeLedgerService } from '@stablepay/charge-ledger-service';
import { gatewayService } from '@stablepay/gateway-service';
import { hashApiKey, parseApiKey, API_KEY_RESOLVER, type ApiKeyResolver } from '@stablepay/http';
import { indexerConfigFromEnv, indexerService } from '@stablepay/indexer-service';
import { type LocalChains, startLocalChains } from '@stablepay/local-chains';
import { MerchantCommands, merchantsConfigFromEnv } from '@stablepay/merchants-service';
import { paymentsService } from '@stablepay/payments-service';
import { payoutsService } from '@stablepay/payouts-service';
import { platformConfigFromEnv, relayService, type RunningService, startService } from '@stablepay/runtime';
import { settlementService } from '@stablepay/settlement-service';
import {
  subscriptionsConfigFromEnv,
  subscriptionsService,
  subscriptionCheckoutWebhook,
} from '@stablepay/subscriptions-service';
import { type PgliteServer, startPgliteServer } from '@stablepay/node-util';
import { type Clock, ConfigError } from '@stablepay/util';
import {
  dispatchOptionsFromEnv,
  domainEventSource,
  webhookDispatchService,
  type WebhookSource,
} from '@stablepay/webhook-dispatch-service';
import { topicForCategory } from '@stablepay/event-bus';

/** Webhook sources: each scope's mapping from its domain events to merchant webhook events (see docs/architecture.md, Webhooks). */
const webhookSources: WebhookSource[] = [
  domainEventSource({
    name: 'subscription-checkouts',
    topic: topicForCategory('subscriptionCheckout'),
    map: subscriptionCheckoutWebhook,
  }),
];

export interface EmbeddedOptions {
  readonly env?: Record<string, string | undefined>;
  /** Where PGlite keeps its files and the demo key is remembered; `memory` keeps nothing. */
  readonly dataDir?: string;
  readonly clock?: Clock;
  /**
   * Start local anvil chains with the contracts deployed (default: on, unless STABLEPAY_LOCAL_CHAINS=false).
   * Tests that do not touch chains turn it off to save a few seconds.
   */
  readonly localChains?: boolean;
}

export interface EmbeddedStack {
  readonly url: string;
  readonly databaseUrl: string;
  readonly demoMerchantId: string;
  readonly demoApiKey: string;
  readonly service: RunningService;
  readonly chains?: LocalChains;
  stop(): Promise<void>;
}

/**
 * The whole of Stablepay in one process: every service module behind the gateway's HTTP server, the event store
 * and bus on Postgres (DATABASE_URL, or an embedded PGlite served over the wire protocol), and a demo merchant.
 * Ports other than the gateway's are picked free, so a test and a demo never collide.
 */
export async function startEmbedded(options: EmbeddedOptions = {}): Promise<EmbeddedStack> {
  const env = { ...(options.env ?? process.env) };
  const dataDir = options.dataDir ?? env['STABLEPAY_DATA_DIR'] ?? join(process.cwd(), '.stablepay');
  const persistent = dataDir !== 'memory';
  let pglite: PgliteServer | undefined;
  let chains: LocalChains | undefined;
  if (!env['DATABASE_URL']) {
    if (persistent) mkdirSync(dataDir, { recursive: true });
    pglite = await startPgliteServer({ dataDir: persistent ? join(dataDir, 'pglite') : 'memory://' });
    env['DATABASE_URL'] = pglite.url;
  }
  try {
    if (options.localChains ?? env['STABLEPAY_LOCAL_CHAINS'] !== 'false') {
      const chainIds = (env['LOCAL_CHAIN_IDS'] ?? '8453,137').split(',').map((c) => Number(c.trim()));
      if (chainIds.some((c) => !Number.isSafeInteger(c) || c <= 0)) {
        throw new ConfigError(
          'environment variable LOCAL_CHAIN_IDS must be comma-separated positive chain ids',
        );
      }
      chains = await startLocalChains({ chainIds });
      // In test mode each supported chain is a local anvil standing in for the real one (same chain id).
      env['SUPPORTED_CHAINS'] ??= chains.chains.map((c) => c.caip2).join(',');
      env['CHAIN_RPC_URLS'] ??= chains.chains.map((c) => `${c.caip2}=${c.rpcUrl}`).join(',');
      env['PAYMENT_FACTORY_ADDRESS'] ??= chains.chains[0]?.addresses.paymentFactory;
      env['OPERATOR_PAUSER_ADDRESS'] ??= chains.operatorPauser.address;
    }
    // One process hosts every owner: commands stay in it (still serialised, like on a wire).
    const platform = platformConfigFromEnv(env, { port: 3000, commandTransport: 'in-process' });
    const merchants = merchantsConfigFromEnv(
      { ALLOW_LOCAL_WEBHOOKS: 'true', ...env },
      { allowEphemeralKey: true },
    );
    const service = await startService(
      { ...platform, host: env['HOST'] ?? '127.0.0.1' },
      [
        gatewayService(merchants),
        paymentsService(),
        subscriptionsService(subscriptionsConfigFromEnv(env, { localChains: chains?.chains ?? [] })),
        chargeLedgerService(),
        indexerService(indexerConfigFromEnv({ INDEXER_CONFIRMATIONS: '0', INDEXER_POLL_MS: '500', ...env })),
        settlementService(),
        payoutsService(),
        webhookDispatchService({ merchants, sources: webhookSources, dispatch: dispatchOptionsFromEnv(env) }),
        // With EVENT_BUS=kafka the process relays the store to Kafka itself; with store-log the store is the bus.
        ...(platform.eventBus === 'kafka' ? [relayService(platform)] : []),
      ],
      { service: 'stablepay-embedded', ...(options.clock ? { clock: options.clock } : {}) },
    );
    const demo = await ensureDemoMerchant(service, env, persistent ? dataDir : undefined);
    return {
      url: service.url,
      databaseUrl: env['DATABASE_URL'],
      demoMerchantId: demo.merchantId,
      demoApiKey: demo.apiKey,
      service,
      ...(chains ? { chains } : {}),
      stop: async () => {
        await service.stop();
        await chains?.stop();
        await pglite?.stop();
      },
    };
  } catch (error) {
    await chains?.stop();
    await pglite?.stop();
    throw error;
  }
}

/** DEMO_API_KEY fixes the demo key; otherwise one is made once and remembered beside the embedded database. */
async function ensureDemoMerchant(
  service: RunningService,
  env: Record<string, string | undefined>,
  dataDir: string | undefined,
): Promise<{ merchantId: string; apiKey: string }> {
  const keyFile = dataDir ? join(dataDir, 'demo-api-key') : undefined;
  const apiKey =
    env['DEMO_API_KEY'] ??
    (keyFile && existsSync(keyFile) ? readFileSync(keyFile, 'utf8').trim() : undefined);
  if (apiKey !== undefined && parseApiKey(apiKey)?.mode !== 'test') {
    throw new ConfigError(
      'environment variable DEMO_API_KEY must be a test key: sk_test_ followed by 24 to 128 letters and digits',
    );
  }
  const resolver = service.app.get<ApiKeyResolver>(API_KEY_RESOLVER);
  const existing = apiKey ? await resolver.resolve(hashApiKey(apiKey)) : null;
  if (existing && apiKey) return { merchantId: existing.merchantId, apiKey };
  const created = await service.app.get(MerchantCommands).createMerchant({
    name: 'Demo Merchant',
    mode: 'test',
    settlementMode: 'crypto',
    ...(apiKey ? { apiKey } : {}),
  });
  if (keyFile && !env['DEMO_API_KEY']) writeFileSync(keyFile, created.apiKey + '\n', { mode: 0o600 });
  return { merchantId: created.row.merchant_id, apiKey: created.apiKey };
}
