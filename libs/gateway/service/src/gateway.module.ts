import { type DynamicModule, Module } from '@nestjs/common';
import { APP_GUARD, APP_INTERCEPTOR } from '@nestjs/core';
import { CLOCK } from '@stablepay/aggregate';
import {
  ApiKeyGuard,
  DEFAULT_IDEMPOTENCY_PRUNE,
  IDEMPOTENCY_CLOCK,
  IDEMPOTENCY_PRUNE_CONFIG,
  IDEMPOTENCY_SEALER,
  IdempotencyInterceptor,
  IdempotencyKeyPruner,
  type IdempotencyPruneConfig,
} from '@stablepay/http';
import { AdminTokenGuard, MERCHANTS_ADMIN_TOKEN } from '@stablepay/merchants-api';
import {
  MERCHANTS_MIGRATIONS,
  merchantsHttpModule,
  type MerchantsConfig,
} from '@stablepay/merchants-service';
import type { ServiceDefinition } from '@stablepay/runtime';
import { WEBHOOKS_MIGRATIONS, webhooksHttpModule } from '@stablepay/webhook-dispatch-service';
import { WEBHOOK_EVENT_TYPES } from '@stablepay/webhooks-domain';
import { SUBSCRIPTIONS_MIGRATIONS, subscriptionsHttpModule } from '@stablepay/subscriptions-service';
import { chargeLedgerHttpModule, LEDGER_MIGRATIONS } from '@stablepay/charge-ledger-service';
import { PAYMENTS_MIGRATIONS, paymentsHttpModule } from '@stablepay/payments-service';
import { PAYOUTS_MIGRATIONS, payoutsHttpModule } from '@stablepay/payouts-service';
import { reportsHttpModule } from '@stablepay/reports-service';
import { ChargeSettlementExposuresController } from './charge-settlement-exposures.controller';
import { DepositRescansController } from './deposit-rescans.controller';
import { PayerAttestationsController } from './payer-attestations.controller';
import { SettlementExposuresController } from './settlement-exposures.controller';
import { subscriptionChargesHttpModule } from './subscription-charges.gateway';
import { WithheldRefundReturnsController } from './withheld-refund-returns.controller';

/**
 * The public REST API: API-key authentication on every route not marked public, Idempotency-Key on every POST,
 * the error envelope (installed by createHttpApp), and the routes of each scope's API module.
 */
@Module({})
export class GatewayModule {
  static forRoot(
    merchants: MerchantsConfig,
    idempotency: IdempotencyPruneConfig = DEFAULT_IDEMPOTENCY_PRUNE,
  ): DynamicModule {
    return {
      module: GatewayModule,
      imports: [
        // The webhooks scope's event-type catalogue validates PATCH /settings webhook_event_types.
        merchantsHttpModule({ ...merchants, webhookEventCatalogue: WEBHOOK_EVENT_TYPES }),
        webhooksHttpModule(),
        subscriptionsHttpModule(),
        chargeLedgerHttpModule(),
        paymentsHttpModule(),
        payoutsHttpModule(),
        subscriptionChargesHttpModule(),
        reportsHttpModule(),
      ],
      controllers: [
        DepositRescansController,
        WithheldRefundReturnsController,
        PayerAttestationsController,
        SettlementExposuresController,
        ChargeSettlementExposuresController,
      ],
      providers: [
        // The operator routes hosted here (the admin controllers above) are guarded as the merchants scope's are.
        { provide: MERCHANTS_ADMIN_TOKEN, useValue: merchants.adminToken },
        AdminTokenGuard,
        { provide: APP_GUARD, useClass: ApiKeyGuard },
        { provide: IDEMPOTENCY_CLOCK, useExisting: CLOCK },
        // The webhook secrets' key seals the kept answers that carry a secret (@AnswersSecret).
        { provide: IDEMPOTENCY_SEALER, useValue: merchants.secretBox },
        { provide: APP_INTERCEPTOR, useClass: IdempotencyInterceptor },
        // Every gateway process prunes (batches skip what another's pruner holds): no single owner to lose.
        { provide: IDEMPOTENCY_PRUNE_CONFIG, useValue: idempotency },
        IdempotencyKeyPruner,
      ],
    };
  }
}

export function gatewayService(
  merchants: MerchantsConfig,
  idempotency: IdempotencyPruneConfig = DEFAULT_IDEMPOTENCY_PRUNE,
): ServiceDefinition {
  return {
    name: 'gateway',
    imports: [GatewayModule.forRoot(merchants, idempotency)],
    migrations: [
      ...MERCHANTS_MIGRATIONS,
      ...WEBHOOKS_MIGRATIONS,
      ...SUBSCRIPTIONS_MIGRATIONS,
      ...LEDGER_MIGRATIONS,
      ...PAYMENTS_MIGRATIONS,
      ...PAYOUTS_MIGRATIONS,
    ],
  };
}
