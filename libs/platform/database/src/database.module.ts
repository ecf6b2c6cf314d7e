import {
  type DynamicModule,
  Global,
  Inject,
  Injectable,
  Module,
  type OnApplicationShutdown,
} from '@nestjs/common';
import { DataSource } from 'typeorm';
import { openDataSource, type MigrationClass } from './data-source';

export const DATABASE_OPTIONS = Symbol('DATABASE_OPTIONS');

export interface DatabaseModuleOptions {
  readonly url: string;
  readonly migrations: readonly MigrationClass[];
  readonly poolSize?: number;
  readonly applicationName?: string;
}

@Injectable()
class DataSourceCloser implements OnApplicationShutdown {
  constructor(@Inject(DataSource) private readonly dataSource: DataSource) {}
  async onApplicationShutdown(): Promise<void> {
    if (this.dataSource.isInitialized) await this.dataSource.destroy();
  }
}

/** Provides the TypeORM DataSource (migrated at start) to every module of the process. */
@Global()
@Module({})
export class DatabaseModule {
  static forRoot(options: DatabaseModuleOptions): DynamicModule {
    return {
      module: DatabaseModule,
      providers: [
        { provide: DATABASE_OPTIONS, useValue: options },
        { provide: DataSource, useFactory: () => openDataSource(options) },
        DataSourceCloser,
      ],
      exports: [DataSource, DATABASE_OPTIONS],
    };
  }
}
