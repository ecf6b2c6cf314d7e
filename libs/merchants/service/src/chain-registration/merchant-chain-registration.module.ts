import {
  type BeforeApplicationShutdown,
  Inject,
  Injectable,
  Module,
  type OnApplicationBootstrap,
  type DynamicModule,
} from '@nestjs/common';
import { Counter, register } from 'prom-client';
import { DataSource } from 'typeorm';
import { CLOCK, EVENT_STORE } from '@stablepay/aggregate';
import {
  CHAIN_OPERATOR_CONFIG,
  ChainOperatorModule,
  OperatorRelayers,
  type ChainOperatorConfig,
} from '@stablepay/chain-operator';
import { toOnChainId } from '@stablepay/contracts';
import { type BusMessage, type BusSubscription, EVENT_BUS, type EventBus } from '@stablepay/event-bus';
import type { EventStore } from '@stablepay/event-store';
import { MERCHANT_CATEGORY, merchantStreamId, type MerchantEvent } from '@stablepay/merchants-domain';
import type { ServiceDefinition } from '@stablepay/runtime';
import { type Clock, JsonLogger } from '@stablepay/util';
import { ChangeMerchantOnChainHandler } from '../commands/change-merchant-on-chain/change-merchant-on-chain.handler';
import { RevokeAuthorizationsHandler } from '../commands/revoke-authorizations/revoke-authorizations.handler';
import { MerchantChainRegistrar } from './merchant-chain-registrar';
import { MERCHANT_CHAIN_REGISTRATION_MIGRATIONS, RegistrationStore } from './registration.store';

export const MERCHANT_REGISTRATION_GROUP = 'chain.merchant-registration';
const MERCHANT_TOPIC = 'merchants.merchant.v1';
const TRIGGERS = new Set(['MerchantSignerRegistered.v1', 'SettlementAddressChanged.v1']);
const POLL_MS = 1_000;
const MAX_BACKOFF_MS = 5 * 60_000;

function outcomes(): Counter<'chain' | 'outcome'> {
  const name = 'stablepay_merchant_chain_registrations_total';
  return (
    (register.getSingleMetric(name) as Counter<'chain' | 'outcome'> | undefined) ??
    new Counter({
      name,
      help: 'Merchant registration attempts on chain by outcome (registered, mismatch, retry; chain_mode_mismatch: a merchant of the other mode, not registered)',
      labelNames: ['chain', 'outcome'],
    })
  );
}

/**
 * The merchant on chain: once a merchant has both a signer and a settlement address, the operator registers it in
 * the StablepayRegistry of every supported chain (`registerMerchant`), so the first registration of a merchant
 * is ours, not a stolen operator key's (contracts README, threat model).
 *
 * Durable in two steps: a bus consumer (group `chain.merchant-registration`, its position is the checkpoint)
 * turns MerchantSignerRegistered / SettlementAddressChanged into one `merchant_chain_registrations` row per chain
 * (the values folded from the merchant stream); a worker takes due rows and tries them with exponential backoff
 * (1 s doubling to 5 min) until the chain holds exactly those values. Each outcome is logged and counted
 * (`stablepay_merchant_chain_registrations_total{chain,outcome}`); the row keeps the status.
 *
 * Only merchants of the chains' mode are registered (test merchants on test chains, live on live); a merchant of
 * the other mode is skipped with a log line and `outcome="chain_mode_mismatch"` per chain.
 */
@Injectable()
export class MerchantChainRegistration implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new JsonLogger('merchant-chain-registration');
  private readonly store: RegistrationStore;
  private readonly registrar: MerchantChainRegistrar | null;
  private subscription: BusSubscription | undefined;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;
  private wakeRequested = false;

  constructor(
    @Inject(CHAIN_OPERATOR_CONFIG) private readonly config: ChainOperatorConfig,
    @Inject(OperatorRelayers) relayers: OperatorRelayers,
    @Inject(DataSource) dataSource: DataSource,
    @Inject(EVENT_BUS) private readonly bus: EventBus,
    @Inject(EVENT_STORE) private readonly events: EventStore,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {
    this.store = new RegistrationStore(dataSource);
    this.registrar =
      config.enabled && config.addresses && relayers.set
        ? new MerchantChainRegistrar(relayers.set, config.addresses.registry)
        : null;
  }

  async onApplicationBootstrap(): Promise<void> {
    if (!this.registrar) return;
    this.subscription = await this.bus.consume({
      group: MERCHANT_REGISTRATION_GROUP,
      topics: [MERCHANT_TOPIC],
      handler: (message) => this.handle(message),
      onError: (error, message) =>
        this.logger.error({
          msg: 'merchant registration intake failed, will retry',
          messageId: message.id,
          error: String(error),
        }),
    });
    this.schedule(0);
  }

  async beforeApplicationShutdown(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.subscription?.stop();
    await this.running;
  }

  /** Resolves once every merchant event published before the call has become a registration row. */
  async caughtUp(): Promise<void> {
    await this.subscription?.caughtUp();
  }

  /** Where a merchant stands on each chain (the operator's view; tests and the admin CLI read it). */
  statusOf(merchantId: string) {
    return this.store.forMerchant(merchantId);
  }

  async handle(message: BusMessage): Promise<void> {
    if (!TRIGGERS.has(message.type)) return;
    const merchantId = message.metadata.merchantId ?? message.key.slice(MERCHANT_CATEGORY.length + 1);
    const merchant = await this.merchant(merchantId);
    if (!merchant.signer || !merchant.settlement) return;
    if (merchant.mode !== this.config.mode) {
      // Kept in its settings (configured before go-live) and never registered on chains of the other mode: said, so
      // an operator wondering why such a merchant never appears in a registry finds it.
      for (const chain of this.config.chains)
        outcomes().inc({ chain: chain.caip2, outcome: 'chain_mode_mismatch' });
      this.logger.log({
        msg: "merchant not registered: its mode is not this deployment's chains' mode",
        merchantId,
        merchantMode: merchant.mode,
        chainMode: this.config.mode,
      });
      return;
    }
    let changed = false;
    for (const chain of this.config.chains) {
      changed =
        (await this.store.want({
          merchantId,
          chain: chain.caip2,
          onChainId: toOnChainId(merchantId),
          signer: merchant.signer,
          settlement: merchant.settlement,
          now: this.clock.now(),
        })) || changed;
    }
    if (changed) this.wake();
  }

  /** Runs the due rows now (otherwise within a second). */
  wake(): void {
    if (this.running) {
      this.wakeRequested = true;
      return;
    }
    this.schedule(0);
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.running = this.work().finally(() => {
        this.running = undefined;
        this.schedule(this.wakeRequested ? 0 : POLL_MS);
        this.wakeRequested = false;
      });
    }, ms);
    this.timer.unref();
  }

  private async work(): Promise<void> {
    if (!this.registrar) return;
    try {
      const due = await this.store.due(this.clock.now(), 20);
      await Promise.all(due.map((row) => this.attempt(row)));
    } catch (error) {
      this.logger.error({ msg: 'merchant registration worker failed, will retry', error: String(error) });
    }
  }

  private async attempt(row: Awaited<ReturnType<RegistrationStore['due']>>[number]): Promise<void> {
    if (!this.registrar || this.stopped) return;
    const outcome = await this.registrar.register({
      chain: row.chain,
      onChainId: row.on_chain_id,
      signer: row.signer,
      settlement: row.settlement,
    });
    const now = this.clock.now();
    const context = {
      merchantId: row.merchant_id,
      chain: row.chain,
      signer: row.signer,
      settlement: row.settlement,
    };
    outcomes().inc({ chain: row.chain, outcome: outcome.kind });
    switch (outcome.kind) {
      case 'registered':
        await this.store.settle(row, { status: 'registered', txHash: outcome.txHash, now });
        this.logger.log({ msg: 'merchant registered on chain', ...context, txHash: outcome.txHash });
        return;
      case 'mismatch':
        await this.store.settle(row, {
          status: 'change_requires_merchant_signature',
          error: `the registry holds signer ${outcome.onChain.signer} and settlement ${outcome.onChain.settlement}`,
          held: outcome.onChain,
          now,
        });
        this.logger.warn({
          msg: 'merchant is registered on chain with other values; the operator cannot change them (the merchant signs a MerchantChange, or the admin proposes a delayed change)',
          ...context,
          onChain: outcome.onChain,
        });
        return;
      case 'retry': {
        const delay = Math.min(MAX_BACKOFF_MS, 1_000 * 2 ** Math.min(row.attempts, 20));
        await this.store.settle(row, {
          status: 'pending',
          error: outcome.error,
          nextAttemptAt: new Date(now.getTime() + delay),
          now,
        });
        this.logger.warn({
          msg: 'merchant registration on chain failed, will retry',
          ...context,
          attempts: row.attempts + 1,
          retryInMs: delay,
          error: outcome.error,
        });
        return;
      }
    }
  }

  private async merchant(
    merchantId: string,
  ): Promise<{ mode: string | null; signer: string | null; settlement: string | null }> {
    let mode: string | null = null;
    let signer: string | null = null;
    let settlement: string | null = null;
    for (const event of (await this.events.readStream(
      merchantStreamId(merchantId),
    )) as unknown as MerchantEvent[]) {
      if (event.type === 'MerchantCreated.v1') mode = event.data.mode;
      if (event.type === 'MerchantSignerRegistered.v1') signer = event.data.merchantSigner;
      if (event.type === 'SettlementAddressChanged.v1') settlement = event.data.settlementAddress;
    }
    return { mode, signer, settlement };
  }
}

@Module({})
export class MerchantChainRegistrationModule {
  static forRoot(config: ChainOperatorConfig): DynamicModule {
    return {
      module: MerchantChainRegistrationModule,
      imports: [ChainOperatorModule.forRoot(config)],
      controllers: [ChangeMerchantOnChainHandler, RevokeAuthorizationsHandler],
      providers: [MerchantChainRegistration],
      exports: [MerchantChainRegistration],
    };
  }
}

/**
 * The registration reaction as a part of a process: hosted where the operator key is (the payments service; every
 * service of the embedded run). Exactly one process of a deployment should run it per database (several would
 * only race to the same idempotent outcome).
 */
export function merchantChainRegistrationService(config: ChainOperatorConfig): ServiceDefinition {
  return {
    name: 'merchant-chain-registration',
    imports: [MerchantChainRegistrationModule.forRoot(config)],
    migrations: [...MERCHANT_CHAIN_REGISTRATION_MIGRATIONS],
    // POST /settings/merchant-change arrives here: this process holds the operator key.
    handlesCommands: true,
  };
}
