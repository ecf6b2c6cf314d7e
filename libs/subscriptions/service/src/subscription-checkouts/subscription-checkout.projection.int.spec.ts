import type { DataSource } from 'typeorm';
import { openDataSource } from '@stablepay/database';
import type { BusMessage } from '@stablepay/event-bus';
import type { Projections } from '@stablepay/aggregate';
import {
  decideSubscriptionCheckout,
  evolveSubscriptionCheckout,
  initialSubscriptionCheckoutState,
  type SubscriptionCheckoutEvent,
} from '@stablepay/subscriptions-domain';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { SUBSCRIPTIONS_MIGRATIONS } from '../migrations';
import { SubscriptionCheckoutChanges } from './changes';
import { SubscriptionCheckoutProjection } from './subscription-checkout.projection';
import { SubscriptionCheckoutReader } from './subscription-checkout.reader';
import { subscriptionCheckoutWebhook, subscriptionCheckoutWebhookObject } from './webhook-object';

const now = new Date('2026-06-01T10:00:00.000Z');
const ID = 'schk_01jxyzexample0000000000000';

function events(): SubscriptionCheckoutEvent[] {
  const created = decideSubscriptionCheckout(
    {
      type: 'CreateSubscriptionCheckout',
      id: ID,
      onchainId: `0x${'ab'.repeat(32)}`,
      businessName: 'Acme',
      checkoutUrl: `https://pay.example/subscribe/${ID}`,
      input: { price: '100', price_currency: 'ARS', metadata: { plan_name: 'Pro' } },
      context: {
        availableChains: [{ caip2: 'eip155:8453', tokenSymbols: ['USDC'] }],
        quotedTokenSymbols: ['USDC'],
        settlement: { mode: 'crypto' },
      },
      now,
    },
    initialSubscriptionCheckoutState(),
  );
  const state = created.reduce(evolveSubscriptionCheckout, initialSubscriptionCheckoutState());
  return [
    ...created,
    ...decideSubscriptionCheckout({ type: 'CancelSubscriptionCheckout', by: 'customer', now }, state),
  ];
}

const message = (event: SubscriptionCheckoutEvent, revision: number): BusMessage => ({
  id: `evt-${revision}`,
  topic: 'subscriptions.subscription-checkout.v1',
  key: `subscriptionCheckout-${ID}`,
  type: event.type,
  data: event.data,
  metadata: { merchantId: 'mer_1', mode: 'test' },
  revision,
  recordedAt: now.toISOString(),
});

describe('subscription checkout projection (idempotent by stream revision)', () => {
  let db: TestDatabase;
  let dataSource: DataSource;
  let projection: SubscriptionCheckoutProjection;
  let reader: SubscriptionCheckoutReader;

  beforeAll(async () => {
    db = await createTestDatabase();
    dataSource = await openDataSource({ url: db.url, migrations: SUBSCRIPTIONS_MIGRATIONS });
    const changes = new SubscriptionCheckoutChanges();
    projection = new SubscriptionCheckoutProjection(dataSource, {} as Projections, changes);
    reader = new SubscriptionCheckoutReader(dataSource, changes);
  });

  afterAll(async () => {
    await dataSource?.destroy();
    await db?.drop();
  });

  it('projects each event once; redelivered and older events change nothing', async () => {
    const [created, cancelled] = events();
    if (!created || !cancelled) throw new Error('events missing');
    await projection.apply(message(created, 0));
    expect(await reader.find(ID)).toMatchObject({
      status: 'pending',
      merchant_id: 'mer_1',
      mode: 'test',
      revision: 0,
    });
    await projection.apply(message(cancelled, 1));
    await projection.apply(message(cancelled, 1));
    await projection.apply(message(created, 0));
    const row = await reader.find(ID);
    expect(row).toMatchObject({ status: 'cancelled', revision: 1 });
    expect(row?.object).toEqual(cancelled.data.object);
    // The webhook object is the same from the row and from the event; metadata echoed, no options.
    if (!row) throw new Error('row missing');
    expect(subscriptionCheckoutWebhookObject(row)).toEqual(subscriptionCheckoutWebhookObject(cancelled));
    expect(subscriptionCheckoutWebhook(cancelled)).toEqual({
      type: 'subscription_checkout.cancelled',
      data: {
        object: expect.objectContaining({
          status: 'cancelled',
          cancellation_reason: 'customer_dismissed',
          metadata: { plan_name: 'Pro' },
        }),
      },
    });
    expect(subscriptionCheckoutWebhook({ type: 'SomethingElse.v1', data: {} })).toBeNull();
    expect(await reader.dueForExpiry(new Date('2030-01-01T00:00:00Z'), 10)).toEqual([]);
  });
});
