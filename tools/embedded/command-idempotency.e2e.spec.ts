import { EVENT_STORE } from '@stablepay/aggregate';
import { CommandClient } from '@stablepay/commands';
import type { EventStore } from '@stablepay/event-store';
import { generationOf, idempotencyCommandId, RELEASED_SHIFT } from '@stablepay/http';
import {
  type CreateSubscriptionCheckoutCommand,
  SUBSCRIPTION_CHECKOUT_COMMANDS,
  type SubscriptionCheckoutCommandResult,
} from '@stablepay/subscriptions-api';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { DataSource } from 'typeorm';
import { type EmbeddedStack, startEmbedded } from './embedded';

/**
 * A command retried after its answer was lost (a timeout or a 503 between the owner's append and the gateway)
 * must not apply twice: the owner derives the intent id and the event ids from the command id, which is the
 * request's Idempotency-Key. Sent through the command transport, as the gateway sends it.
 */
const ADMIN_TOKEN = 'admin-token-for-tests-0123456789';

describe('commands are idempotent across the transport', () => {
  let db: TestDatabase;
  let stack: EmbeddedStack;
  let store: EventStore;
  let client: CommandClient;
  let merchant: { merchantId: string; mode: 'test' };
  let apiKey: string;

  const send = (command: CreateSubscriptionCheckoutCommand) =>
    client.send<SubscriptionCheckoutCommandResult>(
      'subscriptions',
      SUBSCRIPTION_CHECKOUT_COMMANDS.create,
      command,
    );
  const newMerchant = async (name: string) => {
    const res = await fetch(`${stack.url}/admin/merchants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name, mode: 'test' }),
    });
    return (await res.json()) as { id: string; api_key: string };
  };
  const eventsOf = async (id: string) => (await store.readStream(`subscriptionCheckout-${id}`)).length;
  const intents = async () => (await store.readAll({ categories: ['subscriptionCheckout'] })).length;

  beforeAll(async () => {
    db = await createTestDatabase();
    stack = await startEmbedded({
      env: {
        DATABASE_URL: db.url,
        PORT: '0',
        ADMIN_TOKEN,
        LOG_LEVEL: 'error',
        STABLEPAY_LOCAL_CHAINS: 'false',
        SANDBOX_RATES: 'USD/USDC=1',
      },
      dataDir: 'memory',
    });
    const body = await newMerchant('Retry Co');
    merchant = { merchantId: body.id, mode: 'test' };
    apiKey = body.api_key;
    store = stack.service.app.get<EventStore>(EVENT_STORE);
    client = stack.service.app.get(CommandClient);
  });

  afterAll(async () => {
    await stack?.stop();
    await db?.drop();
  });

  it('the same create command sent twice (the first answer lost) makes one intent with one event', async () => {
    const before = await intents();
    const command: CreateSubscriptionCheckoutCommand = {
      commandId: 'retry-key-1',
      merchant,
      input: { price: '1000', price_currency: 'USD' },
      origin: stack.url,
    };
    const first = await send(command);
    const retried = await send(command);
    // The same intent at the same revision; only the first answer says it appended.
    expect(retried).toEqual({ ...first, appended: false });
    expect(first.appended).toBe(true);
    expect(await eventsOf(first.id)).toBe(1);
    expect((await intents()) - before).toBe(1);
    // Another command id is another intent.
    const other = await send({ ...command, commandId: 'retry-key-2' });
    expect(other.id).not.toBe(first.id);
  });

  it('a client retrying POST with its Idempotency-Key after a lost answer gets the intent the owner already made', async () => {
    const body = { price: '2500', price_currency: 'USD', external_customer_id: 'cus_42' };
    // The first attempt claimed the key in its generation and reached the owner, but the gateway never answered (it
    // timed out: 503, key released). What it left: the released row, and the intent made under the generation's id.
    const generation = generationOf(new Date());
    await stack.service.app.get(DataSource).query(
      `INSERT INTO idempotency_keys (scope, key, request_hash, state, created_at, owner, generation)
       VALUES ($1, 'client-key-7', 'hash of the first attempt', 'released',
               now() - interval '${RELEASED_SHIFT}', NULL, $2)`,
      [`${merchant.merchantId}:${merchant.mode}`, generation],
    );
    const lost = await send({
      commandId: idempotencyCommandId('client-key-7', generation),
      merchant,
      input: body,
      origin: stack.url,
    });
    const before = await intents();
    const res = await fetch(`${stack.url}/subscription-checkouts`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${apiKey}`,
        'content-type': 'application/json',
        'idempotency-key': 'client-key-7',
      },
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(201);
    expect(((await res.json()) as { id: string }).id).toBe(lost.id);
    expect(await intents()).toBe(before);
    expect(await eventsOf(lost.id)).toBe(1);
  });

  it('the same key from another merchant names another intent', async () => {
    const command: CreateSubscriptionCheckoutCommand = {
      commandId: 'shared-key',
      merchant,
      input: { price: '1000', price_currency: 'USD' },
      origin: stack.url,
    };
    const mine = await send(command);
    const otherMerchant = { merchantId: (await newMerchant('Other Co')).id, mode: 'test' as const };
    const theirs = await send({ ...command, merchant: otherMerchant });
    expect(theirs.id).not.toBe(mine.id);
    expect(await eventsOf(theirs.id)).toBe(1);
  });
});
