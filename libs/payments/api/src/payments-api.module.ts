import { type DynamicModule, Module, type ModuleMetadata, type Type } from '@nestjs/common';
import { CheckoutsController } from './checkouts.controller';
import { HostedPaymentController } from './hosted-payment.controller';
import { HostedPaymentPageController } from './hosted-payment-page.controller';
import { PaymentsController } from './payments.controller';
import { LegacySubscriptionsController } from './payment-requests/legacy-subscriptions.controller';
import { PaymentRequestsController } from './payment-requests/payment-requests.controller';
import { PAYMENTS_USE_CASES, type PaymentsUseCases } from './payments.port';

/** The controllers of this module; a scope's further controllers (signed actions...) are passed in `controllers`. */
export const PAYMENTS_API_CONTROLLERS: readonly Type[] = [
  CheckoutsController,
  PaymentsController,
  HostedPaymentController,
  HostedPaymentPageController,
  PaymentRequestsController,
  LegacySubscriptionsController,
];

/**
 * The payments scope's HTTP surface in the gateway: /checkouts, /payments and the hosted page's status read.
 * The use cases are supplied by whoever composes it (paymentsHttpModule in @stablepay/payments-service).
 */
@Module({})
export class PaymentsApiModule {
  static forRoot(options: {
    imports: NonNullable<ModuleMetadata['imports']>;
    useCases: Type<PaymentsUseCases>;
    controllers?: readonly Type[];
    providers?: NonNullable<ModuleMetadata['providers']>;
  }): DynamicModule {
    return {
      module: PaymentsApiModule,
      imports: options.imports,
      controllers: [...PAYMENTS_API_CONTROLLERS, ...(options.controllers ?? [])],
      providers: [{ provide: PAYMENTS_USE_CASES, useClass: options.useCases }, ...(options.providers ?? [])],
      exports: [PAYMENTS_USE_CASES],
    };
  }
}
