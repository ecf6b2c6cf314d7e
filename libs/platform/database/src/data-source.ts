import { DataSource, type MigrationInterface } from 'typeorm';
import { connectionGuardWanted, installConnectionGuard } from '@stablepay/node-util';

export type MigrationClass = new () => MigrationInterface;

export interface DatabaseOptions {
  readonly url: string;
  /** Every migration of every module hosted by this process; applied in class-name timestamp order. */
  readonly migrations: readonly MigrationClass[];
  readonly poolSize?: number;
  readonly applicationName?: string;
}

/**
 * Opens the read-model database and applies pending migrations. Schema changes happen by migrations only:
 * `synchronize` stays off so a deploy never mutates a table by guessing from entity classes.
 */
export async function openDataSource(options: DatabaseOptions): Promise<DataSource> {
  // Tests make a connection asked for inside a transaction fail (it hangs the embedded PGlite): see the guard.
  if (connectionGuardWanted()) installConnectionGuard();
  const migrations = [...new Set(options.migrations)].sort((a, b) => migrationOrder(a) - migrationOrder(b));
  const dataSource = new DataSource({
    type: 'postgres',
    url: options.url,
    synchronize: false,
    migrationsRun: false,
    migrationsTransactionMode: 'each',
    migrations: migrations as MigrationClass[],
    entities: [],
    extra: { max: options.poolSize ?? 10, application_name: options.applicationName ?? 'stablepay' },
    logging: ['error'],
  });
  await dataSource.initialize();
  try {
    await dataSource.runMigrations({ transaction: 'each' });
  } catch (error) {
    await dataSource.destroy();
    throw error;
  }
  return dataSource;
}

/** Migration classes are named `<Name><13-digit timestamp>` (TypeORM's convention); order by that timestamp. */
function migrationOrder(m: MigrationClass): number {
  const match = /(\d{13})$/.exec(m.name);
  if (!match?.[1]) throw new Error(`migration class ${m.name} must end with a 13-digit timestamp`);
  return Number(match[1]);
}
