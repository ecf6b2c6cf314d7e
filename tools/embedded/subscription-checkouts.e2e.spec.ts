import { EVENT_BUS, type BusMessage, type BusSubscription, type EventBus } from '@stablepay/event-bus';
import { EVENT_STORE } from '@stablepay/aggregate';
import type { EventStore } from '@stablepay/event-store';
import {
  SubscriptionCheckoutCommands,
  SubscriptionCheckoutReader,
  subscriptionCheckoutWebhookObject,
} from '@stablepay/subscriptions-service';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { ManualClock } from '@stablepay/util';
import { type EmbeddedStack, startEmbedded } from './embedded';

/**
 * Subscription checkouts end to end: HTTP -> SubscriptionCheckout aggregate -> event store -> bus -> projection
 * -> HTTP, on the embedded stack (real Postgres or PGlite). Every rule of the create call, the single-use state
 * machine, the durable expiry timer, the events on the bus and the currency rules of both settlement modes.
 */
const ADMIN_TOKEN = 'admin-token-for-tests-0123456789';
const clock = new ManualClock('2026-06-01T10:00:00.000Z');
const ALL_CHAINS = ['eip155:1', 'eip155:137', 'eip155:42161', 'eip155:8453', 'eip155:10'];
const TOPIC = 'subscriptions.subscription-checkout.v1';

type Json = Record<string, unknown>;

function str(value: unknown): string {
  if (typeof value !== 'string') throw new Error(`expected a string, got ${JSON.stringify(value)}`);
  return value;
}
function arr(value: unknown): Json[] {
  if (!Array.isArray(value)) throw new Error(`expected an array, got ${JSON.stringify(value)}`);
  return value as Json[];
}

async function eventually<T>(probe: () => Promise<T | undefined>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('subscription checkouts through the HTTP API (embedded stack)', () => {
  let db: TestDatabase;
  let stack: EmbeddedStack;
  let key: string;
  let merchantId: string;
  let store: EventStore;
  const busMessages: BusMessage[] = [];
  let busSubscription: BusSubscription;

  const call = async (method: string, path: string, body?: unknown, apiKey = key) => {
    const res = await fetch(`${stack.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${apiKey}`,
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    return { status: res.status, body: text ? (JSON.parse(text) as Json) : {} };
  };
  const create = (body: unknown, apiKey = key) => call('POST', '/subscription-checkouts', body, apiKey);

  const newMerchant = async (name: string, settlementMode: 'crypto' | 'fiat' = 'crypto') => {
    const res = await fetch(`${stack.url}/admin/merchants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name, mode: 'test', settlement_mode: settlementMode }),
    });
    const body = (await res.json()) as Json;
    return { id: str(body['id']), key: str(body['api_key']) };
  };

  /** Every intent of the caller, walking all pages. */
  const allIds = async (apiKey = key): Promise<string[]> => {
    const ids: string[] = [];
    let after: string | undefined;
    for (;;) {
      const page = await call(
        'GET',
        `/subscription-checkouts?limit=100${after ? `&starting_after=${after}` : ''}`,
        undefined,
        apiKey,
      );
      const rows = arr(page.body['data']);
      ids.push(...rows.map((r) => str(r['id'])));
      if (page.body['has_more'] !== true) return ids;
      after = ids[ids.length - 1];
    }
  };
  const storedCheckoutEvents = async () =>
    (await store.readAll({ categories: ['subscriptionCheckout'] })).length;

  beforeAll(async () => {
    db = await createTestDatabase();
    stack = await startEmbedded({
      env: {
        DATABASE_URL: db.url,
        PORT: '0',
        ADMIN_TOKEN,
        LOG_LEVEL: 'error',
        STABLEPAY_LOCAL_CHAINS: 'false',
        SANDBOX_RATES: 'USD/USDC=1,USD/USDT=1.0002',
        SUBSCRIPTION_EXPIRY_POLL_MS: '100',
      },
      dataDir: 'memory',
      clock,
    });
    const merchant = await newMerchant('Acme Streaming');
    key = merchant.key;
    merchantId = merchant.id;
    store = stack.service.app.get<EventStore>(EVENT_STORE);
    busSubscription = await stack.service.app.get<EventBus>(EVENT_BUS).consume({
      group: 'test.subscription-checkout-events',
      topics: [TOPIC],
      handler: async (message) => {
        busMessages.push(message);
      },
    });
  });

  afterAll(async () => {
    await busSubscription?.stop();
    await stack?.stop();
    await db?.drop();
  });

  describe('POST /subscription-checkouts', () => {
    it('creates a pending intent with every field of the SPEC object, the SPEC defaults, the hosted link and the options', async () => {
      const res = await create({ price: '150000', price_currency: 'ARS' });
      expect(res.status).toBe(201);
      const id = str(res.body['id']);
      expect(res.body).toEqual({
        object: 'subscription_checkout',
        id: expect.stringMatching(/^schk_[0-9a-z]{26}$/),
        status: 'pending',
        onchain_id: expect.stringMatching(/^0x[0-9a-f]{64}$/),
        business_name: 'Acme Streaming',
        subscriber: null,
        external_customer_id: null,
        price: '150000',
        price_currency: 'ARS',
        period_duration: 2592000,
        cap: '1500000',
        budget: '1500000',
        checkout_url: `${stack.url}/hosted/subscribe/${id}`,
        success_url: null,
        cancel_url: null,
        return_url: null,
        metadata: {},
        supported_chains: ALL_CHAINS,
        expires_at: '2026-06-01T10:05:00.000Z',
        created_at: '2026-06-01T10:00:00.000Z',
        updated_at: '2026-06-01T10:00:00.000Z',
        completed_at: null,
        cancelled_at: null,
        expired_at: null,
        cancellation_reason: null,
        subscription_options: expect.any(Array),
        background_color: null,
        primary_color: null,
      });
      const options = arr(res.body['subscription_options']);
      // USDC and USDT on every chain but Base (USDC only): 9 options, in supported_chains order.
      expect(options.map((o) => `${str(o['chain'])} ${str(o['token_symbol'])}`)).toEqual([
        'eip155:1 USDC',
        'eip155:1 USDT',
        'eip155:137 USDC',
        'eip155:137 USDT',
        'eip155:42161 USDC',
        'eip155:42161 USDT',
        'eip155:8453 USDC',
        'eip155:10 USDC',
        'eip155:10 USDT',
      ]);
      // ARS 1,500.00 at 1,185.50 ARS per USDC: 1.2652889... USDC, rounded up to 1.265289; cap and budget at the same rate.
      expect(options[6]).toEqual({
        chain: 'eip155:8453',
        chain_name: 'Base',
        asset: 'eip155:8453/erc20:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
        token_symbol: 'USDC',
        token_decimals: 6,
        token_address: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
        price_amount: '1265289',
        cap_amount: '12652890',
        budget_amount: '12652890',
        rate: '1185.50',
        rate_currency: 'ARS',
        rate_as_of: '2026-06-01T10:00:00.000Z',
        rate_source: 'sandbox',
      });
      expect(options[1]).toMatchObject({ token_symbol: 'USDT', rate: '1186.25', price_amount: '1264489' }); // 1.2644889... rounded up
    });

    it('echoes every optional field, and the branding colors from settings', async () => {
      expect(
        (await call('PATCH', '/settings', { background_color: '#0b1f3a', primary_color: '#ffb000' })).status,
      ).toBe(200);
      const metadata = { plan_name: 'Pro', plan_description: 'Everything, monthly', internal_ref: 'abc-123' };
      const res = await create({
        price: '1999',
        price_currency: 'usd',
        cap: '2999',
        budget: '5000',
        period_duration: 3600,
        supported_chains: ['eip155:8453', 'eip155:137'],
        metadata,
        external_customer_id: 'cus_123',
        success_url: 'https://shop.example/ok?schk={SUBSCRIPTION_CHECKOUT_ID}',
        cancel_url: 'https://shop.example/cancel',
        return_url: 'https://shop.example/account',
        expires_in: 86400,
      });
      expect(res.status).toBe(201);
      expect(res.body).toMatchObject({
        price: '1999',
        price_currency: 'USD',
        cap: '2999',
        budget: '5000',
        period_duration: 3600,
        supported_chains: ['eip155:8453', 'eip155:137'],
        metadata,
        external_customer_id: 'cus_123',
        success_url: 'https://shop.example/ok?schk={SUBSCRIPTION_CHECKOUT_ID}',
        cancel_url: 'https://shop.example/cancel',
        return_url: 'https://shop.example/account',
        expires_at: '2026-06-02T10:00:00.000Z',
        background_color: '#0B1F3A',
        primary_color: '#FFB000',
      });
      // USD 19.99 at 1 USD per USDC is exactly 19.99 USDC; at 1.0002 USD per USDT it rounds up, and cap and budget
      // convert at the rate of that rounded-up price (50.00 / 19.99 x 19.986003 rounded up).
      const options = arr(res.body['subscription_options']);
      expect(
        options.map((o) => [
          o['chain'],
          o['token_symbol'],
          o['price_amount'],
          o['cap_amount'],
          o['budget_amount'],
        ]),
      ).toEqual([
        ['eip155:8453', 'USDC', '19990000', '29990000', '50000000'],
        ['eip155:137', 'USDC', '19990000', '29990000', '50000000'],
        ['eip155:137', 'USDT', '19986003', '29984004', '49990003'],
      ]);
      await call('PATCH', '/settings', { background_color: null, primary_color: null });
    });

    it('keeps tabs and line breaks in a metadata value (free text), as Stripe does', async () => {
      const metadata = { note: 'line one\r\nline two\tand a tab' };
      const res = await create({ price: '1999', price_currency: 'usd', metadata });
      expect(res.status).toBe(201);
      expect(res.body['metadata']).toEqual(metadata);
    });

    it('replays the same response for a retried Idempotency-Key and creates one intent', async () => {
      const before = await storedCheckoutEvents();
      const send = () =>
        fetch(`${stack.url}/subscription-checkouts`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${key}`,
            'content-type': 'application/json',
            'idempotency-key': 'create-once-1',
          },
          body: JSON.stringify({ price: '1000', price_currency: 'ARS' }),
        }).then(async (r) => ({
          status: r.status,
          replayed: r.headers.get('idempotent-replayed'),
          body: (await r.json()) as Json,
        }));
      const first = await send();
      const second = await send();
      expect(first.status).toBe(201);
      expect(second).toMatchObject({ status: 201, replayed: 'true' });
      expect(second.body['id']).toBe(first.body['id']);
      expect(await storedCheckoutEvents()).toBe(before + 1);
    });

    describe('refuses bad input of every kind with the envelope, the param and the code, and writes nothing', () => {
      const base = { price: '150000', price_currency: 'ARS' };
      const cases: Array<[string, unknown, Json]> = [
        ['price missing', { price_currency: 'ARS' }, { type: 'validation_error', param: 'price' }],
        ['price as a number', { ...base, price: 150000 }, { type: 'validation_error', param: 'price' }],
        [
          'price with a decimal point',
          { ...base, price: '1500.00' },
          { type: 'validation_error', param: 'price' },
        ],
        ['price with a sign', { ...base, price: '-150000' }, { type: 'validation_error', param: 'price' }],
        [
          'price with a separator',
          { ...base, price: '150,000' },
          { type: 'validation_error', param: 'price' },
        ],
        ['price zero', { ...base, price: '0' }, { type: 'validation_error', param: 'price' }],
        [
          'price with a leading zero',
          { ...base, price: '0150000' },
          { type: 'validation_error', param: 'price' },
        ],
        [
          'price_currency missing',
          { price: '150000' },
          { type: 'validation_error', param: 'price_currency' },
        ],
        [
          'price_currency malformed',
          { ...base, price_currency: 'PESO' },
          { type: 'validation_error', param: 'price_currency' },
        ],
        ['cap below price', { ...base, cap: '149999' }, { type: 'validation_error', param: 'cap' }],
        [
          'cap above budget',
          { ...base, cap: '300001', budget: '300000' },
          { type: 'validation_error', param: 'cap' },
        ],
        [
          'cap above the default budget',
          { ...base, cap: '1500001' },
          { type: 'validation_error', param: 'cap' },
        ],
        ['budget below price', { ...base, budget: '149999' }, { type: 'validation_error', param: 'budget' }],
        ['budget not digits', { ...base, budget: '1e6' }, { type: 'validation_error', param: 'budget' }],
        [
          'period_duration below 3600',
          { ...base, period_duration: 3599 },
          { type: 'validation_error', param: 'period_duration' },
        ],
        [
          'period_duration as a string',
          { ...base, period_duration: '3600' },
          { type: 'validation_error', param: 'period_duration' },
        ],
        [
          'period_duration fractional',
          { ...base, period_duration: 3600.5 },
          { type: 'validation_error', param: 'period_duration' },
        ],
        [
          'supported_chains not an array',
          { ...base, supported_chains: 'eip155:1' },
          { type: 'validation_error', param: 'supported_chains' },
        ],
        [
          'supported_chains empty',
          { ...base, supported_chains: [] },
          { type: 'validation_error', param: 'supported_chains' },
        ],
        [
          'supported_chains with a number',
          { ...base, supported_chains: [1] },
          { type: 'validation_error', param: 'supported_chains' },
        ],
        [
          'a non-EVM chain',
          { ...base, supported_chains: ['solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp'] },
          { param: 'supported_chains', code: 'unsupported_chain_namespace' },
        ],
        [
          'an unsupported EVM chain',
          { ...base, supported_chains: ['eip155:56'] },
          { param: 'supported_chains', code: 'unsupported_chain' },
        ],
        [
          'a malformed chain',
          { ...base, supported_chains: ['base'] },
          { param: 'supported_chains', code: 'invalid_caip2' },
        ],
        [
          'a duplicated chain',
          { ...base, supported_chains: ['eip155:1', 'eip155:1'] },
          { param: 'supported_chains', code: 'duplicate_chain' },
        ],
        [
          'metadata value over 500 characters',
          { ...base, metadata: { plan_name: 'x'.repeat(501) } },
          { type: 'validation_error', param: 'metadata[plan_name]' },
        ],
        [
          'metadata value not a string',
          { ...base, metadata: { seats: 5 } },
          { type: 'validation_error', param: 'metadata[seats]' },
        ],
        [
          'metadata not an object',
          { ...base, metadata: 'gold' },
          { type: 'validation_error', param: 'metadata' },
        ],
        [
          'metadata with too many keys',
          { ...base, metadata: Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, 'v'])) },
          { param: 'metadata' },
        ],
        [
          'expires_in over 24 hours',
          { ...base, expires_in: 86401 },
          { type: 'validation_error', param: 'expires_in' },
        ],
        [
          'expires_in under a minute',
          { ...base, expires_in: 30 },
          { type: 'validation_error', param: 'expires_in' },
        ],
        [
          'expires_in as a string',
          { ...base, expires_in: '300' },
          { type: 'validation_error', param: 'expires_in' },
        ],
        [
          'success_url not a URL',
          { ...base, success_url: 'thanks' },
          { type: 'validation_error', param: 'success_url' },
        ],
        [
          'cancel_url with a script scheme',
          { ...base, cancel_url: 'javascript:alert(1)' },
          { type: 'validation_error', param: 'cancel_url' },
        ],
        [
          'return_url not a string',
          { ...base, return_url: 42 },
          { type: 'validation_error', param: 'return_url' },
        ],
        [
          'external_customer_id empty',
          { ...base, external_customer_id: '' },
          { type: 'validation_error', param: 'external_customer_id' },
        ],
        [
          'external_customer_id of invisible characters only',
          { ...base, external_customer_id: '\u202E\u200B\uFEFF ' },
          { type: 'validation_error', param: 'external_customer_id' },
        ],
        [
          'external_customer_id holding a right-to-left override',
          { ...base, external_customer_id: 'cus_\u202E42' },
          { type: 'validation_error', param: 'external_customer_id' },
        ],
        // Control characters (C0, DEL, C1) in an identifier: before, stored as sent.
        ...(
          [
            ['an escape sequence', 'cus_\u001b[31m42'],
            ['a tab', 'cus\t42'],
            ['a line feed', 'cus_42\n'],
            ['a C1 control (NEL)', 'cus_\u008542'],
            ['DEL', 'cus_42\u007f'],
          ] as const
        ).map(([what, id]): [string, unknown, Json] => [
          `external_customer_id holding ${what}`,
          { ...base, external_customer_id: id },
          { type: 'validation_error', code: 'invalid_string', param: 'external_customer_id' },
        ]),
        [
          'a metadata key holding a control character',
          { ...base, metadata: { 'ref\u0007': 'x' } },
          { type: 'validation_error', code: 'invalid_string', param: 'metadata' },
        ],
        [
          'a metadata value holding a control character other than tab and line breaks',
          { ...base, metadata: { note: 'ring \u0007 bell' } },
          { type: 'validation_error', code: 'invalid_string', param: 'metadata[note]' },
        ],
        [
          'success_url holding a tab (the URL parser would drop it unseen)',
          { ...base, success_url: 'https://shop.example/o\tk' },
          { type: 'validation_error', code: 'invalid_string', param: 'success_url' },
        ],
        [
          'metadata[plan_name] (shown on the hosted page) of zero-width characters only',
          { ...base, metadata: { plan_name: '\u200B\u200D' } },
          { type: 'validation_error', param: 'metadata[plan_name]' },
        ],
        [
          'metadata[plan_description] holding a bidi isolate',
          { ...base, metadata: { plan_description: 'Monthly \u2067plan\u2069' } },
          { type: 'validation_error', param: 'metadata[plan_description]' },
        ],
        ['an unknown field', { ...base, interval: 'month' }, { type: 'validation_error', param: 'interval' }],
        ['a body that is not an object', '[1,2]', { type: 'invalid_request', code: 'invalid_json' }],
        ['malformed JSON', '{"price": ', { type: 'invalid_request', code: 'invalid_json' }],
      ];

      it.each(cases)('%s', async (_name, body, error) => {
        const idsBefore = await allIds();
        const eventsBefore = await storedCheckoutEvents();
        const res = await create(body);
        expect(res.status).toBe(400);
        expect(res.body).toEqual({
          error: expect.objectContaining({ ...error, message: expect.any(String) }),
        });
        expect(await allIds()).toEqual(idsBefore);
        expect(await storedCheckoutEvents()).toBe(eventsBefore);
      });

      it('answers a NUL and a line separator in one field alike: 400 validation_error, its param, code invalid_string', async () => {
        // Before: the NUL was invalid_request invalid_string, the separator validation_error without a code.
        for (const id of ['cus_\u000042', 'cus_\u202842', 'cus_\u202942', 'cus_\ud80042']) {
          const res = await create({ ...base, external_customer_id: id });
          expect({ id, status: res.status, type: (res.body['error'] as Json)['type'] }).toEqual({
            id,
            status: 400,
            type: 'validation_error',
          });
          expect(res.body['error']).toMatchObject({ code: 'invalid_string', param: 'external_customer_id' });
        }
      });

      it('gives every 400 a type, a param and a code: parameter_missing, parameter_invalid, parameter_invalid_string_blank', async () => {
        const answers = [
          // The DTO's own rules (the validation pipe) and the hand-written ones alike.
          [{ price_currency: 'ARS' }, 'price', 'parameter_missing'],
          [{ price: 150000, price_currency: 'ARS' }, 'price', 'parameter_invalid'],
          [{ ...base, cap: 'lots' }, 'cap', 'parameter_invalid'],
          [{ ...base, metadata: { seats: 5 } }, 'metadata[seats]', 'parameter_invalid'],
          [
            { ...base, external_customer_id: '\u200b ' },
            'external_customer_id',
            'parameter_invalid_string_blank',
          ],
          [{ ...base, external_customer_id: 'cus_\u202e42' }, 'external_customer_id', 'invalid_string'],
        ] as const;
        for (const [body, param, code] of answers) {
          const res = await create(body);
          expect({ param, status: res.status, error: res.body['error'] }).toEqual({
            param,
            status: 400,
            error: { type: 'validation_error', param, code, message: expect.any(String) },
          });
        }
      });

      it('a currency the rate source cannot quote is 422 price_currency_not_quotable (crypto-settled business)', async () => {
        const eventsBefore = await storedCheckoutEvents();
        const res = await create({ ...base, price_currency: 'EUR' });
        expect(res.status).toBe(422);
        expect(res.body).toEqual({
          error: {
            type: 'cannot_process',
            code: 'price_currency_not_quotable',
            param: 'price_currency',
            message: expect.any(String),
          },
        });
        expect(await storedCheckoutEvents()).toBe(eventsBefore);
      });

      it('an unavailable rate source is 503 rate_source_unavailable (sandbox magic currency XTS)', async () => {
        const eventsBefore = await storedCheckoutEvents();
        const res = await create({ ...base, price_currency: 'XTS' });
        expect(res.status).toBe(503);
        expect(res.body).toMatchObject({ error: { type: 'api_error', code: 'rate_source_unavailable' } });
        expect(await storedCheckoutEvents()).toBe(eventsBefore);
      });

      it('requires the API key', async () => {
        const res = await create(base, 'sk_test_unknownunknownunknownunknown');
        expect(res.status).toBe(401);
        expect(res.body).toMatchObject({ error: { type: 'authentication_error' } });
      });
    });
  });

  describe('fiat-settled business (SPEC Rules 8) and its settlement configuration', () => {
    let fiat: { id: string; key: string };
    beforeAll(async () => {
      fiat = await newMerchant('Pampa Fiat SA', 'fiat');
    });
    const settlement = (method: 'GET' | 'PUT', body?: unknown) =>
      call(method, '/payments/settlement', body, fiat.key);

    it('has no fiat configuration at first, and cannot price: 422 fiat_settlement_required', async () => {
      expect((await settlement('GET')).body).toEqual({
        object: 'settlement_configuration',
        settlement_mode: 'fiat',
        settlement_address: null,
        fiat: null,
        fiat_settlement_required_fields: ['currency', 'beneficiary_name', 'account_number', 'country'],
        updated_at: expect.any(String),
      });
      const res = await create({ price: '150000', price_currency: 'ARS' }, fiat.key);
      expect(res.status).toBe(422);
      expect(res.body).toMatchObject({ error: { type: 'cannot_process', code: 'fiat_settlement_required' } });
      expect(await allIds(fiat.key)).toEqual([]);
    });

    it('an incomplete configuration is still 422 fiat_settlement_required, and says what is missing', async () => {
      const put = await settlement('PUT', { fiat: { currency: 'ars', beneficiary_name: 'Pampa Fiat SA' } });
      expect(put.status).toBe(200);
      expect(put.body['fiat']).toMatchObject({
        currency: 'ARS',
        complete: false,
        missing_fields: ['account_number', 'country'],
      });
      expect((await create({ price: '150000', price_currency: 'ARS' }, fiat.key)).body).toMatchObject({
        error: { code: 'fiat_settlement_required' },
      });
    });

    it('validates the configuration fields with their param', async () => {
      for (const [body, param] of [
        [{ fiat: { currency: 'PESO' } }, 'fiat[currency]'],
        [{ fiat: { country: 'ARG' } }, 'fiat[country]'],
        [{ fiat: { account_number: '12 34' } }, 'fiat[account_number]'],
        [{ fiat: { beneficiary_name: '\u200B\u2060' } }, 'fiat[beneficiary_name]'],
        [{ fiat: { bank_name: 'Banco \u202ENacion' } }, 'fiat[bank_name]'],
        [{ fiat: { iban: 'x' } }, 'fiat[iban]'],
        [{ fiat: 'ARS' }, 'fiat'],
        [{ bank: {} }, 'bank'],
        [{ settlement_address: '0x123' }, 'settlement_address'],
      ] as const) {
        const res = await settlement('PUT', body);
        expect(res.status).toBe(400);
        expect(res.body).toMatchObject({ error: { type: 'validation_error', param } });
      }
      // A control character in a name: the code every field answers it with (before: parameter_invalid here).
      for (const [body, param] of [
        [{ fiat: { beneficiary_name: 'Ana\u0007 Perez' } }, 'fiat[beneficiary_name]'],
        [{ fiat: { bank_name: 'Banco\u0085Nacion' } }, 'fiat[bank_name]'],
      ] as const) {
        expect((await settlement('PUT', body)).body).toMatchObject({
          error: { type: 'validation_error', code: 'invalid_string', param },
        });
      }
      expect((await settlement('GET')).body['fiat']).toMatchObject({ currency: 'ARS', complete: false });
    });

    it('complete: prices in its settlement currency; another currency is 422 currency_mismatch', async () => {
      const put = await settlement('PUT', {
        settlement_address: '0x1111111111111111111111111111111111111111',
        fiat: { account_number: '0000003100010000000001', country: 'ar', bank_name: 'Banco Ejemplo' },
      });
      expect(put.body).toMatchObject({
        settlement_address: '0x1111111111111111111111111111111111111111',
        fiat: {
          currency: 'ARS',
          beneficiary_name: 'Pampa Fiat SA',
          bank_name: 'Banco Ejemplo',
          account_number_last4: '0001',
          bank_code: null,
          country: 'AR',
          complete: true,
          missing_fields: [],
        },
      });
      const mismatch = await create({ price: '1999', price_currency: 'USD' }, fiat.key);
      expect(mismatch.status).toBe(422);
      expect(mismatch.body).toMatchObject({
        error: { type: 'cannot_process', code: 'currency_mismatch', param: 'price_currency' },
      });
      const ok = await create({ price: '150000', price_currency: 'ARS' }, fiat.key);
      expect(ok.status).toBe(201);
      expect(ok.body).toMatchObject({
        business_name: 'Pampa Fiat SA',
        price_currency: 'ARS',
        status: 'pending',
      });
      expect(await allIds(fiat.key)).toEqual([ok.body['id']]);
    });

    it('removing the configuration makes it required again', async () => {
      expect((await settlement('PUT', { fiat: null })).body['fiat']).toBeNull();
      expect((await create({ price: '150000', price_currency: 'ARS' }, fiat.key)).body).toMatchObject({
        error: { code: 'fiat_settlement_required' },
      });
    });
  });

  describe('GET /subscription-checkouts/:id', () => {
    it('returns the intent with subscription_options; unknown and foreign ids are 404', async () => {
      const created = await create({ price: '5000', price_currency: 'ARS', supported_chains: ['eip155:10'] });
      const id = str(created.body['id']);
      const got = await call('GET', `/subscription-checkouts/${id}`);
      expect(got.status).toBe(200);
      expect(got.body).toEqual(created.body);
      expect(arr(got.body['subscription_options']).map((o) => o['asset'])).toEqual([
        'eip155:10/erc20:0x0b2C639c533813f4Aa9D7837CAf62653d097Ff85',
        'eip155:10/erc20:0x94b008aA00579c1307B0EF2c499aD98a8ce58e58',
      ]);
      const other = await newMerchant('Globex');
      for (const [path, apiKey] of [
        [`/subscription-checkouts/${id}`, other.key],
        ['/subscription-checkouts/schk_00000000000000000000000000', key],
        ['/subscription-checkouts/not-an-id', key],
      ] as const) {
        const res = await call('GET', path, undefined, apiKey);
        expect(res.status).toBe(404);
        expect(res.body).toMatchObject({ error: { type: 'invalid_request', code: 'resource_missing' } });
      }
    });
  });

  describe('PATCH /subscription-checkouts/:id/cancel', () => {
    it('cancels a pending intent once; then 409 subscription_checkout_not_pending', async () => {
      clock.advance(1000);
      const id = str((await create({ price: '5000', price_currency: 'ARS' })).body['id']);
      clock.advance(1000);
      const res = await call('PATCH', `/subscription-checkouts/${id}/cancel`);
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({
        id,
        status: 'cancelled',
        cancellation_reason: 'merchant_cancelled',
        cancelled_at: clock.now().toISOString(),
        updated_at: clock.now().toISOString(),
      });
      expect(res.body).not.toHaveProperty('subscription_options');
      expect((await call('GET', `/subscription-checkouts/${id}`)).body).toMatchObject({
        status: 'cancelled',
      });
      const again = await call('PATCH', `/subscription-checkouts/${id}/cancel`);
      expect(again.status).toBe(409);
      expect(again.body).toMatchObject({
        error: { type: 'invalid_request', code: 'subscription_checkout_not_pending' },
      });
    });

    it('a keyed cancel retried after a lost answer is answered the cancelled intent, appending nothing; unkeyed stays 409', async () => {
      const id = str((await create({ price: '5000', price_currency: 'ARS' }, key)).body['id']);
      const keyed = async (idempotencyKey: string) => {
        const res = await fetch(`${stack.url}/subscription-checkouts/${id}/cancel`, {
          method: 'PATCH',
          headers: { authorization: `Bearer ${key}`, 'idempotency-key': idempotencyKey },
        });
        return { status: res.status, body: (await res.json()) as Json };
      };
      const first = await keyed('cancel-answer-lost');
      expect(first.status).toBe(200);
      const events = await storedCheckoutEvents();
      // The client never saw `first` (a timeout, a dropped connection) and sends the same request again.
      const retried = await keyed('cancel-answer-lost');
      expect(retried).toEqual(first);
      expect(retried.body).toMatchObject({ status: 'cancelled', cancellation_reason: 'merchant_cancelled' });
      expect(await storedCheckoutEvents()).toBe(events);
      expect((await keyed('another-cancel')).body).toMatchObject({
        error: { code: 'subscription_checkout_not_pending' },
      });
      expect((await call('PATCH', `/subscription-checkouts/${id}/cancel`)).status).toBe(409);
    });

    it('a keyed cancel whose key is the one its intent was created with still cancels', async () => {
      const created = await fetch(`${stack.url}/subscription-checkouts`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${key}`,
          'content-type': 'application/json',
          'idempotency-key': 'one-key-for-both',
        },
        body: JSON.stringify({ price: '5000', price_currency: 'ARS' }),
      });
      const id = str(((await created.json()) as Json)['id']);
      const res = await fetch(`${stack.url}/subscription-checkouts/${id}/cancel`, {
        method: 'PATCH',
        headers: { authorization: `Bearer ${key}`, 'idempotency-key': 'one-key-for-both' },
      });
      expect(res.status).toBe(200);
      expect(((await res.json()) as Json)['status']).toBe('cancelled');
    });

    it('a cancel with an empty or overlong Idempotency-Key is refused before it cancels', async () => {
      const id = str((await create({ price: '5000', price_currency: 'ARS' })).body['id']);
      for (const idempotencyKey of ['', 'k'.repeat(256)]) {
        const res = await fetch(`${stack.url}/subscription-checkouts/${id}/cancel`, {
          method: 'PATCH',
          headers: { authorization: `Bearer ${key}`, 'idempotency-key': idempotencyKey },
        });
        expect(res.status).toBe(400);
        expect(((await res.json()) as Json)['error']).toMatchObject({ code: 'invalid_idempotency_key' });
      }
      expect((await call('GET', `/subscription-checkouts/${id}`)).body).toMatchObject({ status: 'pending' });
    });

    it('refuses parameters, unknown ids and other merchants', async () => {
      const id = str((await create({ price: '5000', price_currency: 'ARS' })).body['id']);
      const withBody = await call('PATCH', `/subscription-checkouts/${id}/cancel`, { reason: 'x' });
      expect(withBody).toMatchObject({
        status: 400,
        body: { error: { type: 'validation_error', param: 'reason' } },
      });
      const other = await newMerchant('Initech');
      expect((await call('PATCH', `/subscription-checkouts/${id}/cancel`, undefined, other.key)).status).toBe(
        404,
      );
      expect(
        (await call('PATCH', '/subscription-checkouts/schk_00000000000000000000000000/cancel')).status,
      ).toBe(404);
      expect((await call('GET', `/subscription-checkouts/${id}`)).body).toMatchObject({ status: 'pending' });
    });
  });

  describe('expiry (durable timer on the injected clock)', () => {
    it('a pending intent becomes expired when expires_at passes, with no request; it cannot be cancelled after', async () => {
      const res = await create({ price: '5000', price_currency: 'ARS', expires_in: 60 });
      const id = str(res.body['id']);
      const expiresAt = str(res.body['expires_at']);
      clock.advance(59_000);
      await new Promise((r) => setTimeout(r, 300));
      expect((await call('GET', `/subscription-checkouts/${id}`)).body['status']).toBe('pending');
      clock.advance(1_000);
      const reader = stack.service.app.get(SubscriptionCheckoutReader);
      const row = await eventually(async () => {
        const r = await reader.find(id);
        return r?.status === 'expired' ? r : undefined;
      });
      expect(row.object).toMatchObject({ status: 'expired', expired_at: expiresAt, updated_at: expiresAt });
      expect((await call('GET', `/subscription-checkouts/${id}`)).body).toMatchObject({
        status: 'expired',
        expired_at: expiresAt,
      });
      expect((await call('PATCH', `/subscription-checkouts/${id}/cancel`)).body).toMatchObject({
        error: { code: 'subscription_checkout_not_pending' },
      });
    });
  });

  describe('events on the bus (subscriptions.subscription-checkout.v1)', () => {
    it('created, cancelled and expired carry facts, not the object; the read model projects the object from them', async () => {
      const metadata = { plan_name: 'Basic', order: '77' };
      const a = str(
        (await create({ price: '5000', price_currency: 'ARS', metadata, expires_in: 60 })).body['id'],
      );
      const b = str((await create({ price: '5000', price_currency: 'ARS', metadata })).body['id']);
      const cancelledAt = clock.now().toISOString();
      await call('PATCH', `/subscription-checkouts/${b}/cancel`);
      clock.advance(61_000);
      const reader = stack.service.app.get(SubscriptionCheckoutReader);
      await eventually(async () => ((await reader.find(a))?.status === 'expired' ? true : undefined));
      await busSubscription.caughtUp();
      const of = (id: string) => busMessages.filter((m) => m.key === `subscriptionCheckout-${id}`);
      expect(of(a).map((m) => m.type)).toEqual([
        'SubscriptionCheckoutCreated.v2',
        'SubscriptionCheckoutExpired.v2',
      ]);
      expect(of(b).map((m) => m.type)).toEqual([
        'SubscriptionCheckoutCreated.v2',
        'SubscriptionCheckoutCancelled.v2',
      ]);
      for (const message of [...of(a), ...of(b)]) {
        expect(message.topic).toBe(TOPIC);
        expect(message.metadata).toMatchObject({ merchantId, mode: 'test' });
        expect(message.data).not.toHaveProperty('object');
      }
      expect(of(b)[0]?.data).toMatchObject({ id: b, price: '5000', priceCurrency: 'ARS', metadata });
      expect(of(b)[1]?.data).toEqual({ by: 'merchant', cancelledAt });
      expect(of(a)[1]?.data).toEqual({ expiredAt: (await reader.find(a))?.object.expired_at });
      // The webhook data.object builds from the read-model row and equals the API's (less options and colors).
      const row = await reader.find(b);
      if (!row) throw new Error('row missing');
      const {
        subscription_options: _options,
        background_color: _bg,
        primary_color: _primary,
        ...fromApi
      } = (await call('GET', `/subscription-checkouts/${b}`)).body;
      expect(subscriptionCheckoutWebhookObject(row)).toEqual(fromApi);
      expect(fromApi).toMatchObject({
        status: 'cancelled',
        cancellation_reason: 'merchant_cancelled',
        cancelled_at: cancelledAt,
        metadata,
      });
    });

    it('a completion recorded by the subscribe flow is shown once and emitted once', async () => {
      const id = str((await create({ price: '5000', price_currency: 'ARS' })).body['id']);
      const commands = stack.service.app.get(SubscriptionCheckoutCommands);
      const reader = stack.service.app.get(SubscriptionCheckoutReader);
      const row = await reader.find(id);
      if (!row) throw new Error('row missing');
      const input = {
        subscriber: '0x2222222222222222222222222222222222222222',
        chain: 'eip155:8453',
        asset: 'eip155:8453/erc20:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
        txHash: null,
      };
      expect((await commands.complete(row, input)).changed).toBe(true);
      expect((await commands.complete(row, input)).changed).toBe(false);
      expect((await call('GET', `/subscription-checkouts/${id}`)).body).toMatchObject({
        status: 'completed',
        subscriber: input.subscriber,
        completed_at: clock.now().toISOString(),
      });
      expect((await call('PATCH', `/subscription-checkouts/${id}/cancel`)).status).toBe(409);
      await busSubscription.caughtUp();
      expect(busMessages.filter((m) => m.key === `subscriptionCheckout-${id}`).map((m) => m.type)).toEqual([
        'SubscriptionCheckoutCreated.v2',
        'SubscriptionCheckoutCompleted.v3',
      ]);
    });
  });

  describe('GET /subscription-checkouts (filters)', () => {
    let lister: { id: string; key: string };
    const ids: Record<string, string> = {};
    const list = (query: string) => call('GET', `/subscription-checkouts${query}`, undefined, lister.key);

    beforeAll(async () => {
      lister = await newMerchant('Lister');
      clock.set('2026-07-01T00:00:00.000Z');
      ids['a'] = str(
        (await create({ price: '100', price_currency: 'ARS', external_customer_id: 'cus_a' }, lister.key))
          .body['id'],
      );
      clock.set('2026-07-02T00:00:00.000Z');
      ids['b'] = str(
        (
          await create(
            { price: '100', price_currency: 'ARS', external_customer_id: 'cus_b', expires_in: 86400 },
            lister.key,
          )
        ).body['id'],
      );
      await call('PATCH', `/subscription-checkouts/${ids['b']}/cancel`, undefined, lister.key);
      clock.set('2026-07-03T00:00:00.000Z');
      ids['c'] = str(
        (
          await create(
            { price: '100', price_currency: 'ARS', external_customer_id: 'cus_a', expires_in: 86400 },
            lister.key,
          )
        ).body['id'],
      );
      const reader = stack.service.app.get(SubscriptionCheckoutReader);
      await eventually(async () =>
        (await reader.find(ids['a'] ?? ''))?.status === 'expired' ? true : undefined,
      );
    });

    const idsOf = (res: { body: Json }) => arr(res.body['data']).map((r) => r['id']);

    it('lists newest first in the list envelope, without subscription_options', async () => {
      const res = await list('');
      expect(res.body).toMatchObject({ object: 'list', has_more: false });
      expect(idsOf(res)).toEqual([ids['c'], ids['b'], ids['a']]);
      expect(arr(res.body['data'])[0]).not.toHaveProperty('subscription_options');
    });

    it('filters by status, external_customer_id and created range (inclusive and exclusive, Unix seconds or ISO 8601)', async () => {
      expect(idsOf(await list('?status=cancelled'))).toEqual([ids['b']]);
      expect(idsOf(await list('?status=expired'))).toEqual([ids['a']]);
      expect(idsOf(await list('?status=pending'))).toEqual([ids['c']]);
      expect(idsOf(await list('?external_customer_id=cus_a'))).toEqual([ids['c'], ids['a']]);
      expect(idsOf(await list('?created[gte]=2026-07-02T00:00:00Z'))).toEqual([ids['c'], ids['b']]);
      expect(idsOf(await list('?created[gt]=2026-07-02T00:00:00Z'))).toEqual([ids['c']]);
      expect(idsOf(await list(`?created[lte]=${Date.parse('2026-07-02T00:00:00Z') / 1000}`))).toEqual([
        ids['b'],
        ids['a'],
      ]);
      expect(idsOf(await list('?created[lt]=2026-07-02'))).toEqual([ids['a']]);
      expect(
        idsOf(
          await list('?created[gte]=2026-07-01&created[lte]=2026-07-02T12:00:00Z&external_customer_id=cus_a'),
        ),
      ).toEqual([ids['a']]);
    });

    it('refuses bad list parameters with the param', async () => {
      for (const [query, param] of [
        ['?status=open', 'status'],
        ['?created[gte]=yesterday', 'created[gte]'],
        ['?created[lt]=2026-13-01', 'created[lt]'],
        ['?limit=0', 'limit'],
        ['?limit=101', 'limit'],
        ['?sort=asc', 'sort'],
        [`?starting_after=${ids['a'] ?? ''}&ending_before=${ids['c'] ?? ''}`, 'ending_before'],
        ['?status=pending&status=expired', 'status'],
        // No stored id holds a control character (a C1 one gets past the URL's own check).
        ['?external_customer_id=cus%C2%8542', 'external_customer_id'],
      ] as const) {
        const res = await list(query);
        expect(res.status).toBe(400);
        expect(res.body).toMatchObject({ error: { type: 'validation_error', param } });
      }
      const foreign = await list(
        `?starting_after=${str((await create({ price: '100', price_currency: 'ARS' })).body['id'])}`,
      );
      expect(foreign).toMatchObject({
        status: 400,
        body: { error: { code: 'resource_missing', param: 'starting_after' } },
      });
    });
  });
});
