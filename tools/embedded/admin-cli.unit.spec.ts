import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { freePort } from '@stablepay/testing';
import { gatewayUrl, payerAttestationRequest, runAdminCli, settlementExposuresPath } from './admin-cli';

describe('operator CLI (tools/embedded/admin-cli.ts) with no gateway at its address', () => {
  it('names the address it tried and how to give another, instead of "fetch failed"', async () => {
    const url = `http://127.0.0.1:${await freePort()}`;
    const out: string[] = [];
    const code = await runAdminCli(
      ['create-merchant', '--name', 'Initech', '--mode', 'test', '--url', url],
      { ADMIN_TOKEN: 'cli-token-0123456789-0123456789-ab' },
      (s) => out.push(s),
    );
    expect(code).toBe(1);
    expect(out.join('\n')).toMatch(
      new RegExp(
        `^could not reach the gateway at ${url} \\(.*ECONNREFUSED.*\\); pass --url <gateway url> or set STABLEPAY_URL$`,
      ),
    );
  });
});

describe('operator CLI gateway address', () => {
  it('takes --url, else STABLEPAY_URL, and an empty STABLEPAY_URL (a sourced .env) as not given', () => {
    const url = 'http://127.0.0.1:4010';
    expect(gatewayUrl(['--url', url], { STABLEPAY_URL: 'http://127.0.0.1:4020' })).toBe(url);
    expect(gatewayUrl([], { STABLEPAY_URL: url })).toBe(url);
    expect(gatewayUrl([], { STABLEPAY_URL: '' })).toBe('http://127.0.0.1:3000');
    expect(gatewayUrl([], {})).toBe('http://127.0.0.1:3000');
  });
});

describe('operator CLI deposit re-scan', () => {
  it('answers its usage, sending nothing, unless exactly one payment or customer of a merchant is named', async () => {
    for (const args of [
      ['rescan-deposit', '--payment', 'pay_x'],
      ['rescan-deposit', '--merchant', 'mer_x'],
      ['rescan-deposit', '--merchant', 'mer_x', '--payment', 'pay_x', '--customer', 'cus_x'],
    ]) {
      const out: string[] = [];
      expect(
        await runAdminCli(args, { ADMIN_TOKEN: 'cli-token-0123456789-0123456789-ab' }, (s) => out.push(s)),
      ).toBe(2);
      expect(out.join('\n')).toContain(
        'admin rescan-deposit --merchant <mer_...> (--payment <pay_...> | --customer <cus_...>)',
      );
    }
  });
});

describe('operator CLI withheld refund return', () => {
  it('answers its usage, sending nothing, unless a merchant, a payout and the destination are named', async () => {
    for (const args of [
      ['record-withheld-refund-return', '--payout', 'po_x', '--to', '0x1'],
      ['record-withheld-refund-return', '--merchant', 'mer_x', '--to', '0x1'],
      ['record-withheld-refund-return', '--merchant', 'mer_x', '--payout', 'po_x'],
    ]) {
      const out: string[] = [];
      expect(
        await runAdminCli(args, { ADMIN_TOKEN: 'cli-token-0123456789-0123456789-ab' }, (s) => out.push(s)),
      ).toBe(2);
      expect(out.join('\n')).toContain(
        'admin record-withheld-refund-return --merchant <mer_...> --payout <po_...> --to <0x...>',
      );
    }
  });
});

describe('operator CLI payer attestation', () => {
  it('answers its usage, sending nothing, unless a merchant, a payment and the payer are named', async () => {
    for (const args of [
      ['attest-payer', '--payment', 'pay_x', '--payer', '0x1'],
      ['attest-payer', '--merchant', 'mer_x', '--payer', '0x1'],
      ['attest-payer', '--merchant', 'mer_x', '--payment', 'pay_x'],
    ]) {
      const out: string[] = [];
      expect(
        await runAdminCli(args, { ADMIN_TOKEN: 'cli-token-0123456789-0123456789-ab' }, (s) => out.push(s)),
      ).toBe(2);
      expect(out.join('\n')).toContain(
        'admin attest-payer --merchant <mer_...> --payment <pay_...> --payer <0x...>',
      );
    }
  });

  it("names the operator route of the payment's payer attestation", () => {
    expect(
      payerAttestationRequest(['--merchant', 'mer_a', '--payment', 'pay_b', '--payer', '0xabc']),
    ).toEqual({ path: '/admin/merchants/mer_a/payments/pay_b/payer-attestations', body: { payer: '0xabc' } });
  });
});

describe('operator CLI settlement exposures', () => {
  it('asks the first page with no options, and passes mode, limit and a cursor on as the query', () => {
    expect(settlementExposuresPath([])).toBe('/admin/settlement-exposures');
    expect(
      settlementExposuresPath([
        '--mode',
        'live',
        '--limit',
        '50',
        '--starting-after',
        'pay_b',
        '--url',
        'http://x',
      ]),
    ).toBe('/admin/settlement-exposures?mode=live&limit=50&starting_after=pay_b');
    expect(settlementExposuresPath(['--ending-before', 'pay_a'])).toBe(
      '/admin/settlement-exposures?ending_before=pay_a',
    );
  });
});

describe('operator CLI charge settlement exposures', () => {
  it("asks the subscription charges' page, with the same options as the query", () => {
    expect(settlementExposuresPath([], 'charges')).toBe('/admin/charge-settlement-exposures');
    expect(settlementExposuresPath(['--mode', 'test', '--ending-before', 'subc_a'], 'charges')).toBe(
      '/admin/charge-settlement-exposures?mode=test&ending_before=subc_a',
    );
  });

  it('calls that route with the operator token and prints its answer', async () => {
    const calls: { url: string | undefined; auth: string | undefined }[] = [];
    const server = createServer((req, res) => {
      calls.push({ url: req.url, auth: req.headers.authorization });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ object: 'list', data: [], has_more: false }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const out: string[] = [];
    try {
      const code = await runAdminCli(
        ['charge-settlement-exposures', '--limit', '5', '--url', `http://127.0.0.1:${port}`],
        { ADMIN_TOKEN: 'adm_x' },
        (s) => out.push(s),
      );
      expect(code).toBe(0);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
    expect(calls).toEqual([{ url: '/admin/charge-settlement-exposures?limit=5', auth: 'Bearer adm_x' }]);
    expect(JSON.parse(out.join(''))).toEqual({ object: 'list', data: [], has_more: false });
  });
});
