import { parse } from 'csv-parse/sync';
import { request as httpRequest } from 'node:http';
import { DataSource } from 'typeorm';
import { type ExportSlots } from '@stablepay/http';
import { REPORT_EXPORT_SLOTS, REPORTS_USE_CASES, type ReportsUseCases } from '@stablepay/reports-api';
import { createTestDatabase, eventually, metricValue, type TestDatabase } from '@stablepay/testing';
import { type EmbeddedStack, startEmbedded } from './embedded';

/**
 * SPEC Endpoints > Reports over real HTTP: the CSV exports of payments, subscriptions and subscription charges
 * (docs/reports.md). The read models are seeded with direct inserts (the exports read nothing else), the CSV is read
 * back with csv-parse.
 */
const ADMIN_TOKEN = 'admin-token-for-tests-0123456789';
const USDC = 'eip155:8453/erc20:0x833589fcd6edb6e08f4c7c32d4f71b54bda02913';
const hex = (n: number, width = 64) => `0x${n.toString(16).padStart(width, '0')}`;

interface Merchant {
  id: string;
  apiKey: string;
}

describe('CSV reports (GET /reports/*/export)', () => {
  let db: TestDatabase;
  let stack: EmbeddedStack;
  let data: DataSource;
  let a: Merchant;
  let b: Merchant;
  let counter = 0;

  const newMerchant = async (name: string, mode: 'test' | 'live' = 'test'): Promise<Merchant> => {
    const res = await fetch(`${stack.url}/admin/merchants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name, mode }),
    });
    const body = (await res.json()) as { id: string; api_key: string };
    return { id: body.id, apiKey: body.api_key };
  };

  const exportOf = async (who: Merchant, path: string) => {
    const res = await fetch(`${stack.url}/reports/${path}`, {
      headers: { authorization: `Bearer ${who.apiKey}` },
    });
    const text = await res.text();
    return { res, text };
  };
  const rowsOf = (text: string): Array<Record<string, string>> =>
    parse(text, { columns: true, skip_empty_lines: false, relax_column_count: false });

  /**
   * `n` payments of `merchantId` in `mode` with consecutive creation times from `start` (one second apart); the
   * first gets `extra` merged into its object. Returns the ids in creation order.
   */
  const seedPayments = async (
    merchantId: string,
    mode: 'test' | 'live',
    n: number,
    options: { status?: string; start?: string; extra?: Record<string, unknown> } = {},
  ): Promise<string[]> => {
    const base = ++counter;
    const start = options.start ?? '2026-03-01T00:00:00Z';
    const rows: Array<{ id: string }> = await data.query(
      `INSERT INTO payments (id, checkout_id, merchant_id, mode, status, method, deposit_address, detected_chain,
         created_at, expires_at, updated_at, object, revision)
       SELECT 'pay_' || lpad($1::text, 8, '0') || lpad(i::text, 18, '0'),
              'chk_' || lpad($1::text, 8, '0') || lpad(i::text, 18, '0'),
              $2, $3, $4, 'DIRECT', '0x' || lpad(to_hex(i), 40, '0'), 'eip155:8453',
              $5::timestamptz + make_interval(secs => i), $5::timestamptz + interval '1 day',
              $5::timestamptz + make_interval(secs => i),
              jsonb_build_object(
                'id', 'pay_' || lpad($1::text, 8, '0') || lpad(i::text, 18, '0'), 'object', 'payment',
                'checkout_id', 'chk_' || lpad($1::text, 8, '0') || lpad(i::text, 18, '0'),
                'status', $4::text, 'method', 'DIRECT', 'amount', '12500000', 'amount_paid', '12500000',
                'currency', 'USD', 'detected_asset', $6::text, 'detected_token_symbol', 'USDC',
                'detected_chain', 'eip155:8453', 'token_amount', '12500000', 'token_amount_decimal', '12.5',
                'on_chain_id', '0x' || lpad(to_hex(i), 64, '0'), 'deposit_address', '0x' || lpad(to_hex(i), 40, '0'),
                'deploy_tx_hash', null, 'deploy_hold_reason', null,
                'payer_addresses', jsonb_build_array('0x' || lpad('ab', 40, '0')),
                'transactions', jsonb_build_array(jsonb_build_object('tx_hash', '0x' || lpad(to_hex(i), 64, 'f'),
                  'log_index', 0, 'from', '0x' || lpad('ab', 40, '0'), 'amount', '12500000', 'asset', $6::text,
                  'token_symbol', 'USDC', 'chain', 'eip155:8453', 'block_number', '7', 'is_funding', true,
                  'non_funding_reason', null, 'confirmed', true)),
                'non_funding_transactions_count', 0, 'amount_captured', '0', 'amount_refunded', '0',
                'authorization_expires_at', null,
                'expires_at', to_char(($5::timestamptz + interval '1 day') AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                'metadata', jsonb_build_object('order', 'o-' || i),
                'settlement_status', null,
                'created_at', to_char(($5::timestamptz + make_interval(secs => i)) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                'updated_at', to_char(($5::timestamptz + make_interval(secs => i)) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
              ) || CASE WHEN i = 1 THEN $7::jsonb ELSE '{}'::jsonb END,
              1
       FROM generate_series(1, $8::int) AS i ORDER BY i RETURNING id`,
      [
        base,
        merchantId,
        mode,
        options.status ?? 'settled',
        start,
        USDC,
        JSON.stringify(options.extra ?? {}),
        n,
      ],
    );
    return rows.map((r) => r.id);
  };

  const seedSubscription = async (
    merchantId: string,
    mode: 'test' | 'live',
    externalCustomerId: string | null,
  ): Promise<string> => {
    const id = hex(++counter);
    const object = {
      object: 'subscription',
      id,
      subscription_id: id,
      subscriber: '0x' + 'cd'.repeat(20),
      external_customer_id: externalCustomerId,
      asset: USDC,
      token_symbol: 'USDC',
      token_decimals: 6,
      chain: 'eip155:8453',
      cap_amount: '20000000',
      price: '1500',
      price_currency: 'USD',
      period_duration: 2592000,
      last_charged_at: '2026-03-01T00:00:00.000Z',
      next_charge_at: '2026-03-31T00:00:00.000Z',
      charge_nonce: 1,
      status: 'active',
      paused: false,
      flagged: false,
      budget: '20000000',
      spent_this_period: '15000000',
      remaining_budget: '5000000',
      created_at: '2026-03-01T00:00:00.000Z',
    };
    await data.query(
      `INSERT INTO subscriptions (id, merchant_id, mode, chain, subscriber, status, external_customer_id, started_at,
         period_duration, window_index, window_spent, budget, object, revision, created_at, updated_at)
       VALUES ($1, $2, $3, 'eip155:8453', $4, 'active', $5, $6, 2592000, 0, 15000000, 20000000, $7, 1, $8, $8)`,
      [
        id,
        merchantId,
        mode,
        object.subscriber,
        externalCustomerId,
        // Started an hour ago: the export brings the window fields to the chain's (here the clock's) time.
        String(Math.floor(Date.now() / 1000) - 3600),
        JSON.stringify(object),
        object.created_at,
      ],
    );
    return id;
  };

  const seedCharge = async (
    merchantId: string,
    mode: 'test' | 'live',
    subscriptionId: string,
    nonce: number,
    status: 'succeeded' | 'failed',
  ): Promise<string> => {
    const id = `subc_${(++counter).toString().padStart(26, '0')}`;
    const txHash = status === 'succeeded' ? hex(counter * 7) : null;
    const object = {
      object: 'subscription_charge',
      id,
      subscription_id: subscriptionId,
      subscriber: '0x' + 'cd'.repeat(20),
      amount: '15000000',
      fee: status === 'succeeded' ? '1200' : '0',
      tx_hash: txHash,
      chain: 'eip155:8453',
      charge_nonce: nonce,
      charged_at: `2026-03-0${nonce + 1}T00:00:00.000Z`,
      block_number: status === 'succeeded' ? '100' : '0',
      created_at: `2026-03-0${nonce + 1}T00:00:01.000Z`,
      status,
      failure_reason: status === 'failed' ? 'InsufficientBalance' : null,
      fiat_amount: status === 'succeeded' ? '1500' : null,
      fiat_currency: status === 'succeeded' ? 'USD' : null,
      settlement_status: status === 'succeeded' ? 'completed' : null,
    };
    await data.query(
      `INSERT INTO subscription_charges (id, merchant_id, mode, subscription_id, subscriber, chain, status, tx_hash,
         charge_nonce, charged_at, created_at, object, revision)
       VALUES ($1, $2, $3, $4, $5, 'eip155:8453', $6, $7, $8, $9, $10, $11, 1)`,
      [
        id,
        merchantId,
        mode,
        subscriptionId,
        object.subscriber,
        status,
        txHash,
        nonce,
        object.charged_at,
        object.created_at,
        JSON.stringify(object),
      ],
    );
    return id;
  };

  const fakeHttp = () => {
    const reply = { header: () => reply };
    return { request: { ip: '127.0.0.1' } as never, reply: reply as never };
  };
  /** Whether the merchant could start its two exports now (takes both slots, gives them back). */
  const bothSlotsFree = async (merchantId: string): Promise<boolean> => {
    const slots = stack.service.app.get<ExportSlots>(REPORT_EXPORT_SLOTS);
    const { request, reply } = fakeHttp();
    const held: Array<() => void> = [];
    try {
      held.push(await slots.take(merchantId, request, reply));
      held.push(await slots.take(merchantId, request, reply));
      return true;
    } catch {
      return false;
    } finally {
      held.forEach((release) => release());
    }
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    stack = await startEmbedded({
      env: {
        DATABASE_URL: db.url,
        PORT: '0',
        ADMIN_TOKEN,
        LOG_LEVEL: 'error',
        STABLEPAY_LOCAL_CHAINS: 'false',
      },
      dataDir: 'memory',
    });
    data = stack.service.app.get(DataSource);
    a = await newMerchant('Reports A');
    b = await newMerchant('Reports B');
  });

  afterAll(async () => {
    await stack?.stop();
    await db?.drop();
  });

  it("exports the key's own payments of its mode, oldest first, as an RFC 4180 attachment", async () => {
    const mine = await seedPayments(a.id, 'test', 3, {
      extra: {
        metadata: { note: '=HYPERLINK("http://evil")', 'line,break': 'a "quoted"\r\nvalue' },
        settlement_status: 'completed',
      },
    });
    await seedPayments(a.id, 'live', 2);
    await seedPayments(b.id, 'test', 2);

    const { res, text } = await exportOf(a, 'payments/export');

    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    const day = new Date().toISOString().slice(0, 10);
    expect(res.headers.get('content-disposition')).toBe(`attachment; filename="payments-test-${day}.csv"`);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(text.split('\r\n')[0]).toBe(
      'id,created_at,updated_at,status,method,checkout_id,currency,amount,amount_decimals,detected_chain,' +
        'detected_asset,token_symbol,token_decimals,token_amount,amount_paid,amount_captured,amount_refunded,' +
        'deposit_address,payer_addresses,funding_tx_hashes,deploy_tx_hash,settlement_status,' +
        'settlement_failure_reason,failure_reason,failure_message,recoverable_reason,recoverable_amount,' +
        'expires_at,metadata,recoverable_asset,recoverable_chain,amount_recovered,amount_rescued,' +
        'amount_non_funding,non_funding_tx_hashes',
    );
    const rows = rowsOf(text);
    expect(rows.map((r) => r['id'])).toEqual(mine);
    expect(rows[0]).toMatchObject({
      status: 'settled',
      method: 'DIRECT',
      currency: 'USD',
      amount: '12500000',
      amount_decimals: '6',
      token_symbol: 'USDC',
      token_decimals: '6',
      token_amount: '12500000',
      amount_paid: '12500000',
      detected_chain: 'eip155:8453',
      detected_asset: USDC,
      funding_tx_hashes: `0x${'1'.padStart(64, 'f')}`,
      settlement_status: 'completed',
      failure_reason: '',
      created_at: '2026-03-01T00:00:01.000Z',
    });
    // Metadata is one JSON cell (a quote, comma and line break survive RFC 4180 quoting); JSON starts with `{`, so
    // it is never read as a formula.
    expect(JSON.parse(rows[0]?.['metadata'] ?? '')).toEqual({
      note: '=HYPERLINK("http://evil")',
      'line,break': 'a "quoted"\r\nvalue',
    });
  });

  it('sends the header row alone when nothing matches', async () => {
    const nobody = await newMerchant('Reports Empty');
    for (const path of ['payments/export', 'subscriptions/export', 'subscription-charges/export']) {
      const { res, text } = await exportOf(nobody, path);
      expect(res.status).toBe(200);
      expect(text.split('\r\n').filter((l) => l !== '')).toHaveLength(1);
      expect(rowsOf(text)).toEqual([]);
    }
  });

  it('filters as GET /payments does (status, created range)', async () => {
    const m = await newMerchant('Reports Filters');
    const settled = await seedPayments(m.id, 'test', 3, { start: '2026-04-01T00:00:00Z' });
    const failed = await seedPayments(m.id, 'test', 2, { status: 'failed', start: '2026-05-01T00:00:00Z' });

    const byStatus = rowsOf((await exportOf(m, 'payments/export?status=failed')).text);
    expect(byStatus.map((r) => r['id'])).toEqual(failed);
    const byCreated = rowsOf(
      (await exportOf(m, 'payments/export?created[gte]=2026-04-01T00:00:02Z&created[lt]=2026-05-01')).text,
    );
    expect(byCreated.map((r) => r['id'])).toEqual(settled.slice(1));
  });

  it.each([
    ['payments/export?bogus=1', 'bogus', 'unknown_parameter'],
    ['payments/export?status=paid', 'status', undefined],
    ['payments/export?created[gte]=yesterday', 'created[gte]', undefined],
    ['payments/export?limit=10', 'limit', 'unknown_parameter'],
    ['subscriptions/export?chain=base', 'chain', undefined],
    ['subscription-charges/export?charged_from=2026-13-01T00:00:00Z', 'charged_from', undefined],
    ['subscription-charges/export?status=succeeded&status=failed', 'status', undefined],
  ])('refuses %s with 400 in the envelope before any CSV byte', async (path, param, code) => {
    const { res, text } = await exportOf(a, path);
    expect(res.status).toBe(400);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const body = JSON.parse(text) as { error: { type: string; param: string; code: string } };
    expect(body.error).toMatchObject({ type: 'validation_error', param });
    if (code) expect(body.error.code).toBe(code);
  });

  it('answers HEAD with the export headers without reading a row or taking a slot', async () => {
    const m = await newMerchant('Reports Head');
    await seedPayments(m.id, 'test', 3);
    const reports = stack.service.app.get<ReportsUseCases>(REPORTS_USE_CASES);
    const payments = reports.payments.bind(reports);
    let iterated = false;
    const read = jest.spyOn(reports, 'payments').mockImplementation((merchant, filters) => {
      const { rows, startedAt } = payments(merchant, filters);
      return {
        startedAt,
        rows: {
          [Symbol.asyncIterator]: () => {
            iterated = true;
            return rows[Symbol.asyncIterator]();
          },
        },
      };
    });
    try {
      const head = (path: string, apiKey = m.apiKey) =>
        fetch(`${stack.url}/reports/${path}`, {
          method: 'HEAD',
          headers: { authorization: `Bearer ${apiKey}` },
        });
      const res = await head('payments/export');
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('text/csv; charset=utf-8');
      expect(res.headers.get('content-disposition')).toMatch(
        /^attachment; filename="payments-test-\d{4}-\d{2}-\d{2}\.csv"$/,
      );
      expect(res.headers.get('content-length')).toBeNull();
      expect(await res.text()).toBe('');
      // Before, Fastify ran the GET route and drained its body: the whole export read, a slot held meanwhile.
      expect(iterated).toBe(false);
      expect(await bothSlotsFree(m.id)).toBe(true);
      // Checked as a GET is: a bad parameter is still 400.
      expect((await head('payments/export?status=nope')).status).toBe(400);
    } finally {
      read.mockRestore();
    }
    // The GET of the same export reads its rows.
    expect(rowsOf((await exportOf(m, 'payments/export')).text)).toHaveLength(3);
  });

  it('answers 401 without a key', async () => {
    const res = await fetch(`${stack.url}/reports/payments/export`);
    expect(res.status).toBe(401);
  });

  it('exports more rows than one database batch, each once, in order', async () => {
    const m = await newMerchant('Reports Many');
    const ids = await seedPayments(m.id, 'test', 2_345);
    const rows = rowsOf((await exportOf(m, 'payments/export')).text);
    expect(rows).toHaveLength(2_345);
    expect(rows.map((r) => r['id'])).toEqual(ids);
  });

  it('neutralises formula cells in merchant-supplied text (OWASP CSV injection)', async () => {
    const m = await newMerchant('Reports Injection');
    const hostile = [
      '=1+2',
      '+SUM(A1)',
      '-3+4',
      '@cmd',
      '\tTAB',
      '\rCR',
      ' =1+2',
      '\uFF1D1+2',
      'plain, "quoted"',
    ];
    for (const text of hostile) await seedSubscription(m.id, 'test', text);
    const { text } = await exportOf(m, 'subscriptions/export');
    const rows = rowsOf(text);
    expect(rows.map((r) => r['external_customer_id'])).toEqual([
      "'=1+2",
      "'+SUM(A1)",
      "'-3+4",
      "'@cmd",
      "'\tTAB",
      "'\rCR",
      "' =1+2",
      "'\uFF1D1+2",
      'plain, "quoted"',
    ]);
  });

  it("exports subscriptions of the key's merchant and mode with the window at the chain's time", async () => {
    const m = await newMerchant('Reports Subscriptions');
    const mine = await seedSubscription(m.id, 'test', 'cus_1');
    await seedSubscription(m.id, 'live', 'cus_live');
    await seedSubscription(b.id, 'test', 'cus_other');
    const { res, text } = await exportOf(m, 'subscriptions/export');
    const day = new Date().toISOString().slice(0, 10);
    expect(res.headers.get('content-disposition')).toBe(
      `attachment; filename="subscriptions-test-${day}.csv"`,
    );
    const rows = rowsOf(text);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      id: mine,
      status: 'active',
      paused: 'false',
      flagged: 'false',
      token_symbol: 'USDC',
      token_decimals: '6',
      price: '1500',
      price_currency: 'USD',
      cap_amount: '20000000',
      budget: '20000000',
      spent_this_period: '15000000',
      remaining_budget: '5000000',
      period_duration: '2592000',
      external_customer_id: 'cus_1',
    });
    const filtered = rowsOf((await exportOf(m, 'subscriptions/export?status=cancelled')).text);
    expect(filtered).toEqual([]);
  });

  it('exports subscription charges with the token of their subscription, filtered as the ledger list is', async () => {
    const m = await newMerchant('Reports Charges');
    const s = await seedSubscription(m.id, 'test', null);
    const ok = await seedCharge(m.id, 'test', s, 0, 'succeeded');
    const failed = await seedCharge(m.id, 'test', s, 1, 'failed');
    const otherSub = await seedSubscription(b.id, 'test', null);
    await seedCharge(b.id, 'test', otherSub, 0, 'succeeded');
    await seedCharge(m.id, 'live', s, 2, 'succeeded');

    const rows = rowsOf((await exportOf(m, 'subscription-charges/export')).text);
    expect(rows.map((r) => r['id'])).toEqual([ok, failed]);
    expect(rows[0]).toMatchObject({
      status: 'succeeded',
      subscription_id: s,
      asset: USDC,
      token_symbol: 'USDC',
      token_decimals: '6',
      amount: '15000000',
      fee: '1200',
      charge_nonce: '0',
      block_number: '100',
      fiat_amount: '1500',
      fiat_currency: 'USD',
      settlement_status: 'completed',
      failure_reason: '',
      charged_at: '2026-03-01T00:00:00.000Z',
    });
    expect(rows[1]).toMatchObject({
      status: 'failed',
      tx_hash: '',
      fee: '0',
      failure_reason: 'InsufficientBalance',
      settlement_status: '',
    });
    const onlyFailed = rowsOf((await exportOf(m, 'subscription-charges/export?status=failed')).text);
    expect(onlyFailed.map((r) => r['id'])).toEqual([failed]);
  });

  it('refuses a third concurrent export of one merchant with 429 and Retry-After', async () => {
    const m = await newMerchant('Reports Busy');
    const slots = stack.service.app.get<ExportSlots>(REPORT_EXPORT_SLOTS);
    const { request, reply } = fakeHttp();
    // Two exports running (slots held as a running export holds them).
    const releases = [await slots.take(m.id, request, reply), await slots.take(m.id, request, reply)];
    const { res, text } = await exportOf(m, 'payments/export');
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).toBe('5');
    expect(JSON.parse(text)).toMatchObject({ error: { type: 'rate_limited', code: 'rate_limited' } });
    // Another merchant is not held back by this one's exports.
    expect((await exportOf(b, 'payments/export')).res.status).toBe(200);
    releases.forEach((release) => release());
    await eventually(() => bothSlotsFree(m.id), Boolean, 'the slots given back');
    expect((await exportOf(m, 'payments/export')).res.status).toBe(200);
  });

  it('counts the export routes in the HTTP metrics by their pattern', async () => {
    await exportOf(a, 'payments/export?status=settled');
    const metrics = await (await fetch(`${stack.url}/metrics`)).text();
    expect(
      metricValue(metrics, 'stablepay_http_requests_total', {
        method: 'GET',
        route: '/reports/payments/export',
        status: '200',
        status_class: '2xx',
      }),
    ).toBeGreaterThan(0);
  });

  it('stops reading and gives the connection and the slot back when the client leaves mid-export', async () => {
    const m = await newMerchant('Reports Leaver');
    // Far more than the socket buffers hold, so the export is still reading when the client goes.
    // Far more than the socket buffers hold, so the export is still reading when the client goes.
    await seedPayments(m.id, 'test', 30_000);
    const metric = async () =>
      metricValue(await (await fetch(`${stack.url}/metrics`)).text(), 'stablepay_report_exports_total', {
        report: 'payments',
        outcome: 'aborted',
      });
    const abortedBefore = await metric();

    await new Promise<void>((resolve, reject) => {
      const req = httpRequest(
        `${stack.url}/reports/payments/export`,
        { headers: { authorization: `Bearer ${m.apiKey}` } },
        (res) => {
          res.once('data', () => {
            // Mid-export: the header and the first rows arrived, then the client goes.
            req.destroy();
            resolve();
          });
        },
      );
      req.on('error', (error) => {
        if ((error as NodeJS.ErrnoException).code !== 'ECONNRESET') reject(error);
      });
      req.end();
    });

    await eventually(() => bothSlotsFree(m.id), Boolean, 'the export slot given back');
    await eventually(metric, (n) => n === abortedBefore + 1, 'the export counted as aborted');
    if (db.kind === 'pglite') {
      // PGlite reads in keyset batches: no connection is held between them, nothing else to see.
      return;
    }
    // The cursor's connection was discarded, not left open mid-portal: no backend is still on the export.
    await eventually(
      async () =>
        (
          (await data.query(
            `SELECT count(*)::int AS n FROM pg_stat_activity
             WHERE datname = current_database() AND query LIKE '%stablepay:export payments%' AND state <> 'idle' AND pid <> pg_backend_pid()`,
          )) as Array<{ n: number }>
        )[0]?.n,
      (n) => n === 0,
      'no backend left on the export',
    );
  });
});
