import type { DataSource } from 'typeorm';
import type { Projections } from '@stablepay/aggregate';
import { openDataSource } from '@stablepay/database';
import type { BusMessage } from '@stablepay/event-bus';
import type { MerchantEvent } from '@stablepay/merchants-domain';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { MerchantSettingsProjection } from './merchant-settings.projection';
import { CreateSettlementAddressHistory1795708800000, MERCHANTS_MIGRATIONS } from './migrations';
import { replacedSettlementAddressPaid, settlementAddressAt } from './settlement-address-history';

describe('settlement address history (merchant_settlement_addresses, from SettlementAddressChanged.v1)', () => {
  let database: TestDatabase;
  let dataSource: DataSource;
  let projection: MerchantSettingsProjection;
  const merchantId = 'mer_history';
  const [A, B, C] = ['0xaaaa', '0xbbbb', '0xcccc'].map((p) => `${p}${'0'.repeat(36)}`) as [
    string,
    string,
    string,
  ];
  const at = (minute: number) => new Date(Date.UTC(2026, 10, 24, 10, minute)).toISOString();

  const message = (revision: number, event: MerchantEvent): BusMessage => ({
    id: `${merchantId}-${revision}`,
    topic: 'merchants.merchant.v1',
    key: `merchant-${merchantId}`,
    type: event.type,
    data: event.data,
    metadata: {},
    revision,
    recordedAt: at(0),
  });
  const changed = (revision: number, settlementAddress: string, minute: number) =>
    message(revision, {
      type: 'SettlementAddressChanged.v1',
      data: { settlementAddress, changedAt: at(minute) },
    });

  beforeAll(async () => {
    database = await createTestDatabase();
    dataSource = await openDataSource({ url: database.url, migrations: [...MERCHANTS_MIGRATIONS] });
    projection = new MerchantSettingsProjection(dataSource, {} as Projections);
    await projection.apply(
      message(0, {
        type: 'MerchantCreated.v1',
        data: {
          merchantId,
          name: 'History Co',
          mode: 'test',
          settlementMode: 'fiat',
          apiKeyHash: 'hash',
          apiKeyHint: 'hint',
          createdAt: at(0),
        },
      }),
    );
    // A at 10:01, B at 10:10, C at 10:20; B delivered twice (a redelivery records nothing more).
    for (const m of [changed(1, A, 1), changed(2, B, 10), changed(2, B, 10), changed(3, C, 20)])
      await projection.apply(m);
  });

  afterAll(async () => {
    await dataSource?.destroy();
    await database?.drop();
  });

  it('keeps every address with its validity interval; the one held now is open', async () => {
    const rows: Array<{ settlement_address: string; valid_from: Date; valid_to: Date | null }> =
      await dataSource.query(
        'SELECT settlement_address, valid_from, valid_to FROM merchant_settlement_addresses WHERE merchant_id = $1 ORDER BY valid_from',
        [merchantId],
      );
    expect(
      rows.map((r) => [
        r.settlement_address,
        new Date(r.valid_from).toISOString(),
        r.valid_to && new Date(r.valid_to).toISOString(),
      ]),
    ).toEqual([
      [A, at(1), at(10)],
      [B, at(10), at(20)],
      [C, at(20), null],
    ]);
  });

  it('A -> B -> C: answers the address in force at a time, however late it is asked (B for a time between B and C)', async () => {
    const asked = await Promise.all(
      [5, 15, 10, 59].map((minute) => settlementAddressAt(dataSource, merchantId, at(minute))),
    );
    expect(asked).toEqual([
      { address: A, validFrom: at(1) },
      { address: B, validFrom: at(10) },
      { address: B, validFrom: at(10) },
      { address: C, validFrom: at(20) },
    ]);
  });

  it('knows no address before the first one, nor for another merchant', async () => {
    expect(await settlementAddressAt(dataSource, merchantId, at(0))).toBeNull();
    expect(await settlementAddressAt(dataSource, 'mer_other', at(15))).toBeNull();
  });

  it('a charge paid a replaced address only when it paid neither the address in force at its block time nor the next one', async () => {
    const paid = (minute: number, paidTo: string) =>
      replacedSettlementAddressPaid(dataSource, merchantId, at(minute), paidTo);
    // Paid A while B was in force (a late read after C names B).
    expect(await paid(15, A)).toEqual({ address: B, validFrom: at(10) });
    expect(await paid(15, A.toUpperCase().replace('0X', '0x'))).toEqual({ address: B, validFrom: at(10) });
    // Paid what was in force: nothing replaced.
    expect(await paid(15, B)).toBeNull();
    expect(await paid(59, C)).toBeNull();
    // Paid B with a block time before B's change (the block's clock behind the service's, whole seconds): B is the
    // address that replaced A, not a replaced one.
    expect(await paid(9, B)).toBeNull();
    // Paid C two changes ahead of the block's time: not the next address, so A's replacement is named.
    expect(await paid(5, C)).toEqual({ address: A, validFrom: at(1) });
    // Before the history and for another merchant nothing is known.
    expect(await paid(0, C)).toBeNull();
    expect(await replacedSettlementAddressPaid(dataSource, 'mer_other', at(15), A)).toBeNull();
  });

  // Last two: they create the table again.
  it("the migration starts an existing merchant's history at its last change (earlier addresses are not known)", async () => {
    await dataSource.query('DROP TABLE merchant_settlement_addresses');
    const runner = dataSource.createQueryRunner();
    try {
      await new CreateSettlementAddressHistory1795708800000().up(runner);
    } finally {
      await runner.release();
    }
    expect(await settlementAddressAt(dataSource, merchantId, at(15))).toBeNull();
    expect(await settlementAddressAt(dataSource, merchantId, at(21))).toEqual({
      address: C,
      validFrom: at(20),
    });
  });

  it('the migration runs again over its own table and rows (replicas starting together) and changes nothing', async () => {
    const before: unknown[] = await dataSource.query(
      'SELECT * FROM merchant_settlement_addresses ORDER BY valid_from',
    );
    const runner = dataSource.createQueryRunner();
    try {
      await new CreateSettlementAddressHistory1795708800000().up(runner);
    } finally {
      await runner.release();
    }
    expect(await dataSource.query('SELECT * FROM merchant_settlement_addresses ORDER BY valid_from')).toEqual(
      before,
    );
  });
});
