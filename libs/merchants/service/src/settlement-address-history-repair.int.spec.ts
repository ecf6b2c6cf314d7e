import type { DataSource } from 'typeorm';
import type { Projections } from '@stablepay/aggregate';
import { openDataSource } from '@stablepay/database';
import { toBusMessage } from '@stablepay/event-bus';
import { createPostgresEventStore, type PostgresEventStore } from '@stablepay/event-store';
import { type MerchantEvent, merchantStreamId } from '@stablepay/merchants-domain';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { MerchantSettingsProjection } from './merchant-settings.projection';
import { MERCHANTS_MIGRATIONS } from './migrations';
import { replacedSettlementAddressPaid } from './settlement-address-history';
import { SettlementAddressHistoryRepair } from './settlement-address-history-repair';

describe('settlement address history repair (histories the projection wrote before c960b94)', () => {
  let database: TestDatabase;
  let dataSource: DataSource;
  let store: PostgresEventStore;
  let projection: MerchantSettingsProjection;
  let repair: SettlementAddressHistoryRepair;
  const [A, B, C] = ['0xaaaa', '0xbbbb', '0xcccc'].map((p) => `${p}${'0'.repeat(36)}`) as [
    string,
    string,
    string,
  ];
  const at = (minute: number, ms = 0) => new Date(Date.UTC(2026, 10, 24, 10, minute, 0, ms)).toISOString();

  /** Creates the merchant and its address changes on its stream, projected as the projection does now. */
  async function merchantWith(merchantId: string, changes: ReadonlyArray<readonly [string, number]>) {
    const events: MerchantEvent[] = [
      {
        type: 'MerchantCreated.v1',
        data: {
          merchantId,
          name: `${merchantId} Co`,
          mode: 'test',
          settlementMode: 'fiat',
          apiKeyHash: `hash-${merchantId}`,
          apiKeyHint: 'hint',
          createdAt: at(0),
        },
      },
      ...changes.map(([settlementAddress, minute]): MerchantEvent => ({
        type: 'SettlementAddressChanged.v1',
        data: { settlementAddress, changedAt: at(minute) },
      })),
    ];
    await store.appendToStream(
      merchantStreamId(merchantId),
      events.map((e, i) => ({ id: `${merchantId}-${i}`, type: e.type, data: e.data })),
    );
    for (const recorded of await store.readStream(merchantStreamId(merchantId)))
      await projection.apply(toBusMessage(recorded));
  }

  type Row = readonly [string, string, string | null];
  const historyOf = async (merchantId: string): Promise<Row[]> => {
    const rows: Array<{ settlement_address: string; valid_from: Date; valid_to: Date | null }> =
      await dataSource.query(
        'SELECT settlement_address, valid_from, valid_to FROM merchant_settlement_addresses WHERE merchant_id = $1 ORDER BY valid_from',
        [merchantId],
      );
    return rows.map((r) => [
      r.settlement_address,
      new Date(r.valid_from).toISOString(),
      r.valid_to && new Date(r.valid_to).toISOString(),
    ]);
  };
  /** Replaces the merchant's history with what the projection before c960b94 wrote. */
  const writtenBefore = async (merchantId: string, rows: readonly Row[]) => {
    await dataSource.query('DELETE FROM merchant_settlement_addresses WHERE merchant_id = $1', [merchantId]);
    for (const [address, from, to] of rows)
      await dataSource.query(
        'INSERT INTO merchant_settlement_addresses (merchant_id, settlement_address, valid_from, valid_to) VALUES ($1, $2, $3, $4)',
        [merchantId, address, from, to],
      );
  };

  beforeAll(async () => {
    database = await createTestDatabase();
    dataSource = await openDataSource({ url: database.url, migrations: [...MERCHANTS_MIGRATIONS] });
    store = await createPostgresEventStore({ url: database.url });
    projection = new MerchantSettingsProjection(dataSource, {} as Projections);
    repair = new SettlementAddressHistoryRepair(dataSource, store);
  });

  afterAll(async () => {
    await store?.close();
    await dataSource?.destroy();
    await database?.drop();
  });

  it('rebuilds from the stream a history left with two open addresses, the replaced one in force, and a second run changes nothing', async () => {
    // A at 10:01, B at 10:10, then C decided at 10:09 and appended after B (a retried PUT /settings).
    await merchantWith('mer_two_open', [
      [A, 1],
      [B, 10],
      [C, 9],
    ]);
    const now = await historyOf('mer_two_open');
    expect(now).toEqual([
      [A, at(1), at(10)],
      [B, at(10), at(10, 1)],
      [C, at(10, 1), null],
    ]);
    // The projection before c960b94 closed nothing for C (stamped before B's start) and opened C at its own time.
    await writtenBefore('mer_two_open', [
      [A, at(1), at(10)],
      [C, at(9), null],
      [B, at(10), null],
    ]);
    // The false alarm that history gave: a charge paying C, the address the settings hold, named B as replaced.
    expect(await replacedSettlementAddressPaid(dataSource, 'mer_two_open', at(30), C)).toMatchObject({
      address: B,
    });

    expect(await repair.repairAll()).toEqual(['mer_two_open']);
    expect(await historyOf('mer_two_open')).toEqual(now);
    expect(await replacedSettlementAddressPaid(dataSource, 'mer_two_open', at(30), C)).toBeNull();
    expect(await repair.repairAll()).toEqual([]);
    expect(await historyOf('mer_two_open')).toEqual(now);
  });

  /** The merchant's history as the projection writes it now, after `broken` replaced it and the repair ran. */
  const rebuiltAfter = async (
    merchantId: string,
    changes: ReadonlyArray<readonly [string, number]>,
    broken: readonly Row[],
  ) => {
    await merchantWith(merchantId, changes);
    const now = await historyOf(merchantId);
    await writtenBefore(merchantId, broken);
    expect(await repair.repair(merchantId)).toBe(true);
    expect(await historyOf(merchantId)).toEqual(now);
    return now;
  };

  it('rebuilds a history that dropped a change in the same millisecond (the open address is not the one the settings hold)', async () => {
    const now = await rebuiltAfter(
      'mer_same_ms',
      [
        [A, 1],
        [B, 10],
        [C, 10],
      ],
      [
        [A, at(1), at(10)],
        [B, at(10), null],
      ],
    );
    expect(now.at(-1)).toEqual([C, at(10, 1), null]);
  });

  it('rebuilds a history whose two open addresses a later change closed (overlapping intervals)', async () => {
    // The change to A at 10:20 closed both open addresses before c960b94.
    await rebuiltAfter(
      'mer_overlap',
      [
        [A, 1],
        [B, 10],
        [C, 9],
        [A, 20],
      ],
      [
        [A, at(1), at(10)],
        [C, at(9), at(20)],
        [B, at(10), at(20)],
        [A, at(20), null],
      ],
    );
  });

  it('leaves a consistent history alone, also one that starts at the last change (migrated merchants)', async () => {
    await merchantWith('mer_migrated', [
      [A, 1],
      [B, 10],
    ]);
    await writtenBefore('mer_migrated', [[B, at(10), null]]);
    expect(await repair.repair('mer_migrated')).toBe(false);
    expect(await historyOf('mer_migrated')).toEqual([[B, at(10), null]]);
  });
});
