import type { DataSource } from 'typeorm';
import type { Projections } from '@stablepay/aggregate';
import { openDataSource } from '@stablepay/database';
import { type BusMessage, type ProjectionDefinition, toBusMessage } from '@stablepay/event-bus';
import { InMemoryEventStore } from '@stablepay/event-store';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { SUBSCRIPTIONS_MIGRATIONS } from '../migrations';
import { SubscriptionChanges } from './changes';
import { SubscriptionProjection } from './subscription.projection';
import { SubscriptionReader } from './subscription.reader';
import { chargeLog, subscriptionStream } from './subscription.test-fixtures';

describe('subscription projection: a batch in one statement (PGlite and Postgres)', () => {
  let database: TestDatabase;
  let dataSource: DataSource;
  const store = new InMemoryEventStore();
  const changes = new SubscriptionChanges();
  let reader: SubscriptionReader;
  let definition: ProjectionDefinition | undefined;
  const projection = () =>
    new SubscriptionProjection(
      dataSource,
      {
        start: async (d: ProjectionDefinition) => {
          definition = d;
          return undefined;
        },
        stop: async () => undefined,
      } as unknown as Projections,
      changes,
    );

  beforeAll(async () => {
    database = await createTestDatabase();
    dataSource = await openDataSource({ url: database.url, migrations: [...SUBSCRIPTIONS_MIGRATIONS] });
    reader = new SubscriptionReader(dataSource, changes);
    await projection().onApplicationBootstrap();
  });

  afterAll(async () => {
    await dataSource?.destroy();
    await database?.drop();
  });

  const [a, b] = [`0x${'a1'.repeat(32)}`, `0x${'b1'.repeat(32)}`];
  const historiesOf = (messages: readonly BusMessage[]) =>
    new Map(messages.map((m) => [m.id, messages.filter((h) => h.key === m.key && h.revision <= m.revision)]));
  const rowsNow = async () =>
    Promise.all([a, b].map(async (id) => ({ ...(await reader.find(id)), seq: undefined })));

  it('writes what applying its messages one by one writes, one row per stream, and announces the newest row of each', async () => {
    const charged = (nonce: number) => ({
      type: 'RecordChargeSucceeded' as const,
      charge: chargeLog(nonce, 300 + nonce),
      writtenBy: 'api' as const,
    });
    const [a0, a1, a2] = (await subscriptionStream(store, a, [charged(1), charged(2)])).map(toBusMessage);
    const [b0] = (await subscriptionStream(store, b, [])).map(toBusMessage);
    if (!a0 || !a1 || !a2 || !b0) throw new Error('events missing');
    const batch = [a0, b0, a1, a2];
    const histories = historiesOf(batch);
    const { apply, batchStatement } = definition ?? {};
    if (!apply || !batchStatement) throw new Error('the projection has no one-statement batch');

    for (const message of batch)
      await dataSource.transaction((em) => apply(em, message, histories.get(message.id)));
    const oneByOne = await rowsNow();
    expect(oneByOne.map((r) => r.revision)).toEqual([2, 0]);
    await dataSource.query('DELETE FROM subscriptions');

    const statement = batchStatement(batch, histories);
    if (!statement) throw new Error('no statement for a batch of known events');
    const changed = statement.changed(await dataSource.query(statement.sql, [...statement.params]));
    expect(changed.map((m) => m.id)).toEqual([a2.id, b0.id]);
    expect(await rowsNow()).toEqual(oneByOne);
    const [rowA, rowB] = [await reader.find(a), await reader.find(b)];
    // Created in log order, as one by one: a's row before b's.
    expect(Number(rowA?.seq)).toBeLessThan(Number(rowB?.seq));
    for (const message of changed)
      changes.committed(message.id, message.key.slice('subscription-'.length), message.revision);
    expect(changes.latest(a)).toMatchObject({ revision: 2 });

    // Redelivered: nothing changes, nothing is announced.
    const again = batchStatement(batch, histories);
    if (!again) throw new Error('no statement for a redelivery');
    expect(again.changed(await dataSource.query(again.sql, [...again.params]))).toEqual([]);
    expect(await rowsNow()).toEqual(oneByOne);
  });

  it('leaves a batch it cannot write to the message-by-message path (an event without its owner), which parks its stream', async () => {
    const [c0] = (await subscriptionStream(store, `0x${'c1'.repeat(32)}`, [])).map(toBusMessage);
    if (!c0) throw new Error('event missing');
    const ownerless = { ...c0, metadata: {} };
    expect(definition?.batchStatement?.([ownerless], historiesOf([ownerless]))).toBeUndefined();
  });
});
