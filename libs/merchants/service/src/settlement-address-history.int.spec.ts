import type { DataSource, QueryRunner } from 'typeorm';
import type { Projections } from '@stablepay/aggregate';
import { openDataSource } from '@stablepay/database';
import type { BusMessage } from '@stablepay/event-bus';
import type { MerchantEvent } from '@stablepay/merchants-domain';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { MerchantSettingsProjection } from './merchant-settings.projection';
import {
  AddSettlementAddressChangedAt1795622400500,
  CreateSettlementAddressHistory1795708800000,
  DropSettlementAddressChangedAt1795881600000,
  MERCHANTS_MIGRATIONS,
} from './migrations';
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

  /** Messages of another merchant's stream: its creation at 10:00 and its settlement address changes. */
  const streamOf = (id: string) => {
    const on = (revision: number, event: MerchantEvent): BusMessage => ({
      ...message(revision, event),
      id: `${id}-${revision}`,
      key: `merchant-${id}`,
    });
    return {
      created: on(0, {
        type: 'MerchantCreated.v1',
        data: {
          merchantId: id,
          name: `${id} Co`,
          mode: 'test',
          settlementMode: 'fiat',
          apiKeyHash: `hash-${id}`,
          apiKeyHint: 'hint',
          createdAt: at(0),
        },
      }),
      change: (revision: number, settlementAddress: string, minute: number) =>
        on(revision, {
          type: 'SettlementAddressChanged.v1',
          data: { settlementAddress, changedAt: at(minute) },
        }),
    };
  };

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

  it('follows the stream, not changedAt: a change appended after another with an earlier or equal time (a command retried after losing the race keeps its time; clock skew between replicas) holds the current address', async () => {
    const other = 'mer_history_retried';
    const { created, change } = streamOf(other);
    await projection.apply(created);
    // A at 10:01; B at 10:10; then C, decided at 10:09 and appended after B; then A again at 10:09 (same time as
    // C), then B at 10:40; C redelivered late changes nothing.
    for (const m of [
      change(1, A, 1),
      change(2, B, 10),
      change(3, C, 9),
      change(3, C, 9),
      change(4, A, 9),
      change(4, A, 9),
    ])
      await projection.apply(m);

    expect(await settlementAddressAt(dataSource, other, at(30))).toMatchObject({ address: A });
    // Paying the address the settings hold now is no replaced payment.
    expect(await replacedSettlementAddressPaid(dataSource, other, at(30), A)).toBeNull();
    expect(await replacedSettlementAddressPaid(dataSource, other, at(30), C)).toMatchObject({ address: A });

    await projection.apply(change(5, B, 40));
    await projection.apply(change(3, C, 9));
    expect(await settlementAddressAt(dataSource, other, at(50))).toMatchObject({ address: B });
    expect(await replacedSettlementAddressPaid(dataSource, other, at(50), B)).toBeNull();
    const open: unknown[] = await dataSource.query(
      'SELECT 1 FROM merchant_settlement_addresses WHERE merchant_id = $1 AND valid_to IS NULL',
      [other],
    );
    expect(open).toHaveLength(1);
  });

  it("A -> B -> A: a charge that paid A inside B's interval paid a replaced address unless its block time lies within the chain clock lag before A came back", async () => {
    const other = 'mer_history_back';
    const { created, change } = streamOf(other);
    await projection.apply(created);
    // A at 10:01, B at 10:10, A again at 13:00 (CHAIN_CLOCK_LAG_SECONDS is an hour).
    for (const [revision, address, minute] of [
      [1, A, 1],
      [2, B, 10],
      [3, A, 180],
    ] as const)
      await projection.apply(change(revision, address, minute));
    const paid = (minute: number, paidTo: string) =>
      replacedSettlementAddressPaid(dataSource, other, at(minute), paidTo);
    // A late re-scan after the switch back: A was replaced by B at 10:30, two and a half hours before A came back.
    expect(await paid(30, A)).toEqual({ address: B, validFrom: at(10) });
    // Within the lag before the change back, the block's clock may be behind it.
    expect(await paid(150, A)).toBeNull();
    // The address that replaced A, paid with a block time just before B's change.
    expect(await paid(9, B)).toBeNull();
    expect(await paid(200, A)).toBeNull();
  });

  const migrate = async (...steps: Array<(runner: QueryRunner) => Promise<void>>) => {
    const runner = dataSource.createQueryRunner();
    try {
      for (const step of steps) await step(runner);
    } finally {
      await runner.release();
    }
  };
  const history = new CreateSettlementAddressHistory1795708800000();
  const changedAtColumn = new AddSettlementAddressChangedAt1795622400500();
  const dropChangedAt = new DropSettlementAddressChangedAt1795881600000();
  const hasChangedAtColumn = async () =>
    (
      (await dataSource.query(
        `SELECT 1 FROM information_schema.columns
          WHERE table_name = 'merchant_settings' AND column_name = 'settlement_address_changed_at'`,
      )) as unknown[]
    ).length > 0;

  it('merchant_settings keeps no settlement_address_changed_at: the open history row says when the address held now took over', async () => {
    expect(await hasChangedAtColumn()).toBe(false);
    const open: Array<{ valid_from: Date }> = await dataSource.query(
      'SELECT valid_from FROM merchant_settlement_addresses WHERE merchant_id = $1 AND valid_to IS NULL',
      [merchantId],
    );
    expect(open.map((r) => new Date(r.valid_from).toISOString())).toEqual([at(20)]);
  });

  it('after the drop, the earlier migrations run again (replicas starting together) without failing or bringing the column back', async () => {
    // A settings change after the last address change: the dropped column's own backfill (updated_at) would now
    // start a second open address at 10:30.
    await projection.apply(
      message(4, { type: 'MerchantProfileUpdated.v1', data: { displayName: 'History', updatedAt: at(30) } }),
    );
    const before: unknown[] = await dataSource.query(
      'SELECT * FROM merchant_settlement_addresses ORDER BY merchant_id, valid_from',
    );
    await migrate(
      (q) => changedAtColumn.up(q),
      (q) => history.up(q),
      (q) => dropChangedAt.up(q),
    );
    expect(await hasChangedAtColumn()).toBe(false);
    expect(
      await dataSource.query('SELECT * FROM merchant_settlement_addresses ORDER BY merchant_id, valid_from'),
    ).toEqual(before);
  });

  // Last two: they create the table again.
  it("the migration starts an existing merchant's history at its last change (earlier addresses are not known)", async () => {
    // The column as it was before the drop (its down puts it back from the open rows), the table not there yet.
    await migrate((q) => dropChangedAt.down(q));
    await dataSource.query('DROP TABLE merchant_settlement_addresses');
    await migrate((q) => history.up(q));
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
    await migrate(
      (q) => history.up(q),
      (q) => dropChangedAt.up(q),
    );
    expect(await dataSource.query('SELECT * FROM merchant_settlement_addresses ORDER BY valid_from')).toEqual(
      before,
    );
    expect(await hasChangedAtColumn()).toBe(false);
  });
});
