import { type DynamicModule, Module, type ModuleMetadata, type Type } from '@nestjs/common';
import { AdminController, AdminTokenGuard } from './admin.controller';
import { MERCHANTS_USE_CASES, type MerchantsUseCases } from './merchants.port';
import { SettingsController } from './settings.controller';
import { SettlementController } from './settlement.controller';

/**
 * The merchants scope's HTTP surface in the gateway: /settings, /payments/settlement and the operator API. The
 * use cases are supplied by whoever composes it (see merchantsHttpModule in @stablepay/merchants-service); the
 * imports must provide MERCHANTS_ADMIN_TOKEN. They are re-exported: the gateway's API-key guard resolves keys
 * through the merchants read side they carry.
 */
@Module({})
export class MerchantsApiModule {
  static forRoot(options: {
    imports: NonNullable<ModuleMetadata['imports']>;
    useCases: Type<MerchantsUseCases>;
  }): DynamicModule {
    return {
      module: MerchantsApiModule,
      imports: options.imports,
      controllers: [SettingsController, SettlementController, AdminController],
      providers: [{ provide: MERCHANTS_USE_CASES, useClass: options.useCases }, AdminTokenGuard],
      exports: options.imports as NonNullable<ModuleMetadata['exports']>,
    };
  }
}
