import type { DataSource } from 'typeorm';
import { openDataSource } from '@stablepay/database';
import { toBusMessage } from '@stablepay/event-bus';
import { InMemoryEventStore } from '@stablepay/event-store';
import type { SubscriptionCommand } from '@stablepay/subscriptions-domain';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { SUBSCRIPTIONS_MIGRATIONS } from '../migrations';
import { ChainObservationLog } from './chain-facts';
import { ChargeReceiptsConsumer } from './charge-receipts.consumer';
import { CHAIN, chargeLog, subscriptionStream, tx } from './subscription.test-fixtures';

const MANAGER = '0x1111111111111111111111111111111111111111';
const BLOCK = `0x${'ab'.repeat(32)}`;

describe('ChargeReceiptsConsumer: the receipt check row follows from the charge fact (PGlite and Postgres)', () => {
  let database: TestDatabase;
  let dataSource: DataSource;
  let log: ChainObservationLog;
  const store = new InMemoryEventStore();
  let consumer: ChargeReceiptsConsumer;

  beforeAll(async () => {
    database = await createTestDatabase();
    dataSource = await openDataSource({ url: database.url, migrations: [...SUBSCRIPTIONS_MIGRATIONS] });
    log = new ChainObservationLog(dataSource);
    consumer = new ChargeReceiptsConsumer({} as never, store, log);
  });

  afterAll(async () => {
    await dataSource?.destroy();
    await database?.drop();
  });

  /** The stream's events as the bus delivers them. */
  const delivered = async (subscriptionId: string, commands: readonly SubscriptionCommand[]) =>
    (await subscriptionStream(store, subscriptionId, commands)).map(toBusMessage);

  const rowsOf = async (txHash: string) => (await log.openReceipts(100)).filter((r) => r.tx_hash === txHash);

  it("writes the charge call's receipt as an open row of its block, once however often it is delivered", async () => {
    const subscriptionId = `0x${'c1'.repeat(32)}`;
    const messages = await delivered(subscriptionId, [
      {
        type: 'RecordChargeSucceeded',
        charge: chargeLog(1, 101, { manager: MANAGER, blockHash: BLOCK, logIndex: 3 }),
        writtenBy: 'api',
      },
    ]);
    for (const message of [...messages, ...messages]) await consumer.handle(message);
    expect(await rowsOf(tx(101))).toEqual([
      expect.objectContaining({
        observation_id: `receipt:${CHAIN}:${tx(101)}:3:${BLOCK}`,
        chain: CHAIN,
        contract: MANAGER,
        event: 'SubscriptionCharged',
        subscription_id: subscriptionId,
        args: expect.objectContaining({ nonce: '1', subscriptionId }),
        block_number: '42',
        block_hash: BLOCK,
        written_by: 'api',
      }),
    ]);
  });

  it("writes nothing for a charge fact without a receipt (one recorded before the field existed, the indexer's)", async () => {
    const subscriptionId = `0x${'c2'.repeat(32)}`;
    const messages = await delivered(subscriptionId, [
      // The shape of every charge fact before 2026-11-24: no receipt.
      { type: 'RecordChargeSucceeded', charge: chargeLog(1, 201), writtenBy: 'api' },
      { type: 'RecordChargeSucceeded', charge: chargeLog(2, 202), writtenBy: 'indexer' },
    ]);
    for (const message of messages) await consumer.handle(message);
    expect([...(await rowsOf(tx(201))), ...(await rowsOf(tx(202)))]).toEqual([]);
  });
});
