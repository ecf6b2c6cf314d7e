import { type DynamicModule, Module, type ModuleMetadata, type Type } from '@nestjs/common';
import { SubscriptionChargesController } from './subscription-charges.controller';
import { SUBSCRIPTION_CHARGES, type SubscriptionChargesUseCases } from './subscription-charges.port';

/** POST /subscriptions/:id/charge-quote and /charge in the gateway; the use cases are supplied by the composer. */
@Module({})
export class SubscriptionChargesApiModule {
  static forRoot(options: {
    imports: NonNullable<ModuleMetadata['imports']>;
    useCases: Type<SubscriptionChargesUseCases>;
  }): DynamicModule {
    return {
      module: SubscriptionChargesApiModule,
      imports: options.imports,
      controllers: [SubscriptionChargesController],
      providers: [{ provide: SUBSCRIPTION_CHARGES, useClass: options.useCases }],
    };
  }
}
