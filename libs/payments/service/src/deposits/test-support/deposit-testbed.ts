import type { JsonRpcProvider } from 'ethers';
import type { Pool } from 'pg';
import type { DataSource, MigrationInterface, QueryRunner } from 'typeorm';
import { type AnvilNode, localChainProvider, startAnvil } from '@stablepay/local-chains';
import { createTestDatabase, type TestDatabase, testPool } from '@stablepay/testing';
import { paymentDepositsService } from '../payment-deposits.module';

/** What the deposit flow's int tests run on: a real anvil (chain 8453) and the flow's tables (PostgreSQL or PGlite). */
export interface DepositTestbed {
  readonly provider: JsonRpcProvider;
  readonly dataSource: DataSource;
  stop(): Promise<void>;
}

export async function startDepositTestbed(): Promise<DepositTestbed> {
  const anvil: AnvilNode = await startAnvil({ chainId: 8453 });
  const provider = localChainProvider(anvil.rpcUrl, 8453);
  const database: TestDatabase = await createTestDatabase();
  const pool: Pool = testPool({ connectionString: database.url, max: 2 });
  // As TypeORM's DataSource.query answers: rows, but [rows, count] for an UPDATE or DELETE.
  const dataSource = {
    query: async (sql: string, params?: unknown[]) => {
      const result = await pool.query(sql, params);
      return result.command === 'UPDATE' || result.command === 'DELETE'
        ? [result.rows, result.rowCount]
        : result.rows;
    },
  } as unknown as DataSource;
  // One session, outside a transaction, answering rows: what TypeORM's runner gives a migration.
  const session = await pool.connect();
  const runner = {
    query: async (sql: string, params?: unknown[]) => (await session.query(sql, params)).rows,
    isTransactionActive: false,
  } as unknown as QueryRunner;
  try {
    for (const Migration of paymentDepositsService({} as never).migrations ?? [])
      await (new (Migration as new () => MigrationInterface)() as MigrationInterface).up(runner);
  } finally {
    session.release();
  }
  return {
    provider,
    dataSource,
    stop: async () => {
      provider.destroy();
      await pool.end();
      await database.drop();
      await anvil.stop();
    },
  };
}
