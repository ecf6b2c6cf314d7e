import { type DynamicModule, Module, type ModuleMetadata, type Type } from '@nestjs/common';
import { PayoutsBetaGuard } from './beta.guard';
import {
  BeneficiariesController,
  CustomersController,
  PayoutsController,
  PayoutTestHelpersController,
} from './payouts.controllers';
import { HostedKycController } from './hosted-kyc.controller';
import { PAYOUTS_USE_CASES, type PayoutsUseCases } from './payouts.port';

/**
 * The payouts scope's HTTP surface in the gateway (beta): /customers, /beneficiaries, /payouts, the test helpers and
 * the hosted KYC page. The use cases are supplied by whoever composes it (payoutsHttpModule in
 * @stablepay/payouts-service).
 */
@Module({})
export class PayoutsApiModule {
  static forRoot(options: {
    imports: NonNullable<ModuleMetadata['imports']>;
    useCases: Type<PayoutsUseCases>;
  }): DynamicModule {
    return {
      module: PayoutsApiModule,
      imports: options.imports,
      controllers: [
        CustomersController,
        BeneficiariesController,
        PayoutsController,
        PayoutTestHelpersController,
        HostedKycController,
      ],
      providers: [{ provide: PAYOUTS_USE_CASES, useClass: options.useCases }, PayoutsBetaGuard],
      exports: [PAYOUTS_USE_CASES],
    };
  }
}
