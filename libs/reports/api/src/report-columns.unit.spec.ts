import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { csvRecord, neutraliseCell } from '@stablepay/http';
import type { PaymentObject } from '@stablepay/payments-domain';
import {
  PAYMENT_COLUMNS,
  SUBSCRIPTION_CHARGE_COLUMNS,
  SUBSCRIPTION_COLUMNS,
  tokenDecimalsOf,
} from './report-columns';

describe('tokenDecimalsOf (the token decimals from the two exact forms of one amount)', () => {
  it.each([
    ['12500000', '12.5', 6],
    ['12000000', '12', 6],
    ['500000', '0.5', 6],
    ['1', '0.000001', 6],
    ['12500000000000000000', '12.5', 18],
    ['125', '125', 0],
  ])('%s smallest units written %s has %i decimals', (units, decimal, decimals) => {
    expect(tokenDecimalsOf(units, decimal)).toBe(decimals);
  });

  it.each([
    [null, null],
    ['0', '0'],
    ['12500000', '13.5'],
  ])('cannot tell from %s and %s', (units, decimal) => {
    expect(tokenDecimalsOf(units, decimal)).toBeNull();
  });
});

describe('CSV cells (OWASP CSV injection)', () => {
  it.each(['=1+2', '+1', '-1', '@SUM(A1)', '\tx', '\rx'])('neutralises %j with a leading quote', (text) => {
    expect(neutraliseCell(text)).toBe(`'${text}`);
  });

  it.each([' =1+1', '  +1', '\u00A0=1+1', '\u3000@SUM(A1)', '\u200B=1+1', '\uFEFF-1+2', '\n=1+1', '\r\n=1'])(
    'neutralises %j: white space or an invisible character before the formula does not hide it from a trimming import',
    (text) => {
      expect(neutraliseCell(text)).toBe(`'${text}`);
    },
  );

  it.each(['\uFF1D1+1', '\uFF0B1', '\uFF0D1', '\uFF20SUM(A1)', ' \uFF1D1+1'])(
    'neutralises the full-width operator in %j (CJK-locale spreadsheets read it as ASCII)',
    (text) => {
      expect(neutraliseCell(text)).toBe(`'${text}`);
    },
  );

  it('leaves other text alone', () => {
    expect(neutraliseCell('ACME, "Inc"')).toBe('ACME, "Inc"');
    expect(neutraliseCell("'=1")).toBe("'=1");
    expect(neutraliseCell('a =1')).toBe('a =1');
    expect(neutraliseCell('cus_123')).toBe('cus_123');
    expect(neutraliseCell('{"note":"=1+1"}')).toBe('{"note":"=1+1"}');
  });

  it('neutralises only the columns marked untrusted, and writes null as empty and booleans as words', () => {
    const columns = [
      { header: 'amount', cell: (r: { n: string }) => r.n },
      { header: 'note', cell: (r: { n: string }) => r.n, untrusted: true },
      { header: 'none', cell: () => null },
      { header: 'flag', cell: () => false },
    ];
    expect(csvRecord(columns, { n: '-5' })).toEqual(['-5', "'-5", '', 'false']);
  });
});

describe('header rows (the contract an accountant appends exports by)', () => {
  const schemas = (
    parse(readFileSync(join(__dirname, '../../../../docs/openapi.yaml'), 'utf8')) as {
      components: { schemas: Record<string, { description: string }> };
    }
  ).components.schemas;
  // The columns docs/openapi.yaml lists, in its order: one "- `name`: ..." line each.
  const documented = (schema: string) =>
    [...(schemas[schema]?.description ?? '').matchAll(/^- `([a-z_0-9]+)`:/gm)].map((m) => m[1]);

  it.each([
    ['PaymentsExportCsv', PAYMENT_COLUMNS],
    ['SubscriptionsExportCsv', SUBSCRIPTION_COLUMNS],
    ['SubscriptionChargesExportCsv', SUBSCRIPTION_CHARGE_COLUMNS],
  ] as const)('%s lists exactly the columns sent, in the order sent', (schema, columns) => {
    expect(columns.map((c) => c.header)).toEqual(documented(schema));
  });
});

describe('payment rows', () => {
  it('name the token and chain of a recoverable amount, also for an abandoned deposit nothing funded (no detected token)', () => {
    const USDT = 'eip155:8453/erc20:0xfde4C96c8593536E31F229EA8f37b2ADa2699bb2';
    const abandoned = {
      status: 'recoverable',
      detected_asset: null,
      detected_chain: null,
      token_amount: null,
      token_amount_decimal: null,
      payer_addresses: [],
      transactions: [],
      metadata: {},
      recoverable_reason: 'abandoned',
      recoverable_amount: '3000000',
      recoverable_asset: USDT,
      recoverable_chain: 'eip155:8453',
    } as unknown as PaymentObject;
    const cells = csvRecord(PAYMENT_COLUMNS, abandoned);
    const row = Object.fromEntries(PAYMENT_COLUMNS.map((c, i) => [c.header, cells[i]]));
    expect(row).toMatchObject({
      detected_asset: '',
      recoverable_amount: '3000000',
      recoverable_asset: USDT,
      recoverable_chain: 'eip155:8453',
    });
  });

  it('keep what recover and rescue moved out and what came in without funding, per token, after the recoverable fields are gone', () => {
    const USDC = 'eip155:8453/erc20:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';
    const DAI = 'eip155:8453/erc20:0x50c5725949A6F0c72E6C4a641F24049A917DB0Cb';
    const transfer = (tx: string, asset: string, amount: string, isFunding: boolean) => ({
      tx_hash: tx,
      asset,
      amount,
      is_funding: isFunding,
    });
    const recovered = {
      status: 'settled',
      payer_addresses: [],
      transactions: [
        transfer('0xa', USDC, '2000000', true),
        transfer('0xb', USDC, '1000001', false),
        transfer('0xc', DAI, '3000000000000000000', false),
        transfer('0xd', USDC, '4', false),
      ],
      metadata: {},
      recovered_amounts: [{ asset: USDC, amount: '1000005' }],
      rescued_amounts: [{ asset: DAI, amount: '3000000000000000000' }],
    } as unknown as PaymentObject;
    const cells = csvRecord(PAYMENT_COLUMNS, recovered);
    const row = Object.fromEntries(PAYMENT_COLUMNS.map((c, i) => [c.header, cells[i]]));
    expect(row).toMatchObject({
      recoverable_amount: '',
      amount_recovered: `${USDC}=1000005`,
      amount_rescued: `${DAI}=3000000000000000000`,
      amount_non_funding: `${USDC}=1000005 ${DAI}=3000000000000000000`,
      non_funding_tx_hashes: '0xb 0xc 0xd',
    });
    // Appended: every column an earlier export had keeps its position.
    expect(PAYMENT_COLUMNS.map((c) => c.header).slice(-6)).toEqual([
      'recoverable_asset',
      'recoverable_chain',
      'amount_recovered',
      'amount_rescued',
      'amount_non_funding',
      'non_funding_tx_hashes',
    ]);
  });
});
