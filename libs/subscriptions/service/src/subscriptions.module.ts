import { type DynamicModule, Global, Inject, Module, Optional } from '@nestjs/common';
import { CLOCK } from '@stablepay/aggregate';
import type { ServiceDefinition } from '@stablepay/runtime';
import { type ChainOperatorConfig, ChainOperatorModule } from '@stablepay/chain-operator';
import { SANCTIONS_SCREENING, SandboxSanctionsScreening, type SanctionsScreening } from '@stablepay/evm';
import { SubscriptionsApiModule } from '@stablepay/subscriptions-api';
import { type Clock, ConfigError } from '@stablepay/util';
import { SUBSCRIPTIONS_MIGRATIONS } from './migrations';
import { SubscriptionChargesModule } from './charges/subscription-charges.module';
import { SUBSCRIPTIONS_UPCASTERS } from './upcasters';
import { RATE_SOURCE } from './rates/rate-source.token';
import { SandboxRateSource } from './rates/sandbox-rate-source';
import { SubscriptionCheckoutChanges } from './subscription-checkouts/changes';
import { SubscriptionCheckoutExpiryTimer } from './subscription-checkouts/expiry-timer';
import { MerchantProfiles } from './subscription-checkouts/merchant-profiles';
import { SubscriptionCheckoutCommands } from './subscription-checkouts/subscription-checkout.commands';
import { SubscriptionCheckoutProjection } from './subscription-checkouts/subscription-checkout.projection';
import { SubscriptionCheckoutReader } from './subscription-checkouts/subscription-checkout.reader';
import { SubscriptionCheckoutPresenter } from './subscription-checkouts/subscription-checkout.presenter';
import { SubscriptionCheckoutsGateway } from './subscription-checkouts/subscription-checkouts.gateway';
import { CancelSubscriptionCheckoutHandler } from './commands/cancel-subscription-checkout/cancel-subscription-checkout.handler';
import { CreateSubscriptionCheckoutHandler } from './commands/create-subscription-checkout/create-subscription-checkout.handler';
import { DismissSubscriptionCheckoutHandler } from './commands/dismiss-subscription-checkout/dismiss-subscription-checkout.handler';
import { CancelSubscriptionHandler } from './commands/cancel-subscription/cancel-subscription.handler';
import { SubscribeHandler } from './commands/subscribe/subscribe.handler';
import { ChainTime, OperatorRelayers } from './subscriptions/chain-access';
import { ChainObservationLog, SubscriptionChainFacts } from './subscriptions/chain-facts';
import { ChainObservationsConsumer } from './subscriptions/chain-observations.consumer';
import { ChargeReceiptsConsumer } from './subscriptions/charge-receipts.consumer';
import { SubscriptionReceiptChecks } from './subscriptions/receipt-checks';
import { SubscriberScreeningConsumer } from './subscriptions/subscriber-screening.consumer';
import { SubscriptionChanges } from './subscriptions/changes';
import { MerchantCancel } from './subscriptions/merchant-cancel';
import { SubscribeFlow } from './subscriptions/subscribe-flow';
import { SubscriptionCommands } from './subscriptions/subscription.commands';
import { SubscriptionManagerCommands } from './subscriptions/subscription-manager.commands';
import { SubscriptionManagers } from './subscriptions/subscription-managers';
import { SubscriptionProjection } from './subscriptions/subscription.projection';
import { SubscriptionReader } from './subscriptions/subscription.reader';
import { SubscriptionsGateway } from './subscriptions/subscriptions.gateway';
import { HostedCancelPageViews } from './subscriptions/hosted-cancel.views';
import {
  SUBSCRIPTIONS_CONFIG,
  SUBSCRIPTIONS_CONFIG_OVERRIDE,
  type SubscriptionsConfig,
  subscriptionsConfigFromEnv,
} from './subscriptions.config';

/** The screening adapter subscriptionsService(config, chains, { screening }) was given (absent: the sandbox). */
const SUBSCRIPTIONS_SCREENING = Symbol('SUBSCRIPTIONS_SCREENING');

/** Makes the process's subscriptions configuration visible to every module (set by subscriptionsService(config)). */
@Global()
@Module({})
export class SubscriptionsConfigModule {
  static forRoot(config: SubscriptionsConfig, screening?: SanctionsScreening): DynamicModule {
    return {
      module: SubscriptionsConfigModule,
      providers: [
        { provide: SUBSCRIPTIONS_CONFIG_OVERRIDE, useValue: config },
        ...(screening ? [{ provide: SUBSCRIPTIONS_SCREENING, useValue: screening }] : []),
      ],
      exports: [SUBSCRIPTIONS_CONFIG_OVERRIDE, ...(screening ? [SUBSCRIPTIONS_SCREENING] : [])],
    };
  }
}

class ConfigHolder {
  constructor(@Optional() @Inject(SUBSCRIPTIONS_CONFIG_OVERRIDE) readonly config?: SubscriptionsConfig) {}
}

/**
 * What the subscription checkout read side needs wherever it runs: the gateway (reads, presenting) and the
 * subscriptions service (its commands, projection and expiry timer build on it). A static module, so one process that hosts
 * both shares one instance. Configuration: subscriptionsService(config) when the process hosts the service, else
 * the environment (the gateway alone).
 */
@Module({
  providers: [
    ConfigHolder,
    {
      provide: SUBSCRIPTIONS_CONFIG,
      useFactory: (holder: ConfigHolder) => holder.config ?? subscriptionsConfigFromEnv(process.env),
      inject: [ConfigHolder],
    },
    {
      provide: RATE_SOURCE,
      useFactory: (config: SubscriptionsConfig, clock: Clock) =>
        new SandboxRateSource(config.sandboxRates, clock),
      inject: [SUBSCRIPTIONS_CONFIG, CLOCK],
    },
    SubscriptionCheckoutChanges,
    SubscriptionCheckoutReader,
    MerchantProfiles,
    SubscriptionCheckoutPresenter,
    SubscriptionChanges,
    SubscriptionReader,
    ChainTime,
    HostedCancelPageViews,
  ],
  exports: [
    SUBSCRIPTIONS_CONFIG,
    RATE_SOURCE,
    SubscriptionCheckoutChanges,
    SubscriptionCheckoutReader,
    MerchantProfiles,
    SubscriptionCheckoutPresenter,
    SubscriptionChanges,
    SubscriptionReader,
    ChainTime,
    HostedCancelPageViews,
  ],
})
export class SubscriptionCheckoutsCoreModule {}

/**
 * The subscriptions service: owner of the SubscriptionCheckout aggregate (one handler per use case, answering
 * the gateway's commands), its projection and its durable expiry timer (the Subscription aggregate arrives with
 * the on-chain subscribe flow). Health and readiness come from the platform.
 */
@Module({
  imports: [SubscriptionCheckoutsCoreModule],
  controllers: [
    CreateSubscriptionCheckoutHandler,
    CancelSubscriptionCheckoutHandler,
    DismissSubscriptionCheckoutHandler,
    SubscribeHandler,
    CancelSubscriptionHandler,
  ],
  // The command side lives only here: the gateway, which imports the core module, cannot append to these streams.
  providers: [
    SubscriptionCheckoutCommands,
    SubscriptionCheckoutProjection,
    SubscriptionCheckoutExpiryTimer,
    SubscriptionCommands,
    SubscriptionManagerCommands,
    SubscriptionProjection,
    OperatorRelayers,
    SubscriptionManagers,
    SubscriptionChainFacts,
    ChainObservationLog,
    ChainObservationsConsumer,
    ChargeReceiptsConsumer,
    SubscriptionReceiptChecks,
    // The configured screening provider (sanctionsScreeningFromEnv, shared with payments; docs/subscriptions.md,
    // Compliance screening), else the sandbox adapter.
    {
      provide: SANCTIONS_SCREENING,
      useFactory: (screening: SanctionsScreening | undefined) => screening ?? new SandboxSanctionsScreening(),
      inject: [{ token: SUBSCRIPTIONS_SCREENING, optional: true }],
    },
    SubscriberScreeningConsumer,
    SubscribeFlow,
    MerchantCancel,
  ],
  exports: [
    SubscriptionCheckoutCommands,
    SubscriptionCheckoutProjection,
    SubscriptionCheckoutExpiryTimer,
    SubscriptionCommands,
    SubscriptionManagerCommands,
    SubscriptionProjection,
    SubscriptionManagers,
    ChainObservationsConsumer,
    ChainObservationLog,
    ChargeReceiptsConsumer,
    SubscriptionReceiptChecks,
    OperatorRelayers,
  ],
})
export class SubscriptionsServiceModule {}

export interface SubscriptionsServiceOptions {
  /**
   * The sanctions provider screening subscriber wallets: `sanctionsScreeningFromEnv(env)` (@stablepay/chain-operator,
   * the selection payments uses too); default the sandbox adapter (magic addresses, docs/subscriptions.md).
   */
  readonly screening?: SanctionsScreening;
}

/**
 * `chainOperator`: the process's shared chain layer (ChainOperatorModule: one RelayerSet for the operator key); the
 * service then deploys, cancels and reads addresses through it.
 */
export function subscriptionsService(
  config: SubscriptionsConfig = subscriptionsConfigFromEnv(process.env),
  chainOperator?: ChainOperatorConfig,
  options: SubscriptionsServiceOptions = {},
): ServiceDefinition {
  const withChains = withChainAddresses(config, chainOperator);
  return {
    name: 'subscriptions',
    imports: [
      SubscriptionsConfigModule.forRoot(withChains, options.screening),
      ...(chainOperator?.enabled ? [ChainOperatorModule.forRoot(chainOperator)] : []),
      SubscriptionsServiceModule,
      SubscriptionChargesModule,
    ],
    migrations: SUBSCRIPTIONS_MIGRATIONS,
    handlesCommands: true,
    upcasters: SUBSCRIPTIONS_UPCASTERS,
  };
}

/**
 * The gateway's subscription checkout routes and hosted subscribe page: reads in the gateway, commands sent to
 * the subscriptions service (SubscriptionCheckoutsGateway).
 */
export function subscriptionsHttpModule(): DynamicModule {
  return SubscriptionsApiModule.forRoot({
    imports: [SubscriptionCheckoutsCoreModule],
    useCases: SubscriptionCheckoutsGateway,
    subscriptionUseCases: SubscriptionsGateway,
    hostedCancelViews: HostedCancelPageViews,
  });
}

/**
 * The service's config with the chain layer's key and contract addresses. The registry and the manager factory are
 * fixed by the roles; SUBSCRIPTION_MANAGER_FACTORY_ADDRESS / REGISTRY_ADDRESS may only repeat them: the merchant
 * change and the payments service use the computed registry, so managers bound to another one would answer to a
 * registry no merchant signature or settings answer names.
 */
export function withChainAddresses(
  config: SubscriptionsConfig,
  chainOperator: ChainOperatorConfig | undefined,
): SubscriptionsConfig {
  if (!chainOperator?.addresses || !chainOperator.enabled) return config;
  const computed = chainOperator.addresses;
  const agreed = (configured: string | null, fixed: string, name: string): string => {
    if (configured !== null && configured.toLowerCase() !== fixed.toLowerCase())
      throw new ConfigError(
        `environment variable ${name} (${configured}) is not the address OPERATOR_ADDRESS, REGISTRY_ADMIN_ADDRESS and OPERATOR_PAUSER_ADDRESS fix (${fixed}): unset it, or correct the roles`,
      );
    return fixed;
  };
  return {
    ...config,
    operatorPrivateKey: config.operatorPrivateKey ?? chainOperator.operator?.privateKey ?? null,
    subscriptionManagerFactory: agreed(
      config.subscriptionManagerFactory,
      computed.subscriptionManagerFactory,
      'SUBSCRIPTION_MANAGER_FACTORY_ADDRESS',
    ),
    registry: agreed(config.registry, computed.registry, 'REGISTRY_ADDRESS'),
  };
}
