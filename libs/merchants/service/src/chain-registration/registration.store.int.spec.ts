import { Client } from 'pg';
import type { DataSource } from 'typeorm';
import { openDataSource } from '@stablepay/database';
import { createTestDatabase, eventually, type TestDatabase, withClient } from '@stablepay/testing';
import type { MerchantsConfig } from '../merchants.config';
import { presentChainRegistrations, presentSigners } from '../settings.presenter';
import type { MerchantSettingsRow } from '../settings.reader';
import {
  AddMerchantChainHoldings1796140800000,
  CreateMerchantChainRegistrations1767400000000,
  MERCHANT_CHAIN_REGISTRATION_MIGRATIONS,
  type RegistrationRow,
  RegistrationStore,
} from './registration.store';

async function rowOf(store: RegistrationStore, merchantId: string): Promise<RegistrationRow> {
  const [row] = await store.forMerchant(merchantId);
  if (!row) throw new Error(`no registration row for ${merchantId}`);
  return row;
}

const CHAIN = 'eip155:8453';
const config = {
  supportedChains: [CHAIN],
  chainRpcUrls: { [CHAIN]: 'http://127.0.0.1:8545' },
  chainMode: 'test',
  registryAddress: null,
} as unknown as MerchantsConfig;
const [SIGNER, OLD_SETTLEMENT, NEW_SETTLEMENT] = ['0x11', '0x22', '0x33'].map(
  (p) => `${p}${'0'.repeat(38)}`,
) as [string, string, string];
const TX1 = `0x${'a1'.repeat(32)}`;
const TX2 = `0x${'b2'.repeat(32)}`;
const settings = (settlement: string) =>
  ({
    mode: 'test',
    merchant_signer: SIGNER,
    settlement_address: settlement,
  }) as unknown as MerchantSettingsRow;

describe('merchant_chain_registrations: what the chain holds, apart from what is asked for', () => {
  let database: TestDatabase;
  let dataSource: DataSource | undefined;

  beforeEach(async () => {
    database = await createTestDatabase();
  });
  afterEach(async () => {
    await dataSource?.destroy();
    dataSource = undefined;
    await database?.drop();
  });

  it('a settlement-only change leaves the signer registered and shows the registry values and their transaction', async () => {
    dataSource = await openDataSource({
      url: database.url,
      migrations: [...MERCHANT_CHAIN_REGISTRATION_MIGRATIONS],
    });
    const store = new RegistrationStore(dataSource);
    const now = new Date('2026-11-24T10:00:00Z');
    const want = (settlement: string) =>
      store.want({ merchantId: 'mer_1', chain: CHAIN, onChainId: '0x01', signer: SIGNER, settlement, now });
    await want(OLD_SETTLEMENT);
    const first = await rowOf(store, 'mer_1');
    await store.settle(first, { status: 'registered', txHash: TX1, now });

    await want(NEW_SETTLEMENT);
    const asking = await rowOf(store, 'mer_1');
    expect(asking?.status).toBe('pending');
    expect(presentSigners(settings(NEW_SETTLEMENT), config, [asking])[0]?.status).toBe('registered');
    expect(presentChainRegistrations(settings(NEW_SETTLEMENT), config, [asking])[0]).toMatchObject({
      status: 'pending',
      settlement_address: NEW_SETTLEMENT,
      on_chain: { signer: SIGNER, settlement_address: OLD_SETTLEMENT, tx_hash: TX1 },
    });

    // The worker reads the registry: other values than asked, the same as it holds (its transaction is kept).
    await store.settle(asking, {
      status: 'change_requires_merchant_signature',
      held: { signer: SIGNER, settlement: OLD_SETTLEMENT },
      now,
    });
    const mismatch = await rowOf(store, 'mer_1');
    expect(presentSigners(settings(NEW_SETTLEMENT), config, [mismatch])[0]?.status).toBe('registered');
    expect(presentChainRegistrations(settings(NEW_SETTLEMENT), config, [mismatch])[0]).toMatchObject({
      status: 'change_requires_merchant_signature',
      on_chain: { signer: SIGNER, settlement_address: OLD_SETTLEMENT, tx_hash: TX1 },
    });

    // The relayed MerchantChange lands: the row is registered and the chain holds the new values, by that transaction.
    await store.recordOnChain({
      merchantId: 'mer_1',
      chain: CHAIN,
      onChainId: '0x01',
      signer: SIGNER,
      settlement: NEW_SETTLEMENT,
      txHash: TX2,
      now,
    });
    const changed = await rowOf(store, 'mer_1');
    expect(presentChainRegistrations(settings(NEW_SETTLEMENT), config, [changed])[0]).toMatchObject({
      status: 'registered',
      tx_hash: TX2,
      on_chain: { signer: SIGNER, settlement_address: NEW_SETTLEMENT, tx_hash: TX2 },
    });
  });

  it('a change relayed while the row asks for newer values records what the chain holds and leaves the row to the worker', async () => {
    dataSource = await openDataSource({
      url: database.url,
      migrations: [...MERCHANT_CHAIN_REGISTRATION_MIGRATIONS],
    });
    const store = new RegistrationStore(dataSource);
    const now = new Date('2026-11-24T10:00:00Z');
    await store.want({
      merchantId: 'mer_2',
      chain: CHAIN,
      onChainId: '0x02',
      signer: SIGNER,
      settlement: NEW_SETTLEMENT,
      now,
    });
    await store.recordOnChain({
      merchantId: 'mer_2',
      chain: CHAIN,
      onChainId: '0x02',
      signer: SIGNER,
      settlement: OLD_SETTLEMENT,
      txHash: TX1,
      now,
    });
    const row = await rowOf(store, 'mer_2');
    expect(row).toMatchObject({ status: 'pending', settlement: NEW_SETTLEMENT, tx_hash: null });
    expect(row).toMatchObject({ chain_signer: SIGNER, chain_settlement: OLD_SETTLEMENT, chain_tx_hash: TX1 });
  });

  it('rows written before the holdings were kept read as the chain held them: registered, and a mismatch by its error', async () => {
    const old = await openDataSource({
      url: database.url,
      migrations: [CreateMerchantChainRegistrations1767400000000],
    });
    dataSource = old;
    const insert = (
      merchant: string,
      status: string,
      settlement: string,
      txHash: string | null,
      error: string | null,
    ) =>
      old.query(
        `INSERT INTO merchant_chain_registrations
           (merchant_id, chain, on_chain_id, signer, settlement, status, tx_hash, attempts, last_error, next_attempt_at,
            updated_at)
         VALUES ($1, $2, '0x01', $3, $4, $5, $6, 0, $7, now(), now())`,
        [merchant, CHAIN, SIGNER, settlement, status, txHash, error],
      );
    await insert('mer_registered', 'registered', OLD_SETTLEMENT, TX1, null);
    await insert(
      'mer_mismatch',
      'change_requires_merchant_signature',
      NEW_SETTLEMENT,
      null,
      `the registry holds signer ${SIGNER} and settlement ${OLD_SETTLEMENT}`,
    );
    await insert('mer_pending', 'pending', NEW_SETTLEMENT, null, null);
    await dataSource.destroy();
    dataSource = await openDataSource({
      url: database.url,
      migrations: [...MERCHANT_CHAIN_REGISTRATION_MIGRATIONS],
    });
    const store = new RegistrationStore(dataSource);

    const registered = await rowOf(store, 'mer_registered');
    expect(registered).toMatchObject({
      chain_signer: SIGNER,
      chain_settlement: OLD_SETTLEMENT,
      chain_tx_hash: TX1,
    });
    const mismatch = await rowOf(store, 'mer_mismatch');
    expect(mismatch).toMatchObject({
      chain_signer: SIGNER,
      chain_settlement: OLD_SETTLEMENT,
      chain_tx_hash: null,
    });
    expect(presentSigners(settings(NEW_SETTLEMENT), config, [mismatch])[0]?.status).toBe('registered');
    const pending = await rowOf(store, 'mer_pending');
    expect(pending).toMatchObject({ chain_signer: null, chain_settlement: null });
    expect(presentSigners(settings(NEW_SETTLEMENT), config, [pending])[0]?.status).toBe('pending');
  });

  const holdingColumns = () =>
    withClient(database.url, (sql) =>
      sql.query<{ column_name: string }>(
        `SELECT column_name FROM information_schema.columns
          WHERE table_name = 'merchant_chain_registrations' AND column_name LIKE 'chain\\_%' ORDER BY column_name`,
      ),
    ).then((r) => r.rows.map((row) => row.column_name));

  it('AddMerchantChainHoldings down runs twice (both migration sets list it) and up again', async () => {
    dataSource = await openDataSource({
      url: database.url,
      migrations: [...MERCHANT_CHAIN_REGISTRATION_MIGRATIONS],
    });
    const migration = new AddMerchantChainHoldings1796140800000();
    const q = dataSource.createQueryRunner();
    try {
      await migration.down(q);
      await migration.down(q);
      expect(await holdingColumns()).toEqual([]);
      await migration.up(q);
      await migration.up(q);
    } finally {
      await q.release();
    }
    expect(await holdingColumns()).toEqual(['chain_settlement', 'chain_signer', 'chain_tx_hash']);
  });

  const onPostgres = process.env['DATABASE_URL'] ? it : it.skip;
  // PGlite runs one connection at a time: no transaction can hold the table beside the migration there.
  onPostgres(
    "AddMerchantChainHoldings's ALTER waiting behind a long transaction does not hold up the settings reads behind it",
    async () => {
      await (
        await openDataSource({
          url: database.url,
          migrations: [CreateMerchantChainRegistrations1767400000000],
        })
      ).destroy();
      const holder = new Client({ connectionString: database.url });
      await holder.connect();
      try {
        await holder.query('BEGIN');
        await holder.query('SELECT count(*) FROM merchant_chain_registrations');
        const migrating = openDataSource({
          url: database.url,
          migrations: [...MERCHANT_CHAIN_REGISTRATION_MIGRATIONS],
        });
        await eventually(
          () =>
            withClient(database.url, (sql) =>
              sql.query(
                `SELECT 1 FROM pg_stat_activity
                  WHERE datname = current_database() AND query LIKE 'ALTER TABLE merchant_chain_registrations%' AND wait_event_type = 'Lock'`,
              ),
            ),
          (r) => r.rowCount === 1,
          'the ALTER waiting for the transaction before it',
          { intervalMs: 20 },
        );
        // Behind an unbounded ALTER this read waits for the holder (here for ever; lock_timeout makes it an error).
        const read = await withClient(database.url, async (sql) => {
          await sql.query(`SET lock_timeout = '30s'`);
          return sql.query('SELECT count(*)::int AS n FROM merchant_chain_registrations');
        });
        expect(read.rows).toEqual([{ n: 0 }]);
        await holder.query('COMMIT');
        dataSource = await migrating;
      } finally {
        await holder.end();
      }
      expect(await holdingColumns()).toEqual(['chain_settlement', 'chain_signer', 'chain_tx_hash']);
    },
    60_000,
  );
});
