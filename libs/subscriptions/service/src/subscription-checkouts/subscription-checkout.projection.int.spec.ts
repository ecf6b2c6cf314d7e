import type { DataSource } from 'typeorm';
import { openDataSource } from '@stablepay/database';
import type { Projections } from '@stablepay/aggregate';
import { type ProjectionDefinition, toBusMessage } from '@stablepay/event-bus';
import {
  createPostgresEventStore,
  type EventStore,
  type RecordedEvent,
  UpcasterRegistry,
  withUpcasters,
} from '@stablepay/event-store';
import {
  decideSubscriptionCheckout,
  foldSubscriptionCheckout,
  SUBSCRIPTION_CHECKOUT_UPCASTERS,
  type SubscriptionCheckoutEvent,
  subscriptionCheckoutObject,
  V1_CANCELLED,
  V1_CREATED,
} from '@stablepay/subscriptions-domain';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { SUBSCRIPTIONS_MIGRATIONS } from '../migrations';
import { SubscriptionCheckoutChanges } from './changes';
import { createdCheckoutEvents } from './checkout.test-fixtures';
import { SubscriptionCheckoutProjection } from './subscription-checkout.projection';
import { SubscriptionCheckoutReader } from './subscription-checkout.reader';
import { subscriptionCheckoutWebhook, subscriptionCheckoutWebhookObject } from './webhook-object';

const now = new Date('2026-06-01T10:00:00.000Z');
const ID = 'schk_01jxyzexample0000000000000';

function events(id = ID): SubscriptionCheckoutEvent[] {
  const created = createdCheckoutEvents(
    id,
    `0x${'ab'.repeat(32)}`,
    { price: '100', price_currency: 'ARS', metadata: { plan_name: 'Pro' } },
    now,
  );
  return [
    ...created,
    ...decideSubscriptionCheckout(
      { type: 'CancelSubscriptionCheckout', by: 'customer', now },
      foldSubscriptionCheckout(created),
    ),
  ];
}

describe('subscription checkout projection (facts -> the object, idempotent by stream revision)', () => {
  let db: TestDatabase;
  let dataSource: DataSource;
  let raw: EventStore;
  let store: EventStore;
  let projection: SubscriptionCheckoutProjection;
  let reader: SubscriptionCheckoutReader;
  let changes: SubscriptionCheckoutChanges;

  beforeAll(async () => {
    db = await createTestDatabase();
    dataSource = await openDataSource({ url: db.url, migrations: SUBSCRIPTIONS_MIGRATIONS });
    raw = await createPostgresEventStore({ url: db.url, poolSize: 2 });
    store = withUpcasters(raw, new UpcasterRegistry(SUBSCRIPTION_CHECKOUT_UPCASTERS));
    changes = new SubscriptionCheckoutChanges();
    projection = new SubscriptionCheckoutProjection(dataSource, {} as Projections, changes, store);
    reader = new SubscriptionCheckoutReader(dataSource, changes);
  });

  afterAll(async () => {
    await raw?.close();
    await dataSource?.destroy();
    await db?.drop();
  });

  const append = async (streamId: string, stored: ReadonlyArray<{ type: string; data: unknown }>) => {
    await raw.appendToStream(
      streamId,
      stored.map((event, i) => ({
        id: `${streamId}:${i}`,
        ...event,
        metadata: { merchantId: 'mer_1', mode: 'test' },
      })),
    );
    return store.readStream(streamId);
  };

  it('projects each event once as the object of the state it folds to; redelivered and older events change nothing', async () => {
    const recorded = await append(`subscriptionCheckout-${ID}`, events());
    const [created, cancelled] = recorded.map(toBusMessage);
    if (!created || !cancelled) throw new Error('events missing');
    await projection.apply(created);
    expect(await reader.find(ID)).toMatchObject({
      status: 'pending',
      merchant_id: 'mer_1',
      mode: 'test',
      revision: 0,
    });
    await projection.apply(cancelled);
    await projection.apply(cancelled);
    await projection.apply(created);
    const row = await reader.find(ID);
    expect(row).toMatchObject({ status: 'cancelled', revision: 1 });
    const { checkout } = foldSubscriptionCheckout(recorded as unknown as SubscriptionCheckoutEvent[]);
    if (!row || !checkout) throw new Error('row missing');
    expect(row.object).toEqual(subscriptionCheckoutObject(checkout));
    expect(row.object).toMatchObject({
      status: 'cancelled',
      cancellation_reason: 'customer_dismissed',
      cancelled_at: now.toISOString(),
      metadata: { plan_name: 'Pro' },
    });
    expect(await reader.dueForExpiry(new Date('2030-01-01T00:00:00Z'), 10)).toEqual([]);
  });

  it('with the projection in this process, a command waiting for its revision gets the committed row without reading it', async () => {
    const id = 'schk_01jxyzexample0000000000001';
    const [created, cancelled] = (await append(`subscriptionCheckout-${id}`, events(id))).map(toBusMessage);
    if (!created || !cancelled) throw new Error('events missing');
    changes.projecting = true;
    const find = jest.spyOn(reader, 'find');
    try {
      // Waiting before the projection commits: woken with the row.
      const waiting = reader.getAtLeast(id, 0, { appended: true });
      await projection.apply(created);
      expect(await waiting).toMatchObject({ id, status: 'pending', revision: 0, merchant_id: 'mer_1' });
      // Arriving after the commit (the answer came back later than the projection): the remembered row.
      await projection.apply(cancelled);
      const row = await reader.getAtLeast(id, 1, { appended: true });
      expect(row).toMatchObject({ id, status: 'cancelled', revision: 1 });
      expect(find).not.toHaveBeenCalled();
      // The row handed over is the stored one.
      expect(row).toEqual(await reader.find(id));
    } finally {
      changes.projecting = false;
      find.mockRestore();
    }
  });

  it('applies a batch as it applies its messages one by one: the creations in one insert, in log order', async () => {
    // The definition the projection hands the runner (the runner itself is tested in the platform).
    let definition: ProjectionDefinition | undefined;
    const capturing = {
      start: async (d: ProjectionDefinition) => {
        definition = d;
        return undefined;
      },
      stop: async () => undefined,
    } as unknown as Projections;
    const batched = new SubscriptionCheckoutProjection(dataSource, capturing, changes, store);
    await batched.onApplicationBootstrap();
    const applyBatch = definition?.applyBatch;
    if (!applyBatch) throw new Error('the projection has no batch path');
    const [a, b] = ['schk_01jxyzexample0000000000002', 'schk_01jxyzexample0000000000003'];
    const [a0, a1] = (await append(`subscriptionCheckout-${a}`, events(a))).map(toBusMessage);
    const [b0] = (await append(`subscriptionCheckout-${b}`, events(b).slice(0, 1))).map(toBusMessage);
    if (!a0 || !a1 || !b0) throw new Error('events missing');
    const histories = new Map([
      [a0.id, [a0]],
      [b0.id, [b0]],
      [a1.id, [a0, a1]],
    ]);
    const changed = await dataSource.transaction((em) => applyBatch(em, [a0, b0, a1], histories));
    expect(changed.map((m) => m.id)).toEqual([a0.id, b0.id, a1.id]);
    const rowA = await reader.find(a);
    const rowB = await reader.find(b);
    expect(rowA).toMatchObject({ status: 'cancelled', revision: 1, merchant_id: 'mer_1', mode: 'test' });
    expect(rowB).toMatchObject({ status: 'pending', revision: 0, merchant_id: 'mer_1', mode: 'test' });
    const { checkout } = foldSubscriptionCheckout(
      (await store.readStream(`subscriptionCheckout-${a}`)) as unknown as SubscriptionCheckoutEvent[],
    );
    if (!checkout) throw new Error('nothing folded');
    expect(rowA?.object).toEqual(subscriptionCheckoutObject(checkout));
    expect(Number(rowA?.seq)).toBeLessThan(Number(rowB?.seq));
    // Redelivered: nothing changes.
    expect(await dataSource.transaction((em) => applyBatch(em, [a0, b0, a1], histories))).toEqual([]);
    expect(await reader.find(a)).toEqual(rowA);
    await batched.onApplicationShutdown();
  });

  it('a webhook shows the object as of its own event, the same on every redelivery, whatever the row holds now', () => {
    const [created, cancelled] = events();
    if (!created || !cancelled) throw new Error('events missing');
    const asOfCreated = subscriptionCheckoutWebhook(created, [created]);
    expect(asOfCreated).toMatchObject({
      type: 'subscription_checkout.created',
      data: { object: { status: 'pending', cancelled_at: null, metadata: { plan_name: 'Pro' } } },
    });
    expect(asOfCreated?.data.object).not.toHaveProperty('subscription_options');
    expect(subscriptionCheckoutWebhook(created, [created])).toEqual(asOfCreated);
    expect(subscriptionCheckoutWebhook(cancelled, [created, cancelled])).toMatchObject({
      type: 'subscription_checkout.cancelled',
      data: { object: { status: 'cancelled', cancellation_reason: 'customer_dismissed' } },
    });
    expect(() => subscriptionCheckoutWebhook(cancelled, [created])).toThrow('must end with that event');
    expect(subscriptionCheckoutWebhook({ type: 'SomethingElse.v1', data: {} }, [])).toBeNull();
  });

  it('a stream stored in the v1 snapshot shape projects to the very object v1 stored', async () => {
    const oldId = V1_CREATED.data.object.id;
    const recorded: RecordedEvent[] = await append(`subscriptionCheckout-${oldId}`, [
      V1_CREATED,
      V1_CANCELLED,
    ]);
    expect(recorded.map((e) => e.type)).toEqual([
      'SubscriptionCheckoutCreated.v2',
      'SubscriptionCheckoutCancelled.v2',
    ]);
    for (const message of recorded.map(toBusMessage)) await projection.apply(message);
    const row = await reader.find(oldId);
    if (!row) throw new Error('row missing');
    expect(row.object).toEqual(V1_CANCELLED.data.object);
    expect(subscriptionCheckoutWebhookObject(row)).toEqual(V1_CANCELLED.data.object);
  });
});
