import { type DynamicModule, Module, type ModuleMetadata, type Type } from '@nestjs/common';
import { HostedCancelController } from './hosted/hosted-cancel.controller';
import { HOSTED_CANCEL_VIEWS, type HostedCancelViews } from './hosted/hosted-cancel.port';
import { HostedSubscribeController } from './hosted/hosted-subscribe.controller';
import { SubscriptionCheckoutsController } from './subscription-checkouts.controller';
import { SUBSCRIPTION_CHECKOUTS, type SubscriptionCheckoutsUseCases } from './subscription-checkouts.port';
import { SubscribeReportLimits } from './subscribe-report-limits';
import { SubscribeController, SubscriptionsController } from './subscriptions.controller';
import { SUBSCRIPTIONS_USE_CASES, type SubscriptionsUseCases } from './subscriptions.port';

/**
 * The subscriptions scope's HTTP surface in the gateway: /subscription-checkouts, the hosted subscribe
 * page, the subscribe call and /subscriptions.
 * The use cases are supplied by whoever composes it (see subscriptionsHttpModule in @stablepay/subscriptions-service).
 */
@Module({})
export class SubscriptionsApiModule {
  static forRoot(options: {
    imports: NonNullable<ModuleMetadata['imports']>;
    useCases: Type<SubscriptionCheckoutsUseCases>;
    /** The subscribe call and the /subscriptions routes. */
    subscriptionUseCases: Type<SubscriptionsUseCases>;
    /** The hosted cancel page's read. */
    hostedCancelViews: Type<HostedCancelViews>;
  }): DynamicModule {
    return {
      module: SubscriptionsApiModule,
      imports: options.imports,
      controllers: [
        SubscriptionCheckoutsController,
        HostedSubscribeController,
        HostedCancelController,
        SubscribeController,
        SubscriptionsController,
      ],
      providers: [
        { provide: SUBSCRIPTION_CHECKOUTS, useClass: options.useCases },
        { provide: SUBSCRIPTIONS_USE_CASES, useClass: options.subscriptionUseCases },
        { provide: HOSTED_CANCEL_VIEWS, useExisting: options.hostedCancelViews },
        SubscribeReportLimits,
      ],
    };
  }
}
