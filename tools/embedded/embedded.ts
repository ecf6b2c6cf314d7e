import 'reflect-metadata';
import { join } from 'node:path';
import {
  chargeLedgerConfigFromEnv,
  chargeLedgerService,
  chargeLedgerWebhookSource,
  CHARGE_LEDGER_ROW_VIEW,
} from '@stablepay/charge-ledger-service';
import { gatewayService } from '@stablepay/gateway-service';
import { Wallet } from 'ethers';
import {
  hashApiKey,
  idempotencyPruneConfigFromEnv,
  API_KEY_RESOLVER,
  type ApiKeyResolver,
} from '@stablepay/http';
import { MERCHANTS_USE_CASES, type MerchantsUseCases } from '@stablepay/merchants-api';
import { indexerService, resetFollowersOfLostLocalChains } from '@stablepay/indexer-service';
import {
  chainOperatorConfigFromEnv,
  sanctionsScreeningConfigFromEnv,
  sanctionsScreeningFromEnv,
} from '@stablepay/chain-operator';
import {
  ANVIL_DEV_PRIVATE_KEYS,
  LOCAL_PAYOUT_OFF_RAMP,
  type LocalChains,
  startLocalChains,
} from '@stablepay/local-chains';
import {
  MerchantCommands,
  merchantChainRegistrationService,
  merchantsConfigFromEnv,
  reregisterMerchantsOnLostLocalChain,
} from '@stablepay/merchants-service';
import {
  PAYMENT_WEBHOOK_SOURCE,
  paymentDepositsService,
  paymentsOnLostLocalChain,
  paymentsConfigFromEnv,
  paymentsService,
} from '@stablepay/payments-service';
import {
  CUSTOMER_WEBHOOK_SOURCE,
  PAYOUT_WEBHOOK_SOURCE,
  payoutsConfigFromEnv,
  payoutsService,
} from '@stablepay/payouts-service';
import {
  platformConfigFromEnv,
  type PlatformConfig,
  relayService,
  type RunningService,
  startService,
} from '@stablepay/runtime';
import { settlementService } from '@stablepay/settlement-service';
import {
  forgetManagersOnLostLocalChain,
  subscriptionsConfigFromEnv,
  subscriptionsService,
  subscriptionCheckoutWebhookSource,
  SUBSCRIPTION_CHARGE_WEBHOOK,
  SUBSCRIPTION_WEBHOOK_SOURCE,
} from '@stablepay/subscriptions-service';
import { type PgliteServer, startPgliteServer } from '@stablepay/node-util';
import {
  type DataDirLock,
  lockDataDir,
  removeCreatedDirs,
  prepareDataDir,
  probeDatabase,
  probePort,
  refuseIfDataDirInUse,
} from './preflight';
import { createWhole, readDataFile, sealingKey } from './data-files';
import { embeddedIndexerConfig } from './embedded-indexer';
import { demoMerchant, requireDemoKey } from './demo-key';
import { type Clock, ConfigError, envOptional, JsonLogger } from '@stablepay/util';
import {
  dispatchOptionsFromEnv,
  domainEventSource,
  webhookDispatchService,
  type WebhookSource,
} from '@stablepay/webhook-dispatch-service';

/** Webhook sources: each scope's mapping from its domain events to merchant webhook events (see docs/architecture.md, Webhooks). */
const webhookSources: WebhookSource[] = [
  domainEventSource(subscriptionCheckoutWebhookSource(CHARGE_LEDGER_ROW_VIEW)),
  domainEventSource(SUBSCRIPTION_WEBHOOK_SOURCE),
  domainEventSource(PAYMENT_WEBHOOK_SOURCE),
  domainEventSource(chargeLedgerWebhookSource(SUBSCRIPTION_CHARGE_WEBHOOK)),
  domainEventSource(CUSTOMER_WEBHOOK_SOURCE),
  domainEventSource(PAYOUT_WEBHOOK_SOURCE),
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
  /**
   * `npm start`: give the demo merchant, on its local chains, a merchant signer (also its settlement address) and a
   * pauser, so a newcomer's first checkout and subscription work with no settings call. The keys are generated
   * once and kept in the data directory (`demo-merchant-keys.json`, owner-only; in memory: for this run). Sandbox
   * only: local test chains, a test merchant; never with a merchant that already has a signer of its own.
   */
  readonly seedDemoMerchant?: boolean;
}

/** The demo merchant's seeded keys (local chains only): what `npm start` prints. */
export interface DemoMerchantKeys {
  readonly signer: string;
  readonly pauser: string;
  /** Where the private keys are kept; null when they live only in this run (in-memory data). */
  readonly file: string | null;
}

export interface EmbeddedStack {
  readonly url: string;
  readonly databaseUrl: string;
  /** What serves the database, for the banner: `DATABASE_URL`, or the embedded PGlite and where its files are. */
  readonly database: string;
  readonly demoMerchantId: string;
  readonly demoApiKey: string;
  /** Set when the demo merchant's signer and pauser were seeded (seedDemoMerchant with local chains). */
  readonly demoKeys?: DemoMerchantKeys;
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
  // Empty is unset, as for every variable (it was taken as the path '').
  const dataDir =
    options.dataDir ?? envOptional(env, 'STABLEPAY_DATA_DIR') ?? join(process.cwd(), '.stablepay');
  const persistent = dataDir !== 'memory';
  const chainIds =
    (options.localChains ?? env['STABLEPAY_LOCAL_CHAINS'] !== 'false') ? localChainIds(env) : [];
  // Every variable is checked before anything starts (database, chains, port): a mistake is reported at once.
  const checked = validateEnvironment(env, chainIds);
  const logger = new JsonLogger('stablepay-embedded', checked.logLevel);
  // Empty is unset: '' made Node listen on every interface, not the loopback the embedded run defaults to.
  const host = envOptional(env, 'HOST') ?? '127.0.0.1';
  // So is the rest of the environment, in the same way: the data directory (one this user can write, that no
  // other run holds), the port, the database. Only then is anything but that directory written or started.
  // A refused start leaves no directory it made itself (a HOST it cannot bind left an empty .stablepay behind).
  const created = persistent ? prepareDataDir(dataDir) : [];
  let lock: DataDirLock | undefined;
  try {
    if (persistent) refuseIfDataDirInUse(dataDir);
    await probePort(host, checked.port);
    if (env['DATABASE_URL']) await probeDatabase(env['DATABASE_URL']);
    if (persistent) lock = await lockDataDir(dataDir);
  } catch (error) {
    removeCreatedDirs(created);
    throw error;
  }
  if (lock) {
    if (lock.tookOverFrom !== null || lock.previousHelpers.length > 0)
      logger.warn({
        msg: 'took over the data directory from a run that is no longer running (killed or crashed)',
        dataDir,
        previousPid: lock.tookOverFrom,
        // Its PGlite server and chain watchdogs: gone, exited while waited for, stopped by us, or not ours (pid reuse).
        previousHelpers: lock.previousHelpers,
      });
  }
  let pglite: PgliteServer | undefined;
  let chains: LocalChains | undefined;
  const database = env['DATABASE_URL']
    ? 'DATABASE_URL'
    : `embedded PGlite (${persistent ? join(dataDir, 'pglite') : 'in memory'})`;
  try {
    if (persistent && !env['WEBHOOK_SECRET_ENCRYPTION_KEY'])
      env['WEBHOOK_SECRET_ENCRYPTION_KEY'] = sealingKey(join(dataDir, 'webhook-secret-key'));
    if (!env['DATABASE_URL']) {
      pglite = await startPgliteServer({ dataDir: persistent ? join(dataDir, 'pglite') : 'memory://' });
      // It outlives a kill -9 of this process alone while it closes its files: a start that took the data
      // directory over before then would open the same files a second time.
      if (pglite.pid !== undefined) lock?.addHelpers([pglite.pid]);
      env['DATABASE_URL'] = pglite.url;
    }
    if (chainIds.length > 0) {
      // Persistent runs keep each chain's state with the rest of the data, so a restart resumes the same chains.
      chains = await startLocalChains({
        chainIds,
        ...(persistent ? { stateDir: join(dataDir, 'chains') } : {}),
      });
      lock?.addHelpers(chains.pids);
      // In test mode each supported chain is a local anvil standing in for the real one (same chain id).
      env['SUPPORTED_CHAINS'] ??= chains.chains.map((c) => c.caip2).join(',');
      const followsLocalChains = env['CHAIN_RPC_URLS'] === undefined;
      env['CHAIN_RPC_URLS'] ??= chains.chains.map((c) => `${c.caip2}=${c.rpcUrl}`).join(',');
      // A local chain that came back behind what the database recorded (its state was lost or is older) would halt
      // its follower for good; it is local test data, so the run brings itself back to what the chain holds.
      if (followsLocalChains) await recoverLostLocalChains(env['DATABASE_URL'], chains, logger);
      env['PAYMENT_FACTORY_ADDRESS'] ??= chains.chains[0]?.addresses.paymentFactory;
      env['OPERATOR_PAUSER_ADDRESS'] ??= chains.operatorPauser.address;
      // The local chains' roles (anvil dev keys): the operator is the hot key the services sign with (deploys
      // deposits and managers, registers merchants, signs subscribe terms); the admin (cold) key only fixes the
      // contract addresses here.
      env['OPERATOR_PRIVATE_KEY'] ??= chains.operator.privateKey;
      env['REGISTRY_ADMIN_ADDRESS'] ??= chains.admin.address;
      env['SUBSCRIPTION_MANAGER_FACTORY_ADDRESS'] ??= chains.chains[0]?.addresses.subscriptionManagerFactory;
      env['REGISTRY_ADDRESS'] ??= chains.chains[0]?.addresses.registry;
      // Payouts (beta): customers' deposit addresses sweep to the local off-ramp, a keyless address.
      env['PAYOUT_DEPOSIT_FACTORY_ADDRESS'] ??= chains.chains[0]?.addresses.payoutDepositFactory;
      env['PAYOUT_OFF_RAMP_ADDRESS'] ??= LOCAL_PAYOUT_OFF_RAMP;
      // anvil mines a block per transaction: one block (the deposit's own) is the local confirmation depth.
      env['CHAIN_CONFIRMATIONS'] ??= '1';
      // Local chains are test chains: every service reads the same mode (settings' chain_registrations too).
      env['CHAIN_MODE'] ??= 'test';
    }
    const chainOperator = chainOperatorConfigFromEnv(env, { localChains: chains?.chains ?? [] });
    // One process hosts every owner: commands stay in it (still serialised, like on a wire).
    const platform = platformConfigFromEnv(env, { port: 3000, commandTransport: 'in-process' });
    const merchants = merchantsConfigFromEnv(
      { ALLOW_LOCAL_WEBHOOKS: 'true', ...env },
      { allowEphemeralKey: true },
    );
    const service = await startService(
      { ...platform, host },
      [
        gatewayService(merchants, idempotencyPruneConfigFromEnv(env)),
        paymentsService(paymentsConfigFromEnv(env, { localChains: chains?.chains ?? [] }), chainOperator),
        // Each screening service gets its own adapter from the one selection (SANCTIONS_SCREENING_PROVIDER).
        subscriptionsService(
          subscriptionsConfigFromEnv(env, { localChains: chains?.chains ?? [] }),
          chainOperator,
          { screening: sanctionsScreeningFromEnv(env) },
        ),
        chargeLedgerService(chargeLedgerConfigFromEnv(env)),
        indexerService(embeddedIndexerConfig(env, persistent ? dataDir : null)),
        settlementService(),
        payoutsService(payoutsConfigFromEnv(env, { localChains: chains?.chains ?? [] }), {
          screening: sanctionsScreeningFromEnv(env),
          chains: chainOperator,
          // One sealing key per run (the data directory's, else ephemeral with the run's in-memory data).
          sealing: merchants.secretBox,
        }),
        merchantChainRegistrationService(chainOperator),
        paymentDepositsService(chainOperator, { screening: sanctionsScreeningFromEnv(env) }),
        webhookDispatchService({ merchants, sources: webhookSources, dispatch: dispatchOptionsFromEnv(env) }),
        // With EVENT_BUS=kafka the process relays the store to Kafka itself; with store-log the store is the bus.
        ...(platform.eventBus === 'kafka' ? [relayService(platform)] : []),
      ],
      { service: 'stablepay-embedded', ...(options.clock ? { clock: options.clock } : {}) },
    );
    const demo = await ensureDemoMerchant(service, env, persistent ? dataDir : undefined);
    const demoKeys =
      options.seedDemoMerchant && chains
        ? await seedDemoMerchantOnChain(service, demo.merchantId, persistent ? dataDir : undefined)
        : undefined;
    return {
      url: service.url,
      databaseUrl: env['DATABASE_URL'],
      database,
      demoMerchantId: demo.merchantId,
      demoApiKey: demo.apiKey,
      ...(demoKeys ? { demoKeys } : {}),
      service,
      ...(chains ? { chains } : {}),
      stop: async () => {
        try {
          await service.stop();
          await chains?.stop();
          await pglite?.stop();
        } finally {
          lock?.release();
        }
      },
    };
  } catch (error) {
    await chains?.stop();
    await pglite?.stop();
    lock?.release();
    // Only what is still empty: a start that wrote its database or keys leaves them for the next one.
    removeCreatedDirs(created);
    throw error;
  }
}

/**
 * For each local chain that came back without the block its follower recorded, in one transaction per chain (never
 * for a real chain: only the chains this run started): the follower starts again from the chain head; the merchants
 * registered on it are registered again (their rows pending: the demo merchant's seeded signer and settlement too,
 * once the registration worker runs); the subscription managers deployed on it are forgotten, so the next subscribe
 * deploys them again. Payments and subscriptions recorded on it are not recovered (their contracts and funds went
 * with the chain): they keep what was recorded, and the log counts them.
 */
async function recoverLostLocalChains(
  databaseUrl: string,
  chains: LocalChains,
  logger: JsonLogger,
): Promise<void> {
  const resets = await resetFollowersOfLostLocalChains(databaseUrl, chains.chains, async (client, chain) => ({
    merchantRegistrationsReset: await reregisterMerchantsOnLostLocalChain(client, chain),
    managers: await forgetManagersOnLostLocalChain(client, chain),
    payments: await paymentsOnLostLocalChain(client, chain),
  }));
  for (const { also, ...reset } of resets) {
    logger.warn({
      msg:
        'local chain came back behind the database (local test data): its follower follows from the chain head, ' +
        'its merchants are registered again and its subscription managers deployed again when next needed; the ' +
        'payments and subscriptions recorded on it are not recovered (their contracts and funds went with the chain)',
      ...reset,
      restoredState: chains.chains.find((c) => c.caip2 === reset.chain)?.restoredState ?? false,
      merchantRegistrationsReset: also?.merchantRegistrationsReset ?? 0,
      subscriptionManagersForgotten: also?.managers.managersForgotten ?? 0,
      notRecovered: {
        payments: also?.payments ?? {},
        subscriptions: also?.managers.subscriptionsNotRecovered ?? {},
      },
    });
  }
}

function localChainIds(env: Record<string, string | undefined>): number[] {
  const chainIds = (env['LOCAL_CHAIN_IDS'] ?? '8453,137').split(',').map((c) => Number(c.trim()));
  if (chainIds.length === 0 || chainIds.some((c) => !Number.isSafeInteger(c) || c <= 0)) {
    throw new ConfigError('environment variable LOCAL_CHAIN_IDS must be comma-separated positive chain ids');
  }
  return chainIds;
}

/**
 * Reads every module's configuration once with stand-ins for what the embedded run fills in itself (the database
 * URL, the local chains' endpoints), so a wrong variable stops the start before anything was started.
 */
function validateEnvironment(
  env: Record<string, string | undefined>,
  chainIds: readonly number[],
): PlatformConfig {
  const standIn = chainIds.map((id) => `eip155:${id}`);
  const probe: Record<string, string | undefined> = {
    DATABASE_URL: 'postgres://stand-in',
    ...(standIn.length > 0
      ? {
          SUPPORTED_CHAINS: standIn.join(','),
          CHAIN_RPC_URLS: standIn.map((c) => `${c}=http://127.0.0.1:1`).join(','),
          OPERATOR_PRIVATE_KEY: ANVIL_DEV_PRIVATE_KEYS[0],
          REGISTRY_ADMIN_ADDRESS: '0x0000000000000000000000000000000000000a11',
          OPERATOR_PAUSER_ADDRESS: '0x0000000000000000000000000000000000000b22',
          CHAIN_MODE: 'test',
        }
      : {}),
    ...Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== '')),
  };
  const platform = platformConfigFromEnv(probe, { port: 3000 });
  merchantsConfigFromEnv({ ALLOW_LOCAL_WEBHOOKS: 'true', ...probe }, { allowEphemeralKey: true });
  subscriptionsConfigFromEnv(probe);
  paymentsConfigFromEnv(probe);
  chargeLedgerConfigFromEnv(probe);
  embeddedIndexerConfig(probe, null);
  chainOperatorConfigFromEnv(probe);
  sanctionsScreeningConfigFromEnv(probe);
  dispatchOptionsFromEnv(probe);
  if (env['DEMO_API_KEY'] !== undefined) requireDemoKey(env['DEMO_API_KEY']);
  return platform;
}

/** DEMO_API_KEY fixes the demo key; otherwise one is made once and remembered beside the embedded database. */
async function ensureDemoMerchant(
  service: RunningService,
  env: Record<string, string | undefined>,
  dataDir: string | undefined,
): Promise<{ merchantId: string; apiKey: string }> {
  const resolver = service.app.get<ApiKeyResolver>(API_KEY_RESOLVER);
  const commands = service.app.get(MerchantCommands);
  const demo = await demoMerchant({
    envKey: env['DEMO_API_KEY'],
    keyFile: dataDir ? join(dataDir, 'demo-api-key') : undefined,
    find: async (apiKey) => (await resolver.resolve(hashApiKey(apiKey)))?.merchantId,
    create: async (apiKey) =>
      (
        await commands.createMerchant({
          name: 'Demo Merchant',
          mode: 'test',
          settlementMode: 'crypto',
          apiKey,
        })
      ).row.merchant_id,
  });
  // The sandbox demo tries every feature: the payouts beta is on for it (docs/payouts.md), on every start (a demo
  // merchant made before the beta existed gets it too; a no-op once set).
  await commands.setBetaFeatures(demo.merchantId, { payouts: true });
  return demo;
}

/**
 * Gives the demo merchant a signer (its settlement address too) and a declared pauser, from keys kept in the data
 * directory, unless it has a signer already (its own, or a previous run's seed). The operator then registers it on
 * every local chain by itself, and subscribe deploys its manager with that pauser. Sandbox keys: local chains only.
 */
async function seedDemoMerchantOnChain(
  service: RunningService,
  merchantId: string,
  dataDir: string | undefined,
): Promise<DemoMerchantKeys | undefined> {
  const file = dataDir ? join(dataDir, 'demo-merchant-keys.json') : null;
  let keys: { signer_private_key: string; pauser_private_key: string };
  const kept = file ? readDataFile(file) : undefined;
  if (kept !== undefined) {
    keys = JSON.parse(kept) as typeof keys;
  } else {
    keys = {
      signer_private_key: Wallet.createRandom().privateKey,
      pauser_private_key: Wallet.createRandom().privateKey,
    };
    if (file) createWhole(file, JSON.stringify(keys, null, 2) + '\n', { mode: 0o600 });
  }
  const signer = new Wallet(keys.signer_private_key);
  const pauser = new Wallet(keys.pauser_private_key);
  const merchants = service.app.get<MerchantsUseCases>(MERCHANTS_USE_CASES);
  const merchant = { merchantId, mode: 'test' as const };
  const settings = await merchants.settings(merchant);
  if (settings.merchant_signer === null) {
    await merchants.registerSigner(merchant, signer.address, signer.address);
  } else if (settings.merchant_signer.toLowerCase() !== signer.address.toLowerCase()) {
    return undefined; // the merchant's own signer: not ours to replace
  }
  const declaration = await merchants.pauser(merchant);
  if (declaration.merchant_pauser === null) {
    await merchants.declarePauser(merchant, {
      merchantPauser: pauser.address,
      signature: await pauser.signMessage(declaration.declaration_message),
      acknowledgeSharedPauserRisk: false,
    });
  }
  return { signer: signer.address, pauser: pauser.address, file };
}
