import { createHash } from 'node:crypto';
import { formatOrderAmount, type HostedPaymentView, payPageScripts, renderPayPage } from './pay-page';
import { PAY_SCRIPT } from './pay-script';
import { qrSvg } from './qr';
import { hostedPageHeaders } from './shell';

const view = (over: Partial<HostedPaymentView> = {}): HostedPaymentView => ({
  checkout_id: 'chk_01jxyzexample0000000000000',
  status: 'pending',
  amount: '25000000',
  currency: 'USD',
  amount_paid: '0',
  accepted_assets: [
    {
      asset: 'eip155:8453/erc20:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
      chain: 'eip155:8453',
      token_symbol: 'USDC',
      token_amount: '25000000',
      token_amount_decimal: '25',
    },
    {
      asset: 'eip155:137/erc20:0x8f3Cf7ad23Cd3CaDbD9735AFf958023239c6A063',
      chain: 'eip155:137',
      token_symbol: 'DAI',
      token_amount: '25000000000000000000',
      token_amount_decimal: '25',
    },
  ],
  deposit_address: '0x1111111111111111111111111111111111111111',
  detected_asset: null,
  detected_chain: null,
  expires_at: '2026-06-01T10:30:00.000Z',
  success_url: 'https://shop.example/thanks',
  cancel_url: 'https://shop.example/cart',
  business_name: 'Acme <b>&</b> "Sons"',
  background_color: null,
  primary_color: null,
  ...over,
});
const options = {
  nonce: 'n0nce',
  chainNames: { 'eip155:8453': 'Base', 'eip155:137': 'Polygon' },
  qrSvg: '<svg></svg>',
};

describe('hosted payment page rendering', () => {
  // Names a merchant could store before the API refused text with no visible character (events are not rewritten).
  it.each([
    ['zero-width characters', '\u200B\u2060'],
    ['a Hangul filler and an ideographic space', '\u3164\u3000'],
    ['a right-to-left override alone', '\u202E'],
    ['combining marks alone', '\u0301\u0308'],
  ])(
    'falls back to Stablepay in the header and to "the business" in its sentences for a stored name of %s',
    (_label, stored) => {
      const pending = renderPayPage(view({ business_name: stored }), options);
      expect(pending).toContain('<header class="bar" data-testid="business-name">Stablepay</header>');
      expect(pending).toContain('<title>Pay the business</title>');
      expect(pending).toContain('<h1 data-testid="title">Pay the business</h1>');
      const paid = renderPayPage(view({ business_name: stored, status: 'paid' }), options);
      expect(paid).toContain('<header class="bar" data-testid="business-name">Stablepay</header>');
      expect(paid).toContain('>Return to the business</a>');
    },
  );

  it('shows the order amount, the first token and network, the deposit address with its QR, and escapes merchant input', () => {
    const html = renderPayPage(view(), options);
    expect(html).toContain('25.00 USD');
    expect(html).toContain('data-testid="send-amount">25 USDC<');
    expect(html).toContain('data-testid="send-chain">Base<');
    expect(html).toContain('0x1111111111111111111111111111111111111111');
    expect(html).toContain(
      '<div class="qr" data-testid="qr" role="img" aria-label="QR code of the deposit address"><svg></svg></div>',
    );
    expect(html).toContain('Acme &lt;b&gt;&amp;&lt;/b&gt; &quot;Sons&quot;');
    expect(html).not.toContain('<b>&</b>');
    expect(html).toContain('<option value="eip155:137">Polygon</option>');
    expect(html).toContain('data-status="pending"');
  });

  it('runs only its fixed script (allowed by hash) and carries the data as a JSON island without redirect URLs', () => {
    const html = renderPayPage(view(), options);
    const inline = [...html.matchAll(/<script>([\s\S]*?)<\/script>/g)].map((m) => m[1]);
    expect(inline).toEqual([PAY_SCRIPT]);
    const csp = hostedPageHeaders({ nonce: 'n0nce', scripts: payPageScripts(view()) })[
      'content-security-policy'
    ];
    const hash = createHash('sha256').update(PAY_SCRIPT).digest('base64');
    expect(csp).toContain(`script-src 'sha256-${hash}';`);
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).toContain("connect-src 'self'");
    expect(csp).not.toContain('unsafe');
    const island =
      /<script type="application\/json" id="pay-data">([\s\S]*?)<\/script>/.exec(html)?.[1] ?? '';
    const data = JSON.parse(island) as Record<string, unknown>;
    expect(data).toMatchObject({ checkout_id: view().checkout_id, deposit_address: view().deposit_address });
    expect(island).not.toContain('shop.example');
  });

  it('renders a state page without scripts once the payment is final, with the way back', () => {
    const paid = renderPayPage(view({ status: 'paid' }), options);
    expect(paid).toContain('data-testid="state" data-status="paid"');
    expect(paid).toContain('Payment complete');
    expect(paid).toContain('href="https://shop.example/thanks"');
    expect(paid).not.toContain('<script');
    expect(payPageScripts(view({ status: 'paid' }))).toEqual([]);
    expect(hostedPageHeaders({ nonce: 'n', scripts: [] })['content-security-policy']).toContain(
      "script-src 'none'",
    );
    const expired = renderPayPage(view({ status: 'expired' }), options);
    expect(expired).toContain('This payment link has expired');
    expect(expired).toContain('href="https://shop.example/cart"');
    expect(expired).not.toContain('data-testid="deposit-address"');
  });

  it('says a payment that cannot be paid here is so, with no deposit address, QR code or script', () => {
    // Also a live status without an address: the paying page is never rendered without one.
    for (const v of [
      view({ status: 'unavailable', deposit_address: null, accepted_assets: [] }),
      view({ status: 'pending', deposit_address: null }),
    ]) {
      const html = renderPayPage(v, options);
      expect(html).not.toContain('data-testid="deposit-address"');
      expect(html).not.toContain('data-testid="qr"');
      expect(html).not.toContain('<script');
      expect(payPageScripts(v)).toEqual([]);
    }
    const html = renderPayPage(view({ status: 'unavailable', deposit_address: null }), options);
    expect(html).toContain('data-testid="state" data-status="unavailable"');
    expect(html).toContain('This payment cannot be paid here');
    expect(html).toContain('Do not send funds to it');
    expect(html).toContain('href="https://shop.example/cart"');
  });

  it('formats the 6-decimal order amount with at least two decimals', () => {
    expect(formatOrderAmount('25000000', 'USD')).toBe('25.00 USD');
    expect(formatOrderAmount('1', 'USD')).toBe('0.000001 USD');
    expect(formatOrderAmount('1234567890000', 'ARS')).toBe('1,234,567.89 ARS');
    expect(formatOrderAmount('500000', 'EUR')).toBe('0.50 EUR');
  });

  it('draws the deposit address as an inline SVG QR code without style attributes', async () => {
    const svg = await qrSvg('0x1111111111111111111111111111111111111111');
    expect(svg.startsWith('<svg')).toBe(true);
    expect(svg).toContain('<path');
    expect(svg).not.toContain('style=');
    expect(svg).not.toContain('<script');
  });
});
