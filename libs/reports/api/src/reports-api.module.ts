import { type DynamicModule, Module, type ModuleMetadata, type Type } from '@nestjs/common';
import { DEFAULT_EXPORTS_PER_MERCHANT, ExportSlots } from '@stablepay/http';
import { ReportsController } from './reports.controller';
import { REPORT_EXPORT_SLOTS, REPORTS_USE_CASES, type ReportsUseCases } from './reports.port';

/** The reports scope's HTTP surface in the gateway; the use cases come from reportsHttpModule (reports-service). */
@Module({})
export class ReportsApiModule {
  static forRoot(options: {
    imports: NonNullable<ModuleMetadata['imports']>;
    useCases: Type<ReportsUseCases>;
    exportsPerMerchant?: number;
  }): DynamicModule {
    return {
      module: ReportsApiModule,
      imports: options.imports,
      controllers: [ReportsController],
      providers: [
        { provide: REPORTS_USE_CASES, useClass: options.useCases },
        {
          provide: REPORT_EXPORT_SLOTS,
          useValue: new ExportSlots(options.exportsPerMerchant ?? DEFAULT_EXPORTS_PER_MERCHANT),
        },
      ],
    };
  }
}
