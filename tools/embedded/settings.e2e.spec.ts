import { Wallet } from 'ethers';
import { computeTestStablecoinAddresses } from '@stablepay/contracts';
import { Client } from 'pg';
import { EVENT_BUS, type BusMessage, type EventBus } from '@stablepay/event-bus';
import { MerchantCommands, SettingsReader, WebhookSecrets } from '@stablepay/merchants-service';
import { idempotencyCommandId } from '@stablepay/http';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { ManualClock } from '@stablepay/util';
import { type EmbeddedStack, startEmbedded } from './embedded';
import { loseKeptAnswer } from './test-support/idempotency';

/** Merchant settings end to end: HTTP -> merchant aggregate -> event store -> bus -> projection -> HTTP. */
const ADMIN_TOKEN = 'admin-token-for-tests-0123456789';
const operator = Wallet.createRandom();
const clock = new ManualClock('2026-06-01T10:00:00.000Z');

/** A string field of a JSON body (fails the test clearly when it is not one). */
function str(value: unknown): string {
  if (typeof value !== 'string') throw new Error(`expected a string, got ${JSON.stringify(value)}`);
  return value;
}

describe('merchant settings through the HTTP API (embedded stack)', () => {
  let db: TestDatabase;
  let stack: EmbeddedStack;
  let key: string;
  let merchantId: string;

  const api = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
    const res = await fetch(`${stack.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${key}`,
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        ...headers,
      },
      ...(body !== undefined ? { body: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    return {
      status: res.status,
      body: text ? (JSON.parse(text) as Record<string, unknown>) : {},
      headers: res.headers,
    };
  };

  const newMerchant = async (name = 'Acme', mode = 'test', settlement_mode?: string) => {
    const res = await fetch(`${stack.url}/admin/merchants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name, mode, ...(settlement_mode ? { settlement_mode } : {}) }),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };

  const merchantEventCount = async (): Promise<number> => {
    const client = new Client({ connectionString: db.url });
    await client.connect();
    try {
      const res = await client.query<{ n: string }>('SELECT count(*) AS n FROM events WHERE stream_id = $1', [
        `merchant-${merchantId}`,
      ]);
      return Number(res.rows[0]?.n);
    } finally {
      await client.end();
    }
  };

  /** What the Idempotency-Key row of `idempotencyKey` keeps of the first answer. */
  const keptAnswer = async (idempotencyKey: string): Promise<string> => {
    const client = new Client({ connectionString: db.url });
    await client.connect();
    try {
      const res = await client.query<{ response_body: string }>(
        'SELECT response_body FROM idempotency_keys WHERE key = $1',
        [idempotencyKey],
      );
      return str(res.rows[0]?.response_body);
    } finally {
      await client.end();
    }
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    stack = await startEmbedded({
      env: {
        DATABASE_URL: db.url,
        PORT: '0',
        ADMIN_TOKEN,
        OPERATOR_PAUSER_ADDRESS: operator.address,
        ALLOW_LOCAL_WEBHOOKS: 'false',
        LOG_LEVEL: 'error',
      },
      dataDir: 'memory',
      localChains: false,
      clock,
    });
    const created = await newMerchant();
    key = str(created.body['api_key']);
    merchantId = str(created.body['id']);
  });

  afterAll(async () => {
    await stack?.stop();
    await db?.drop();
  });

  describe('operator API', () => {
    it('creates a merchant and returns its id and secret key once; the key works at once', async () => {
      const created = await newMerchant('Globex', 'live', 'fiat');
      expect(created.status).toBe(201);
      expect(created.body).toMatchObject({
        object: 'merchant',
        name: 'Globex',
        mode: 'live',
        settlement_mode: 'fiat',
      });
      expect(created.body['id']).toMatch(/^mer_/);
      expect(created.body['api_key']).toMatch(/^sk_live_[0-9A-Za-z]{32}$/);
      const settings = await api('GET', '/settings', undefined, {
        authorization: `Bearer ${str(created.body['api_key'])}`,
      });
      expect(settings.status).toBe(200);
      expect(settings.body).toMatchObject({
        merchant_id: created.body['id'],
        mode: 'live',
        settlement_mode: 'fiat',
        display_name: 'Globex',
      });
    });

    it('a keyed create keeps its answer sealed (the database never holds the API key in the clear); the replay answers the same key', async () => {
      const send = () =>
        fetch(`${stack.url}/admin/merchants`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${ADMIN_TOKEN}`,
            'content-type': 'application/json',
            'idempotency-key': 'create-sealed-merchant',
          },
          body: JSON.stringify({ name: 'Sealed', mode: 'test' }),
        }).then(async (res) => ({
          status: res.status,
          replayed: res.headers.get('idempotent-replayed'),
          text: await res.text(),
        }));
      const first = await send();
      expect(first.status).toBe(201);
      const apiKey = str((JSON.parse(first.text) as Record<string, unknown>)['api_key']);
      expect(await keptAnswer('create-sealed-merchant')).not.toContain(apiKey);
      const replay = await send();
      expect(replay).toEqual({ status: 201, replayed: 'true', text: first.text });
    });

    it('a keyed create whose process died before keeping its answer answers the same merchant to the retry, with a reissued key replacing the unseen one', async () => {
      const send = async () => {
        const res = await fetch(`${stack.url}/admin/merchants`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${ADMIN_TOKEN}`,
            'content-type': 'application/json',
            'idempotency-key': 'create-merchant-answer-lost',
          },
          body: JSON.stringify({ name: 'Lost Answer Co', mode: 'test' }),
        });
        return { status: res.status, body: (await res.json()) as Record<string, unknown> };
      };
      const settingsWith = async (apiKey: unknown) =>
        api('GET', '/settings', undefined, { authorization: `Bearer ${str(apiKey)}` });
      const first = await send();
      expect(first.status).toBe(201);
      await loseKeptAnswer(stack, 'create-merchant-answer-lost');
      const retried = await send();
      expect(retried.status).toBe(201);
      expect(retried.body).toMatchObject({
        object: 'merchant',
        id: first.body['id'],
        name: 'Lost Answer Co',
        created_at: first.body['created_at'],
      });
      expect(retried.body['api_key']).toMatch(/^sk_test_/);
      expect(retried.body['api_key']).not.toBe(first.body['api_key']);
      expect((await settingsWith(retried.body['api_key'])).body['merchant_id']).toBe(first.body['id']);
      // The first key reached nobody; it no longer opens the merchant.
      expect((await settingsWith(first.body['api_key'])).status).toBe(401);
      const client = new Client({ connectionString: db.url });
      await client.connect();
      try {
        const merchants = await client.query(
          "SELECT 1 FROM events WHERE type = 'MerchantCreated.v1' AND data->>'name' = 'Lost Answer Co'",
        );
        expect(merchants.rowCount).toBe(1);
        const reissued = await client.query<{ data: Record<string, unknown> }>(
          "SELECT data FROM events WHERE stream_id = $1 AND type = 'MerchantApiKeyReissued.v1'",
          [`merchant-${str(first.body['id'])}`],
        );
        expect(reissued.rows).toHaveLength(1);
        expect(JSON.stringify(reissued.rows[0]?.data)).not.toContain(str(retried.body['api_key']));
      } finally {
        await client.end();
      }
    });

    it('refuses a missing or wrong admin token with 401', async () => {
      for (const auth of [undefined, 'Bearer nope', `Bearer ${key}`]) {
        const res = await fetch(`${stack.url}/admin/merchants`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...(auth ? { authorization: auth } : {}) },
          body: JSON.stringify({ name: 'x', mode: 'test' }),
        });
        expect(res.status).toBe(401);
        expect(await res.json()).toMatchObject({ error: { type: 'authentication_error' } });
      }
    });

    it('validates the merchant fields', async () => {
      const res = await newMerchant('x', 'prod');
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ error: { type: 'validation_error', param: 'mode' } });
      const bad = await newMerchant('x', 'test', 'barter');
      expect(bad.body).toMatchObject({ error: { type: 'validation_error', param: 'settlement_mode' } });
      // A name payers would see as nothing, or read reordered by a bidi override.
      for (const name of ['\u202E', '\u200B\uFEFF', ' \u3000 ', 'Acme\u202Emoc.lapyap']) {
        expect((await newMerchant(name)).body).toMatchObject({
          error: { type: 'validation_error', param: 'name' },
        });
      }
    });
  });

  it('GET /settings shows every settings field, null where unset', async () => {
    const res = await api('GET', '/settings');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      object: 'settings',
      merchant_id: merchantId,
      mode: 'test',
      display_name: 'Acme',
      settlement_mode: 'crypto',
      settlement_address: null,
      merchant_signer: null,
      signers: expect.arrayContaining([{ chain: 'eip155:8453', address: null, status: 'missing' }]),
      // No chain configured in this stack: nothing to register on.
      chain_registrations: [],
      payment_factory_address: null,
      payment_factory_status: 'pending_chain_layer',
      background_color: null,
      primary_color: null,
      webhook_url: null,
      webhook_secret_fingerprint: null,
      previous_secret_expires_at: null,
      webhook_event_types: null,
      merchant_pauser: null,
      subscription_manager_address: null,
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
  });

  it('refuses requests without a valid key: 401 in the envelope', async () => {
    const res = await api('GET', '/settings', undefined, {
      authorization: 'Bearer sk_test_unknownunknownunknownunknown',
    });
    expect(res.status).toBe(401);
    expect(res.body).toMatchObject({ error: { type: 'authentication_error', code: 'invalid_api_key' } });
  });

  describe('pause authority before a signer exists', () => {
    it('POST /settings/pauser is 400 evm_payment_config_missing without an EVM signer', async () => {
      const pauser = Wallet.createRandom();
      const { body } = await api('GET', '/settings/pauser');
      const res = await api('POST', '/settings/pauser', {
        merchant_pauser: pauser.address,
        signature: await pauser.signMessage(str(body['declaration_message'])),
      });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({
        error: { type: 'invalid_request', code: 'evm_payment_config_missing' },
      });
    });
  });

  const signer = Wallet.createRandom();
  const settlement = Wallet.createRandom();

  describe('merchant signer and settlement address', () => {
    it('POST /settings registers the signer and settlement address (lowercase accepted, stored checksummed)', async () => {
      const res = await api('POST', '/settings', {
        merchant_signer: signer.address.toLowerCase(),
        settlement_address: settlement.address,
      });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({
        merchant_signer: signer.address,
        settlement_address: settlement.address,
      });
      expect(res.body['signers']).toContainEqual({
        chain: 'eip155:8453',
        address: signer.address,
        status: 'registered',
      });
      const read = await api('GET', '/settings');
      expect(read.body['merchant_signer']).toBe(signer.address);
    });

    it.each([
      ['0x123', 'merchant_signer'],
      ['not an address', 'merchant_signer'],
      // mixed case with a broken checksum
      ['0x' + 'aB'.repeat(20), 'merchant_signer'],
      ['0x0000000000000000000000000000000000000000', 'merchant_signer'],
    ])(
      'POST /settings refuses merchant_signer %j with 400 param %s and changes nothing',
      async (value, param) => {
        const res = await api('POST', '/settings', { merchant_signer: value });
        expect(res.status).toBe(400);
        expect(res.body).toMatchObject({ error: { type: 'validation_error', param } });
        expect((await api('GET', '/settings')).body['merchant_signer']).toBe(signer.address);
      },
    );

    it('PUT /settings updates the settlement address; a missing or bad one is 400 with param', async () => {
      const next = Wallet.createRandom().address;
      const res = await api('PUT', '/settings', { settlement_address: next });
      expect(res.status).toBe(200);
      expect(res.body['settlement_address']).toBe(next);
      expect((await api('PUT', '/settings', {})).body).toMatchObject({
        error: { type: 'validation_error', param: 'settlement_address' },
      });
      expect((await api('PUT', '/settings', { settlement_address: '0xZZ' })).body).toMatchObject({
        error: { param: 'settlement_address' },
      });
      const zero = '0x0000000000000000000000000000000000000000';
      expect(await api('PUT', '/settings', { settlement_address: zero })).toMatchObject({
        status: 400,
        body: { error: { type: 'validation_error', param: 'settlement_address' } },
      });
      expect(
        await api('POST', '/settings', { merchant_signer: signer.address, settlement_address: zero }),
      ).toMatchObject({ status: 400, body: { error: { param: 'settlement_address' } } });
      expect((await api('GET', '/settings')).body['settlement_address']).toBe(next);
    });

    it.each([
      // Base's USDC, as a merchant copies it from an explorer: settlements sent there stay there.
      ['0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913', 'the USDC token contract on eip155:8453'],
      // The local chains' test USDC (the same address on every local chain).
      [computeTestStablecoinAddresses().USDC, 'the test USDC token contract of the local chains'],
    ])(
      'refuses the token contract %s as merchant signer or settlement address on every route (400 invalid_address), changing nothing',
      async (token, what) => {
        const before = (await api('GET', '/settings')).body;
        const events = await merchantEventCount();
        const refusals = [
          [await api('POST', '/settings', { merchant_signer: token }), 'merchant_signer'],
          [
            await api('POST', '/settings', { merchant_signer: signer.address, settlement_address: token }),
            'settlement_address',
          ],
          [await api('PUT', '/settings', { settlement_address: token.toLowerCase() }), 'settlement_address'],
          [await api('PUT', '/payments/settlement', { settlement_address: token }), 'settlement_address'],
        ] as const;
        for (const [res, param] of refusals) {
          expect(res.status).toBe(400);
          expect(res.body).toMatchObject({
            error: { type: 'validation_error', param, code: 'invalid_address' },
          });
          expect(str((res.body['error'] as Record<string, unknown>)['message'])).toContain(what);
        }
        const after = (await api('GET', '/settings')).body;
        expect([after['merchant_signer'], after['settlement_address']]).toEqual([
          before['merchant_signer'],
          before['settlement_address'],
        ]);
        expect(await merchantEventCount()).toBe(events);
      },
    );

    it('replays POST /settings for a retried Idempotency-Key', async () => {
      const body = { merchant_signer: signer.address };
      const first = await api('POST', '/settings', body, { 'idempotency-key': 'register-1' });
      const again = await api('POST', '/settings', body, { 'idempotency-key': 'register-1' });
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(again.body).toEqual(first.body);
      const other = await api(
        'POST',
        '/settings',
        { merchant_signer: Wallet.createRandom().address },
        { 'idempotency-key': 'register-1' },
      );
      expect(other.status).toBe(400);
      expect(other.body).toMatchObject({ error: { code: 'idempotency_key_reused' } });
    });
  });

  describe('PATCH /settings: branding and display name', () => {
    it('sets colors (exactly # + 6 hex) and the display name', async () => {
      const res = await api('PATCH', '/settings', {
        background_color: '#0a0b0c',
        primary_color: '#FF8800',
        display_name: 'Acme Inc',
      });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({
        background_color: '#0A0B0C',
        primary_color: '#FF8800',
        display_name: 'Acme Inc',
      });
    });

    it('refuses a query parameter on PATCH /settings with 400 naming it, and changes nothing', async () => {
      const res = await api('PATCH', '/settings?primary_color=%23000000', { display_name: 'Query Inc' });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ error: { type: 'validation_error', param: 'primary_color' } });
      expect((await api('GET', '/settings')).body).toMatchObject({
        display_name: 'Acme Inc',
        primary_color: '#FF8800',
      });
    });

    it('null resets a color to the platform default', async () => {
      const res = await api('PATCH', '/settings', { background_color: null });
      expect(res.body).toMatchObject({ background_color: null, primary_color: '#FF8800' });
    });

    it.each(['#fff', 'ff8800', '#ff88001', 'red', '#gg0000'])(
      'refuses color %j with 400 param and changes nothing',
      async (color) => {
        const res = await api('PATCH', '/settings', { primary_color: color });
        expect(res.status).toBe(400);
        expect(res.body).toMatchObject({ error: { type: 'validation_error', param: 'primary_color' } });
        expect((await api('GET', '/settings')).body['primary_color']).toBe('#FF8800');
      },
    );

    it.each([
      ['null', null],
      ['a number', 5],
      ['blank', '  '],
      ['too long', 'd'.repeat(101)],
      ['with a NUL', 'a\u0000b'],
      ['a right-to-left override alone', '\u202E'],
      ['zero-width characters and a BOM only', '\u200B\u200C\uFEFF'],
      ['a no-break space and a Hangul filler only', '\u00A0\u3164'],
      ['holding a right-to-left override', 'Acme\u202Emoc.elgoog'],
      ['holding a bidi isolate', '\u2066Acme\u2069'],
    ])('refuses display_name %s with 400 param display_name; settings stay writable', async (_l, value) => {
      const res = await api('PATCH', '/settings', { display_name: value });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ error: { param: 'display_name' } });
      // Nothing poisoned the read model: the next write of this merchant (and a new merchant) still goes through.
      expect((await api('PATCH', '/settings', { display_name: 'Acme Again' })).status).toBe(200);
      expect((await newMerchant('Another')).status).toBe(201);
    });

    it.each([
      ['combining marks alone', '\u0301\u0308'],
      ['a combining mark after a zero-width space', '\u200B\u0301'],
      ['Hangul fillers, a Braille blank and a word joiner', '\u115F\u1160\uFFA0\u2800\u2060'],
      ['tag characters and a variation selector', '\u{E0041}\u{E0042}\uFE0F'],
    ])(
      'refuses display_name of %s with 400 (no visible character) and keeps the stored name',
      async (_l, value) => {
        const before = (await api('GET', '/settings')).body;
        const eventsBefore = await merchantEventCount();
        const res = await api('PATCH', '/settings', { display_name: value });
        expect(res.status).toBe(400);
        expect(res.body).toMatchObject({
          error: {
            type: 'validation_error',
            param: 'display_name',
            message:
              'display_name must contain a visible character, not only spaces, invisible characters or combining marks.',
          },
        });
        expect((await api('GET', '/settings')).body['display_name']).toBe(before['display_name']);
        expect(await merchantEventCount()).toBe(eventsBefore);
      },
    );

    it('refuses an unknown field and an empty patch', async () => {
      expect((await api('PATCH', '/settings', { colour: '#000000' })).body).toMatchObject({
        error: { type: 'validation_error', param: 'colour', code: 'unknown_parameter' },
      });
      expect((await api('PATCH', '/settings', {})).status).toBe(400);
    });

    it('maps malformed JSON to 400 in the envelope', async () => {
      const res = await api('PATCH', '/settings', '{"display_name":');
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ error: { type: 'invalid_request', code: 'invalid_json' } });
    });
  });

  describe('webhook URL and secret', () => {
    it.each([
      'http://hooks.example.com/x',
      'https://127.0.0.1/hook',
      'https://[::1]/hook',
      'https://[::ffff:127.0.0.1]/hook',
      'https://[::ffff:7f00:1]/hook',
      'https://169.254.169.254/latest/meta-data',
      'https://10.0.0.7/hook',
      'https://192.168.1.20/hook',
      'https://localhost/hook',
      'https://metadata.google.internal/x',
      'https://hooks.example.com:0/hook',
      'https://hooks.example.com:00/hook',
      'not a url',
    ])('refuses %s with 400 param webhook_url and issues no secret', async (url) => {
      const res = await api('PATCH', '/settings', { webhook_url: url });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ error: { type: 'validation_error', param: 'webhook_url' } });
      expect((await api('GET', '/settings')).body['webhook_secret_fingerprint']).toBeNull();
    });

    let firstFingerprint: string;
    let firstSecret: string;

    it('issues a whsec_ secret with the first URL, shown once', async () => {
      const res = await api('PATCH', '/settings', { webhook_url: 'https://hooks.example.com/stablepay' });
      expect(res.status).toBe(200);
      expect(res.body['webhook_url']).toBe('https://hooks.example.com/stablepay');
      expect(res.body['webhook_secret']).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/);
      firstSecret = str(res.body['webhook_secret']);
      firstFingerprint = str(res.body['webhook_secret_fingerprint']);
      expect(firstFingerprint).toMatch(/^[0-9a-f]{16}$/);
      expect((await api('GET', '/settings')).body['webhook_secret']).toBeUndefined();
    });

    it('keeps the secret when the URL changes', async () => {
      const res = await api('PATCH', '/settings', { webhook_url: 'https://hooks2.example.com/stablepay' });
      expect(res.body['webhook_secret']).toBeUndefined();
      expect(res.body['webhook_secret_fingerprint']).toBe(firstFingerprint);
    });

    it('PATCH /settings takes no Idempotency-Key: the header is ignored (nothing kept or replayed, no key refused), a retry sets its values again and does not show the issued secret again', async () => {
      const keyed = { 'idempotency-key': 'patch-settings-key' };
      const url = 'https://hooks2.example.com/stablepay';
      const first = await api('PATCH', '/settings', { webhook_url: url, display_name: 'Acme Keyed' }, keyed);
      const retried = await api(
        'PATCH',
        '/settings',
        { webhook_url: url, display_name: 'Acme Keyed' },
        keyed,
      );
      for (const res of [first, retried]) {
        expect([res.status, res.headers.get('idempotent-replayed')]).toEqual([200, null]);
        expect(res.body['webhook_secret']).toBeUndefined();
        expect(res.body['webhook_secret_fingerprint']).toBe(firstFingerprint);
      }
      const other = await api('PATCH', '/settings', { display_name: 'Acme Inc' }, keyed);
      expect([other.status, other.body['display_name']]).toEqual([200, 'Acme Inc']);
      const client = new Client({ connectionString: db.url });
      await client.connect();
      try {
        const rows = await client.query(`SELECT 1 FROM idempotency_keys WHERE key = 'patch-settings-key'`);
        expect(rows.rowCount).toBe(0);
      } finally {
        await client.end();
      }
    });

    it('rotation returns the new secret and a 24-hour expiry for the previous one; both sign during the window', async () => {
      const res = await api('POST', '/settings/webhook/secret');
      expect(res.status).toBe(200);
      expect(res.body['object']).toBe('webhook_secret');
      expect(res.body['webhook_secret']).toMatch(/^whsec_/);
      expect(res.body['webhook_secret']).not.toBe(firstSecret);
      expect(res.body['previous_secret_expires_at']).toBe('2026-06-02T10:00:00.000Z');
      const settings = await stack.service.app.get(SettingsReader).get(merchantId);
      const active = await stack.service.app.get(WebhookSecrets).active(settings, clock);
      expect(active).toEqual({ current: res.body['webhook_secret'], previous: firstSecret });
    });

    it('a malformed, non-object or non-empty rotation body is refused and rotates nothing', async () => {
      const fingerprint = (await api('GET', '/settings')).body['webhook_secret_fingerprint'];
      for (const [body, headers, status] of [
        ['{"oops":', {}, 400],
        [{ unexpected: 1 }, {}, 400],
        ['[1]', {}, 400],
        ['null', {}, 400],
        ['[]', {}, 400],
        ['1', {}, 400],
        ['"rotate"', {}, 400],
        ['true', {}, 400],
        ['rotate=1', { 'content-type': 'application/x-www-form-urlencoded' }, 415],
      ] as const) {
        const res = await api('POST', '/settings/webhook/secret', body, headers);
        expect(res.status).toBe(status);
        expect(res.body).toMatchObject({ error: { type: expect.any(String) } });
      }
      expect((await api('GET', '/settings')).body['webhook_secret_fingerprint']).toBe(fingerprint);
    });

    it('a query parameter on the rotation is refused before its Idempotency-Key is claimed, rotating nothing', async () => {
      const fingerprint = (await api('GET', '/settings')).body['webhook_secret_fingerprint'];
      const headers = { 'idempotency-key': 'rotate-with-query' };
      const refused = await api('POST', '/settings/webhook/secret?dry_run=true', undefined, headers);
      expect(refused.status).toBe(400);
      expect(refused.body).toMatchObject({ error: { type: 'validation_error', param: 'dry_run' } });
      expect((await api('GET', '/settings')).body['webhook_secret_fingerprint']).toBe(fingerprint);
      // A bad key is still 401 first.
      const anonymous = await api('POST', '/settings/webhook/secret?dry_run=true', undefined, {
        authorization: 'Bearer sk_test_' + '0'.repeat(32),
      });
      expect(anonymous.status).toBe(401);
      // The key was not spent on the refusal: the same key without the query rotates.
      const rotated = await api('POST', '/settings/webhook/secret', undefined, headers);
      expect(rotated.status).toBe(200);
      expect((await api('GET', '/settings')).body['webhook_secret_fingerprint']).not.toBe(fingerprint);
    });

    it('a keyed rotation keeps its answer sealed (the database never holds the secret in the clear); the replay answers the same secret', async () => {
      const headers = { 'idempotency-key': 'rotate-sealed' };
      const rotated = await api('POST', '/settings/webhook/secret', undefined, headers);
      expect(rotated.status).toBe(200);
      const secret = str(rotated.body['webhook_secret']);
      expect(secret).toMatch(/^whsec_/);
      expect(await keptAnswer('rotate-sealed')).not.toContain(secret);
      const replay = await api('POST', '/settings/webhook/secret', undefined, headers);
      expect([replay.status, replay.headers.get('idempotent-replayed')]).toEqual([200, 'true']);
      expect(replay.body).toEqual(rotated.body);
    });

    it('a keyed rotation whose process died before keeping its answer answers the same secret to the retry and rotates once', async () => {
      const headers = { 'idempotency-key': 'rotate-answer-lost' };
      const rotated = await api('POST', '/settings/webhook/secret', undefined, headers);
      expect(rotated.status).toBe(200);
      const events = await merchantEventCount();
      await loseKeptAnswer(stack, 'rotate-answer-lost');
      const retried = await api('POST', '/settings/webhook/secret', undefined, headers);
      expect([retried.status, retried.headers.get('idempotent-replayed')]).toEqual([200, null]);
      expect(retried.body).toEqual(rotated.body);
      expect(await merchantEventCount()).toBe(events);
      const active = await stack.service.app
        .get(WebhookSecrets)
        .active(await stack.service.app.get(SettingsReader).get(merchantId), clock);
      expect(active?.current).toBe(rotated.body['webhook_secret']);
    });

    it('a keyed rotation retried after a later rotation answers exactly its own first answer; its first attempt landing late rotates nothing back', async () => {
      const headers = { 'idempotency-key': 'rotate-then-superseded' };
      const rotated = await api('POST', '/settings/webhook/secret', undefined, headers);
      expect(rotated.status).toBe(200);
      const later = await api('POST', '/settings/webhook/secret');
      expect(later.status).toBe(200);
      const events = await merchantEventCount();
      const currentSecret = async () =>
        (
          await stack.service.app
            .get(WebhookSecrets)
            .active(await stack.service.app.get(SettingsReader).get(merchantId), clock)
        )?.current;
      expect(await currentSecret()).toBe(later.body['webhook_secret']);

      // The first attempt, stalled past its claim after storing its secret but before it looked for its rotation
      // (its retry rotated, then the later rotation), lands now.
      const client = new Client({ connectionString: db.url });
      await client.connect();
      let generation: number;
      try {
        const res = await client.query<{ generation: number }>(
          'SELECT generation FROM idempotency_keys WHERE key = $1',
          ['rotate-then-superseded'],
        );
        generation = Number(res.rows[0]?.generation);
      } finally {
        await client.end();
      }
      const commands = stack.service.app.get(MerchantCommands);
      const lookup = jest
        .spyOn(commands as unknown as { rotationOf: () => Promise<undefined> }, 'rotationOf')
        .mockResolvedValueOnce(undefined);
      try {
        const late = await commands.rotateWebhookSecret(
          merchantId,
          idempotencyCommandId('rotate-then-superseded', generation),
        );
        expect({
          webhook_secret: late.secret,
          previous_secret_expires_at: late.previousSecretExpiresAt.toISOString(),
        }).toEqual({
          webhook_secret: rotated.body['webhook_secret'],
          previous_secret_expires_at: rotated.body['previous_secret_expires_at'],
        });
      } finally {
        lookup.mockRestore();
      }
      expect(await merchantEventCount()).toBe(events);
      expect(await currentSecret()).toBe(later.body['webhook_secret']);

      // The client's retry after the lost answer: the first answer again (its secret is now the previous one).
      await loseKeptAnswer(stack, 'rotate-then-superseded');
      const retried = await api('POST', '/settings/webhook/secret', undefined, headers);
      expect([retried.status, retried.headers.get('idempotent-replayed')]).toEqual([200, null]);
      expect(retried.body).toEqual(rotated.body);
      expect(await merchantEventCount()).toBe(events);
      expect(await currentSecret()).toBe(later.body['webhook_secret']);
    });

    it('rotating again inside the window invalidates the older secret at once (one previous slot)', async () => {
      const before = await stack.service.app
        .get(WebhookSecrets)
        .active(await stack.service.app.get(SettingsReader).get(merchantId), clock);
      clock.advance(60 * 60 * 1000);
      const res = await api('POST', '/settings/webhook/secret');
      expect(res.body['previous_secret_expires_at']).toBe('2026-06-02T11:00:00.000Z');
      const active = await stack.service.app
        .get(WebhookSecrets)
        .active(await stack.service.app.get(SettingsReader).get(merchantId), clock);
      expect(active?.previous).toBe(before?.current);
      expect([active?.current, active?.previous]).not.toContain(firstSecret);
    });

    it('after 24 hours only the new secret remains', async () => {
      clock.advance(24 * 60 * 60 * 1000 + 1);
      const active = await stack.service.app
        .get(WebhookSecrets)
        .active(await stack.service.app.get(SettingsReader).get(merchantId), clock);
      expect(active?.previous).toBeUndefined();
    });

    it('never writes a secret in clear to events, the secrets table or the Idempotency-Key rows', async () => {
      const client = new Client({ connectionString: db.url });
      await client.connect();
      try {
        const events = await client.query(
          'SELECT data::text AS d, metadata::text AS m FROM events WHERE stream_id = $1',
          [`merchant-${merchantId}`],
        );
        expect(events.rows.length).toBeGreaterThan(3);
        for (const row of events.rows) expect(`${row.d}${row.m}`).not.toContain('whsec_');
        const secrets = await client.query(
          'SELECT sealed_secret FROM webhook_secrets WHERE merchant_id = $1',
          [merchantId],
        );
        // The first secret and the seven rotations above that succeeded (the retried ones stored nothing more).
        expect(secrets.rows.length).toBe(8);
        for (const row of secrets.rows) expect(row.sealed_secret).not.toContain('whsec_');
        // Nor the kept answers of the keyed rotations above (replayed from the sealed copy).
        const kept = await client.query(
          `SELECT response_body FROM idempotency_keys WHERE scope = $1 AND state = 'done'`,
          [`${merchantId}:test`],
        );
        expect(kept.rows.length).toBeGreaterThan(0);
        for (const row of kept.rows) expect(row.response_body).not.toContain('whsec_');
      } finally {
        await client.end();
      }
    });

    it('rotation before any webhook URL is a 400', async () => {
      const other = await newMerchant('NoHooks');
      const res = await api('POST', '/settings/webhook/secret', undefined, {
        authorization: `Bearer ${str(other.body['api_key'])}`,
      });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ error: { code: 'webhook_not_configured' } });
    });
  });

  describe('pause authority (SPEC order of rejection rules)', () => {
    let message: string;
    beforeAll(async () => {
      const res = await api('GET', '/settings/pauser');
      expect(res.body).toMatchObject({ object: 'pauser_declaration', merchant_pauser: null, locked: false });
      message = str(res.body['declaration_message']);
      expect(message).toContain(merchantId);
    });

    it('400 invalid_request for a malformed merchant_pauser, before anything else', async () => {
      const res = await api('POST', '/settings/pauser', {
        merchant_pauser: '0x12',
        signature: '0x' + '00'.repeat(65),
      });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ error: { type: 'invalid_request', param: 'merchant_pauser' } });
    });

    it('400 invalid_request for a malformed signature', async () => {
      const res = await api('POST', '/settings/pauser', {
        merchant_pauser: Wallet.createRandom().address,
        signature: '0xdead',
      });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ error: { type: 'invalid_request', param: 'signature' } });
    });

    it("422 pauser_is_exodus_pauser for the operator's own pauser", async () => {
      const res = await api('POST', '/settings/pauser', {
        merchant_pauser: operator.address,
        signature: await operator.signMessage(message),
      });
      expect(res.status).toBe(422);
      expect(res.body).toMatchObject({ error: { type: 'cannot_process', code: 'pauser_is_exodus_pauser' } });
    });

    it('422 pauser_control_unproven when the signature is by another key', async () => {
      const pauser = Wallet.createRandom();
      const res = await api('POST', '/settings/pauser', {
        merchant_pauser: pauser.address,
        signature: await Wallet.createRandom().signMessage(message),
      });
      expect(res.status).toBe(422);
      expect(res.body).toMatchObject({ error: { type: 'cannot_process', code: 'pauser_control_unproven' } });
    });

    it('422 shared_pauser_risk_unacknowledged when the pauser is the merchant signer, accepted once acknowledged', async () => {
      const signature = await signer.signMessage(message);
      const refused = await api('POST', '/settings/pauser', { merchant_pauser: signer.address, signature });
      expect(refused.status).toBe(422);
      expect(refused.body).toMatchObject({ error: { code: 'shared_pauser_risk_unacknowledged' } });
      const accepted = await api('POST', '/settings/pauser', {
        merchant_pauser: signer.address,
        signature,
        acknowledge_shared_pauser_risk: true,
      });
      expect(accepted.status).toBe(200);
      expect(accepted.body).toMatchObject({
        merchant_pauser: signer.address,
        shared_pauser_risk_acknowledged: true,
      });
    });

    it('declares a separate pauser proven by its signature', async () => {
      const pauser = Wallet.createRandom();
      const res = await api('POST', '/settings/pauser', {
        merchant_pauser: pauser.address,
        signature: await pauser.signMessage(message),
      });
      expect(res.status).toBe(200);
      expect((await api('GET', '/settings/pauser')).body).toMatchObject({
        merchant_pauser: pauser.address,
        shared_pauser_risk_acknowledged: false,
      });
    });

    it('422 pauser_locked_by_deployment once the subscription manager is deployed', async () => {
      await stack.service.app
        .get(MerchantCommands)
        .recordSubscriptionManagerDeployed(merchantId, 'eip155:8453', Wallet.createRandom().address);
      const pauser = Wallet.createRandom();
      const res = await api('POST', '/settings/pauser', {
        merchant_pauser: pauser.address,
        signature: await pauser.signMessage(message),
      });
      expect(res.status).toBe(422);
      expect(res.body).toMatchObject({ error: { code: 'pauser_locked_by_deployment' } });
      expect((await api('GET', '/settings/pauser')).body['locked']).toBe(true);
    });

    it("refuses the deployed subscription manager as signer or settlement address, its own or another merchant's", async () => {
      const manager = str((await api('GET', '/settings')).body['subscription_manager_address']);
      const before = (await api('GET', '/settings')).body;
      for (const address of [manager, manager.toLowerCase()]) {
        const put = await api('PUT', '/payments/settlement', { settlement_address: address });
        expect(put.status).toBe(400);
        expect(put.body).toMatchObject({
          error: {
            type: 'validation_error',
            param: 'settlement_address',
            code: 'invalid_address',
            message: expect.stringContaining('your own subscription manager contract'),
          },
        });
      }
      const signer = await api('POST', '/settings', {
        merchant_signer: manager,
        settlement_address: before['settlement_address'],
      });
      expect(signer.status).toBe(400);
      expect(signer.body).toMatchObject({ error: { param: 'merchant_signer', code: 'invalid_address' } });
      const other = str((await newMerchant('Other Co')).body['api_key']);
      const pasted = await api(
        'POST',
        '/settings',
        { merchant_signer: Wallet.createRandom().address, settlement_address: manager },
        { authorization: `Bearer ${other}` },
      );
      expect(pasted.status).toBe(400);
      expect(pasted.body).toMatchObject({
        error: {
          param: 'settlement_address',
          code: 'invalid_address',
          message: expect.stringContaining("a Stablepay merchant's subscription manager contract"),
        },
      });
      const after = (await api('GET', '/settings')).body;
      expect([after['merchant_signer'], after['settlement_address']]).toEqual([
        before['merchant_signer'],
        before['settlement_address'],
      ]);
    });
  });

  it('publishes the merchant events on the bus topic merchants.merchant.v1, in order', async () => {
    const bus = stack.service.app.get<EventBus>(EVENT_BUS);
    const seen: BusMessage[] = [];
    const sub = await bus.consume({
      group: `test-${Date.now()}`,
      topics: ['merchants.merchant.v1'],
      handler: async (m) => void seen.push(m),
    });
    await sub.caughtUp();
    await sub.stop();
    const mine = seen.filter((m) => m.key === `merchant-${merchantId}`);
    expect(mine[0]).toMatchObject({
      type: 'MerchantCreated.v1',
      topic: 'merchants.merchant.v1',
      revision: 0,
    });
    expect(mine.map((m) => m.revision)).toEqual(mine.map((_m, i) => i));
    expect(mine.map((m) => m.type)).toEqual(
      expect.arrayContaining(['MerchantSignerRegistered.v1', 'WebhookSecretRotated.v1', 'PauserDeclared.v1']),
    );
  });
});
