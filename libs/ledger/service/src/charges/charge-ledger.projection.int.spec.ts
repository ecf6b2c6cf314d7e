import type { DataSource } from 'typeorm';
import type { Projections } from '@stablepay/aggregate';
import { handleCommand } from '@stablepay/aggregate';
import { openDataSource } from '@stablepay/database';
import { toBusMessage } from '@stablepay/event-bus';
import { createPostgresEventStore, type EventStore } from '@stablepay/event-store';
import { type ChargeFacts, chargeStreamId } from '@stablepay/ledger-domain';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { LEDGER_MIGRATIONS } from '../migrations';
import { ChargeLedgerChanges, ChargeRecords } from './changes';
import { chargeDecider } from './charge-ledger.commands';
import { ChargeLedgerProjection } from './charge-ledger.projection';
import { ChargeLedgerReader } from './charge-ledger.reader';

const now = new Date('2026-06-01T10:00:00.000Z');
const metadata = { merchantId: 'mer_1', mode: 'test' as const, occurredAt: now.toISOString() };
const charge = (id: string, nonce: number): ChargeFacts => ({
  chargeId: id,
  subscriptionId: `0x${'5A'.repeat(32)}`,
  subscriber: '0x1111111111111111111111111111111111111111',
  chain: 'eip155:8453',
  nonce,
  amount: '2000000',
  fee: '1200',
  txHash: `0x${String(nonce).padStart(64, '7')}`,
  blockNumber: '1234',
  chargedAt: '2026-06-01T09:59:58.000Z',
  status: 'succeeded',
  failureReason: null,
});
const fiatSettled = { price: '150000', priceCurrency: 'ARS', settlement: 'fiat' as const };

describe('charge ledger projection (the ledger sequence is taken at the first write and kept)', () => {
  let db: TestDatabase;
  let dataSource: DataSource;
  let store: EventStore;
  let projection: ChargeLedgerProjection;
  let reader: ChargeLedgerReader;

  const projectStream = async (id: string) => {
    for (const e of await store.readStream(chargeStreamId(id))) await projection.apply(toBusMessage(e));
  };
  const record = (id: string, nonce: number) =>
    handleCommand(
      store,
      chargeStreamId(id),
      chargeDecider,
      { type: 'RecordCharge', charge: charge(id, nonce), writtenBy: 'api', fiatContext: fiatSettled, now },
      { metadata },
    );

  beforeAll(async () => {
    db = await createTestDatabase();
    dataSource = await openDataSource({ url: db.url, migrations: LEDGER_MIGRATIONS });
    store = await createPostgresEventStore({ url: db.url, poolSize: 2 });
    const changes = new ChargeLedgerChanges();
    projection = new ChargeLedgerProjection(dataSource, {} as Projections, changes, store);
    reader = new ChargeLedgerReader(dataSource, changes, new ChargeRecords(), store);
  });

  afterAll(async () => {
    await store?.close();
    await dataSource?.destroy();
    await db?.drop();
  });

  it('updates a row in place on a settlement event without moving it in the list', async () => {
    await record('subc_first', 1);
    await projectStream('subc_first');
    await record('subc_second', 2);
    await projectStream('subc_second');
    const before = await reader.find('subc_first');
    await handleCommand(
      store,
      chargeStreamId('subc_first'),
      chargeDecider,
      { type: 'CompleteSettlement', now },
      { metadata },
    );
    await projectStream('subc_first');
    const after = await reader.getAtLeast('subc_first', 1);
    expect(after.seq).toBe(before?.seq);
    expect(after.object.settlement_status).toBe('completed');
    const page = await reader.list({ merchantId: 'mer_1', mode: 'test' }, { limit: 10 }, {});
    expect(page.rows.map((r) => r.id)).toEqual(['subc_second', 'subc_first']);
  });

  it('applies a redelivered event once (idempotent by stream revision)', async () => {
    const [first] = await store.readStream(chargeStreamId('subc_first'));
    if (!first) throw new Error('no event');
    await projection.apply(toBusMessage(first));
    expect((await reader.find('subc_first'))?.object.settlement_status).toBe('completed');
  });

  it('reads a recorded charge as the object the projection lists for its stream (the charge answer)', async () => {
    for (const id of ['subc_first', 'subc_second']) {
      const recorded = await reader.recorded(id);
      const row = await reader.find(id);
      expect(recorded.revision).toBe(row?.revision);
      expect(recorded.object).toEqual(row?.object);
    }
  });

  it('lists every charge of a transaction that charged several (a batch the merchant wallet sent), each once', async () => {
    const batch = `0x${'b'.repeat(64)}`;
    for (const [id, nonce] of [
      ['subc_batch_a', 7],
      ['subc_batch_b', 8],
    ] as const) {
      await handleCommand(
        store,
        chargeStreamId(id),
        chargeDecider,
        {
          type: 'RecordCharge',
          charge: { ...charge(id, nonce), txHash: batch },
          writtenBy: 'indexer',
          fiatContext: null,
          now,
        },
        { metadata },
      );
      await projectStream(id);
    }
    const page = await reader.list({ merchantId: 'mer_1', mode: 'test' }, { limit: 10 }, {});
    expect(page.rows.filter((r) => r.object.tx_hash === batch).map((r) => [r.id, r.object.amount])).toEqual([
      ['subc_batch_b', '2000000'],
      ['subc_batch_a', '2000000'],
    ]);
  });

  it("lists nothing of another merchant's mode", async () => {
    expect((await reader.list({ merchantId: 'mer_1', mode: 'live' }, { limit: 10 }, {})).rows).toEqual([]);
  });
});
