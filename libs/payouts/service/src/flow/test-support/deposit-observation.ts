import { createPostgresEventStore, type PostgresEventStore } from '@stablepay/event-store';
import type { ConsumeOptions, EventBus } from '@stablepay/event-bus';
import type { IndexerWatchClient } from '@stablepay/chain-operator';
import { createTestDatabase, type TestDatabase, testPool } from '@stablepay/testing';
import type { Pool } from 'pg';
import type { DataSource, QueryRunner } from 'typeorm';
import { PayoutsAggregates } from '../../aggregates';
import { PAYOUTS_MIGRATIONS } from '../../migrations';
import type { PayoutChains, PayoutsConfig } from '../../payouts.config';
import { PayoutsChanges, PayoutsReader } from '../../read-model/payouts.reader';
import { PAYOUT_DEPOSIT_OBSERVATION_GROUP, PayoutChainDeposits } from '../chain-deposits';
import { DepositIntake } from '../deposit-intake';

/**
 * The payouts deposit intake on a throwaway database, as the payouts process wires it, with no projection running
 * (the read model lags, as it may): the deposit-observation consumer's handler is handed to the test to feed.
 */
export interface DepositObservationHarness {
  readonly database: TestDatabase;
  readonly pool: Pool;
  readonly store: PostgresEventStore;
  readonly aggregates: PayoutsAggregates;
  readonly observe: ConsumeOptions['handler'];
  stop(): Promise<void>;
}

export async function startDepositObservation(options: {
  readonly now: () => Date;
  readonly config: PayoutsConfig;
  readonly chains: PayoutChains;
}): Promise<DepositObservationHarness> {
  const database = await createTestDatabase();
  const pool = testPool({ connectionString: database.url, max: 2 });
  // One session, outside a transaction, as the migration runner gives an index built CONCURRENTLY.
  const session = await pool.connect();
  try {
    const runner = {
      isTransactionActive: false,
      query: async (sql: string, params?: unknown[]) => (await session.query(sql, params)).rows,
    } as unknown as QueryRunner;
    for (const Migration of PAYOUTS_MIGRATIONS) await new Migration().up(runner);
  } finally {
    session.release();
  }
  const store = await createPostgresEventStore({ url: database.url, poolSize: 2 });
  const dataSource = {
    query: async (sql: string, params?: unknown[]) => (await pool.query(sql, params)).rows,
  } as unknown as DataSource;
  const aggregates = new PayoutsAggregates(store, { now: options.now });
  const reader = new PayoutsReader(dataSource, new PayoutsChanges());
  const consumers: ConsumeOptions[] = [];
  const bus = {
    consume: (consume: ConsumeOptions) => {
      consumers.push(consume);
      return Promise.resolve({ stop: () => Promise.resolve(), caughtUp: () => Promise.resolve() });
    },
  } as unknown as EventBus;
  const deposits = new PayoutChainDeposits(
    bus,
    store,
    reader,
    new DepositIntake(aggregates, reader, dataSource, store),
    aggregates,
    {} as IndexerWatchClient,
    options.config,
    options.chains,
  );
  await deposits.onApplicationBootstrap();
  const observe = consumers.find((c) => c.group === PAYOUT_DEPOSIT_OBSERVATION_GROUP)?.handler;
  if (!observe) throw new Error('no deposit observation consumer');
  return {
    database,
    pool,
    store,
    aggregates,
    observe,
    stop: async () => {
      await store.close();
      await pool.end();
      await database.drop();
    },
  };
}
