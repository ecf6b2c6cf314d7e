import { type DynamicModule, Module, type ModuleMetadata, type Type } from '@nestjs/common';
import { HostedSubscribeController } from './hosted/hosted-subscribe.controller';
import { SubscriptionCheckoutsController } from './subscription-checkouts.controller';
import { SUBSCRIPTION_CHECKOUTS, type SubscriptionCheckoutsUseCases } from './subscription-checkouts.port';

/**
 * The subscriptions scope's HTTP surface in the gateway: /subscription-checkouts and the hosted subscribe page.
 * The use cases are supplied by whoever composes it (see subscriptionsHttpModule in @stablepay/subscriptions-service).
 */
@Module({})
export class SubscriptionsApiModule {
  static forRoot(options: {
    imports: NonNullable<ModuleMetadata['imports']>;
    useCases: Type<SubscriptionCheckoutsUseCases>;
  }): DynamicModule {
    return {
      module: SubscriptionsApiModule,
      imports: options.imports,
      controllers: [SubscriptionCheckoutsController, HostedSubscribeController],
      providers: [{ provide: SUBSCRIPTION_CHECKOUTS, useClass: options.useCases }],
    };
  }
}
