import { type DynamicModule, Global, Inject, Module, Optional, type Type } from '@nestjs/common';
import { ChainOperatorModule, type ChainOperatorConfig } from '@stablepay/chain-operator';
import {
  PAYMENT_ACTIONS_USE_CASES,
  PaymentActionsController,
  PaymentsApiModule,
} from '@stablepay/payments-api';
import { CLOCK } from '@stablepay/aggregate';
import type { ServiceDefinition } from '@stablepay/runtime';
import type { Clock } from '@stablepay/util';
import { PaymentActionResumer, actionSubmissionsProvider } from './actions/action-resumer';
import { PaymentActions } from './actions/payment-actions';
import { PaymentActionsGateway } from './actions/payment-actions.gateway';
import { depositChainsProvider } from './chain/deposit-chains.provider';
import { CapturePaymentHandler } from './commands/capture-payment/capture-payment.handler';
import { RecoverPaymentHandler } from './commands/recover-payment/recover-payment.handler';
import { RefundPaymentHandler } from './commands/refund-payment/refund-payment.handler';
import { DisputePayerHandler } from './commands/dispute-payer/dispute-payer.handler';
import { PayerAttestationHandler } from './commands/payer-attestation/payer-attestation.handler';
import { RescuePaymentHandler } from './commands/rescue-payment/rescue-payment.handler';
import { CancelCheckoutHandler } from './commands/cancel-checkout/cancel-checkout.handler';
import { CreateCheckoutHandler } from './commands/create-checkout/create-checkout.handler';
import { ConfigurePaymentHandler } from './commands/configure-payment/configure-payment.handler';
import { PAYMENTS_MIGRATIONS } from './migrations';
import {
  PAYMENTS_CONFIG,
  PAYMENTS_CONFIG_OVERRIDE,
  type PaymentsConfig,
  paymentsConfigFromEnv,
} from './payments.config';
import { PaymentChanges } from './payments/changes';
import { PaymentExpiryTimer } from './payments/expiry-timer';
import { PaymentMerchantProfiles } from './payments/merchant-profiles';
import { PaymentCommands } from './payments/payment.commands';
import { CheckoutStatusRepair } from './payments/checkout-status-repair';
import { PaymentProjection } from './payments/payment.projection';
import { PaymentReader } from './payments/payment.reader';
import { PaymentsGateway } from './payments/payments.gateway';
import { PaymentSettlementDeadlines } from './settlement/payment-settlement-deadlines';
import { SandboxPaymentPayouts } from './settlement/sandbox-payment-payouts';
import { PAYMENT_SETTLEMENT_FEED, SandboxPaymentSettlementFeed } from './settlement/payment-settlement-feed';
import { PaymentSettlementFeedConsumer } from './settlement/payment-settlement-feed.consumer';
import { PAYMENTS_UPCASTERS } from './upcasters';

/** Makes the process's payments configuration visible to every module (set by paymentsService(config)). */
@Global()
@Module({})
export class PaymentsConfigModule {
  static forRoot(config: PaymentsConfig): DynamicModule {
    return {
      module: PaymentsConfigModule,
      providers: [{ provide: PAYMENTS_CONFIG_OVERRIDE, useValue: config }],
      exports: [PAYMENTS_CONFIG_OVERRIDE],
    };
  }
}

class ConfigHolder {
  constructor(@Optional() @Inject(PAYMENTS_CONFIG_OVERRIDE) readonly config?: PaymentsConfig) {}
}

/**
 * The payment read side wherever it runs: the gateway (reads, the hosted status) and the payments service (its
 * commands, projection and timer build on it). A static module, so one process that hosts both shares one
 * instance. Configuration: paymentsService(config) when the process hosts the service, else the environment.
 */
@Module({
  providers: [
    ConfigHolder,
    {
      provide: PAYMENTS_CONFIG,
      useFactory: (holder: ConfigHolder) => holder.config ?? paymentsConfigFromEnv(process.env),
      inject: [ConfigHolder],
    },
    PaymentChanges,
    PaymentReader,
    PaymentMerchantProfiles,
  ],
  exports: [PAYMENTS_CONFIG, PaymentChanges, PaymentReader, PaymentMerchantProfiles],
})
export class PaymentsCoreModule {}

/**
 * The payments service: owner of the Payment aggregate (`payment-<id>` streams; one handler per use case under
 * src/commands/, answering the gateway's commands), its projection and its durable expiry timer, and the fiat
 * settlement of fiat-settled merchants' payments: the settlement provider's feed (PAYMENT_SETTLEMENT_FEED, sandbox
 * adapter, which pays test-mode payments out on its own: SandboxPaymentPayouts) and the SPEC deadline timer
 * (PaymentSettlementDeadlines). Use cases added
 * by other features add their handler here (one folder per use case under src/commands/).
 */
@Module({
  imports: [PaymentsCoreModule],
  controllers: [
    CreateCheckoutHandler,
    CancelCheckoutHandler,
    ConfigurePaymentHandler,
    CapturePaymentHandler,
    RefundPaymentHandler,
    RescuePaymentHandler,
    RecoverPaymentHandler,
    DisputePayerHandler,
    PayerAttestationHandler,
  ],
  // The command side lives only here: the gateway, which imports the core module, cannot append to these streams.
  providers: [
    PaymentCommands,
    PaymentProjection,
    CheckoutStatusRepair,
    PaymentExpiryTimer,
    PaymentActions,
    depositChainsProvider,
    actionSubmissionsProvider,
    PaymentActionResumer,
    {
      provide: PAYMENT_SETTLEMENT_FEED,
      useFactory: (clock: Clock) => new SandboxPaymentSettlementFeed(clock),
      inject: [CLOCK],
    },
    PaymentSettlementFeedConsumer,
    PaymentSettlementDeadlines,
    SandboxPaymentPayouts,
  ],
  exports: [
    PaymentCommands,
    PaymentProjection,
    CheckoutStatusRepair,
    PaymentExpiryTimer,
    PAYMENT_SETTLEMENT_FEED,
    PaymentSettlementDeadlines,
    SandboxPaymentPayouts,
  ],
})
export class PaymentsServiceModule {}

/**
 * `chains`: the chain layer (the operator's relayers) the payment actions submit through; without it they answer
 * 503 `chain_unavailable`. Pass the process's one config object (one RelayerSet per key).
 */
export function paymentsService(
  config: PaymentsConfig = paymentsConfigFromEnv(process.env),
  chains?: ChainOperatorConfig,
): ServiceDefinition {
  return {
    name: 'payments',
    imports: [
      PaymentsConfigModule.forRoot(config),
      ...(chains ? [ChainOperatorModule.forRoot(chains)] : []),
      PaymentsServiceModule,
    ],
    migrations: PAYMENTS_MIGRATIONS,
    handlesCommands: true,
    upcasters: PAYMENTS_UPCASTERS,
  };
}

/**
 * The gateway's checkout and payment routes and the hosted page's status read: reads in the gateway, commands
 * sent to the payments service (PaymentsGateway). `controllers`: further controllers of the payments API.
 */
export function paymentsHttpModule(options: { readonly controllers?: readonly Type[] } = {}): DynamicModule {
  return PaymentsApiModule.forRoot({
    imports: [PaymentsCoreModule],
    useCases: PaymentsGateway,
    controllers: [PaymentActionsController, ...(options.controllers ?? [])],
    providers: [{ provide: PAYMENT_ACTIONS_USE_CASES, useClass: PaymentActionsGateway }],
  });
}
