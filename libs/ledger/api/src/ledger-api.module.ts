import { type DynamicModule, Module, type ModuleMetadata, type Type } from '@nestjs/common';
import { CHARGE_LEDGER, type ChargeLedgerUseCases } from './charge-ledger.port';
import { ChargesController } from './charges.controller';

/**
 * The charge-ledger scope's HTTP surface in the gateway. The use cases are supplied by whoever composes it
 * (chargeLedgerHttpModule in @stablepay/charge-ledger-service).
 */
@Module({})
export class LedgerApiModule {
  static forRoot(options: {
    imports: NonNullable<ModuleMetadata['imports']>;
    useCases: Type<ChargeLedgerUseCases>;
  }): DynamicModule {
    return {
      module: LedgerApiModule,
      imports: options.imports,
      controllers: [ChargesController],
      providers: [{ provide: CHARGE_LEDGER, useClass: options.useCases }],
      // The gateway's operator route (charge settlement exposures) reads through the same port.
      exports: [CHARGE_LEDGER],
    };
  }
}
