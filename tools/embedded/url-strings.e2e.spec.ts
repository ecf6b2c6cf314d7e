import { randomBytes } from 'node:crypto';
import { Wallet } from 'ethers';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { type EmbeddedStack, startEmbedded } from './embedded';

/**
 * A NUL, another control character or half of a UTF-16 surrogate pair in a path or query parameter is refused with
 * 400 in the envelope, naming the parameter, on every route: before, a NUL cursor reached the list's SQL and
 * PostgreSQL's refusal (SQLSTATE 22021) came back as a 500.
 */
const ADMIN_TOKEN = 'admin-token-for-url-strings-0123456789';

describe('control characters and lone surrogates in the URL (embedded stack)', () => {
  let db: TestDatabase;
  let stack: EmbeddedStack;
  let key: string;
  let merchantId: string;

  const get = async (path: string) => {
    const res = await fetch(`${stack.url}${path}`, { headers: { authorization: `Bearer ${key}` } });
    return { status: res.status, body: (await res.json()) as { error?: Record<string, unknown> } };
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    stack = await startEmbedded({
      env: {
        DATABASE_URL: db.url,
        PORT: '0',
        ADMIN_TOKEN,
        OPERATOR_PAUSER_ADDRESS: Wallet.createRandom().address,
        LOG_LEVEL: 'fatal',
      },
      dataDir: 'memory',
      localChains: false,
    });
    const res = await fetch(`${stack.url}/admin/merchants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Acme', mode: 'test' }),
    });
    const created = (await res.json()) as { id: string; api_key: string };
    key = created.api_key;
    merchantId = created.id;
    // Starting the stack took over a minute on the shared machine at load 20.
  }, 180_000);

  afterAll(async () => {
    await stack?.stop();
    await db?.drop();
  });

  const refused = (param: string) => ({
    status: 400,
    body: { error: expect.objectContaining({ type: 'validation_error', code: 'invalid_string', param }) },
  });

  it.each(['%00', '%ED%A0%80', 'a%1Fb'])('refuses %s as a list cursor on every list', async (bad) => {
    expect(await get(`/checkouts?starting_after=${bad}`)).toEqual(refused('starting_after'));
    expect(await get(`/subscription-checkouts?ending_before=${bad}`)).toEqual(refused('ending_before'));
    expect(await get(`/merchants/${merchantId}/webhook-events?limit=5&starting_after=${bad}`)).toEqual(
      refused('starting_after'),
    );
    expect(await get(`/merchants/${merchantId}/charges?starting_after=${bad}`)).toEqual(
      refused('starting_after'),
    );
  });

  it.each(['%00', '%ED%A0%80', 'evt_%00'])('refuses %s as a path id', async (bad) => {
    expect(await get(`/merchants/${merchantId}/webhook-events/${bad}`)).toEqual(refused('eventId'));
    expect(await get(`/checkouts/${bad}`)).toEqual(refused('id'));
    expect(await get(`/subscriptions/${bad}`)).toEqual(refused('id'));
    expect(await get(`/merchants/${bad}/webhook-events`)).toEqual(refused('merchantId'));
  });

  it.each(['%ZZ', '%E0%A4', 'x%'])('refuses %s, which does not decode, as a query parameter', async (bad) => {
    const undecodable = (param: string) => ({
      status: 400,
      body: { error: expect.objectContaining({ type: 'invalid_request', code: 'invalid_url', param }) },
    });
    expect(await get(`/payments?limit=${bad}`)).toEqual(undecodable('limit'));
    expect(await get(`/payments?starting_after=${bad}`)).toEqual(undecodable('starting_after'));
    expect(await get(`/subscription-checkouts?limit=3&ending_before=${bad}`)).toEqual(
      undecodable('ending_before'),
    );
  });

  it('answers a long path id as any unknown id (404), not a framework 414 naming nothing', async () => {
    const long = 'x'.repeat(500);
    const notFound = { status: 404, body: { error: expect.objectContaining({ code: 'resource_missing' }) } };
    expect(await get(`/payments/pay_${long}`)).toEqual(notFound);
    expect(await get(`/checkouts/chk_${long}`)).toEqual(notFound);
    expect(await get(`/merchants/${merchantId}/webhook-events/evt_${long}`)).toEqual(notFound);
    expect(await get(`/merchants/mer_${long}/webhook-events`)).toEqual(notFound);
  });

  it('answers a long path id with an Idempotency-Key on a route without a merchant as any unknown id (404)', async () => {
    // Such a key's scope is the path, in the keys' primary key: a 6,000-byte id was a 500 (index row size), on the
    // operator's routes as on the hosted pages' posts, before the route's own 404 could answer. Random, as a
    // repetitive id compresses below the index's limit.
    for (const id of [
      `pay_${randomBytes(3000).toString('hex')}`,
      `pay_${randomBytes(700).toString('base64url')}é`,
    ]) {
      const res = await fetch(
        `${stack.url}/admin/merchants/${merchantId}/payments/${encodeURIComponent(id)}/payer-attestations`,
        {
          method: 'POST',
          headers: {
            authorization: `Bearer ${ADMIN_TOKEN}`,
            'idempotency-key': 'k1',
            'content-type': 'application/json',
          },
          body: JSON.stringify({ payer: Wallet.createRandom().address }),
        },
      );
      const body = (await res.json()) as { error?: Record<string, unknown> };
      expect({ status: res.status, code: body.error?.['code'] }).toEqual({
        status: 404,
        code: 'resource_missing',
      });
    }
  });

  it('still serves ids and cursors that are merely unknown, and non-ASCII text', async () => {
    expect((await get(`/checkouts?starting_after=chk_unknown`)).status).toBe(400);
    expect((await get(`/checkouts/chk_%E2%82%AC`)).body.error?.['code']).not.toBe('invalid_string');
    expect((await get(`/merchants/${merchantId}/webhook-events`)).status).toBe(200);
  });
});
