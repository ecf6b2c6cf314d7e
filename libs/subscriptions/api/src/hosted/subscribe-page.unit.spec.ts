import type { SubscriptionCheckoutObject, SubscriptionOption } from '@stablepay/subscriptions-domain';
import type { HostedSubscribeView } from '../subscription-checkouts.port';
import { formatFiat, formatPeriod, formatRate, formatToken } from './format';
import { renderNotFoundPage, renderSubscribePage, subscribePageScripts } from './subscribe-page';

const checkout: SubscriptionCheckoutObject = {
  object: 'subscription_checkout',
  id: 'schk_01jxyzexample0000000000000',
  status: 'pending',
  onchain_id: `0x${'ab'.repeat(32)}`,
  business_name: 'Acme & "Sons"',
  subscriber: null,
  external_customer_id: null,
  price: '150000',
  price_currency: 'ARS',
  period_duration: 2592000,
  cap: '300000',
  budget: '1500000',
  checkout_url: 'https://pay.example/subscribe/schk_01jxyzexample0000000000000',
  success_url: 'https://shop.example/ok/{SUBSCRIPTION_CHECKOUT_ID}',
  cancel_url: null,
  return_url: null,
  metadata: {
    plan_name: '<script>alert(1)</script>',
    plan_description: '</script><script>alert(2)</script>',
  },
  supported_chains: ['eip155:8453'],
  expires_at: '2026-06-01T10:05:00.000Z',
  created_at: '2026-06-01T10:00:00.000Z',
  updated_at: '2026-06-01T10:00:00.000Z',
  completed_at: null,
  cancelled_at: null,
  expired_at: null,
  cancellation_reason: null,
};
const option: SubscriptionOption = {
  chain: 'eip155:8453',
  chain_name: 'Base',
  asset: 'eip155:8453/erc20:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
  token_symbol: 'USDC',
  token_decimals: 6,
  token_address: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
  price_amount: '1265289',
  cap_amount: '2530578',
  budget_amount: '12652890',
  rate: '1185.50',
  rate_currency: 'ARS',
  rate_as_of: '2026-06-01T10:00:00.000Z',
  rate_source: 'sandbox',
};
const view = (over: Partial<HostedSubscribeView> = {}): HostedSubscribeView => ({
  checkout,
  status: 'pending',
  options: [option],
  backgroundColor: null,
  primaryColor: null,
  ...over,
});

describe('hosted subscribe page rendering', () => {
  it('escapes every piece of merchant input, in content and in the embedded JSON', () => {
    const html = renderSubscribePage(view(), 'n0nce');
    expect(html).not.toContain('<script>alert');
    expect(html).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(html).toContain('Acme &amp; &quot;Sons&quot;');
    // The JSON island cannot be closed by a </script> inside metadata.
    const island =
      /<script type="application\/json" id="subscribe-data">([\s\S]*?)<\/script>/.exec(html)?.[1] ?? '';
    expect(island).not.toContain('</script');
    const data = JSON.parse(island) as { checkout: Record<string, unknown> };
    expect(data).toMatchObject({
      checkout: { id: checkout.id, onchain_id: checkout.onchain_id },
      options: [{ asset: option.asset }],
    });
    // Opaque metadata never reaches the page; plan_name and plan_description only as escaped text.
    expect(data.checkout).not.toHaveProperty('metadata');
    // One fixed script (allowed by its hash); the style carries the nonce of the CSP.
    expect(html.match(/<script(?![^>]*application\/json)[^>]*>/g)).toEqual(['<script>']);
    expect(subscribePageScripts(view())).toHaveLength(1);
    expect(subscribePageScripts(view({ status: 'expired' }))).toEqual([]);
    expect(html).toContain('<style nonce="n0nce">');
  });

  it('shows the recurring amount, the converted amount and the rate of the first option', () => {
    const html = renderSubscribePage(view(), 'n');
    expect(html).toContain('ARS 1,500.00');
    expect(html).toContain('every 30 days');
    expect(html).toContain('1.265289 USDC');
    expect(html).toContain('1 USDC = 1,185.50 ARS');
  });

  it('says so when nothing can be priced, and offers no wallet step', () => {
    const html = renderSubscribePage(view({ options: [] }), 'n');
    expect(html).toContain('data-testid="no-options"');
    expect(html).not.toContain('data-testid="continue"');
  });

  it('renders a state page for completed, cancelled and expired intents, with the redirect placeholder filled in', () => {
    const completed = renderSubscribePage(
      view({ status: 'completed', checkout: { ...checkout, status: 'completed' } }),
      'n',
    );
    expect(completed).toContain('data-status="completed"');
    expect(completed).toContain(`href="https://shop.example/ok/${checkout.id}"`);
    for (const status of ['cancelled', 'expired'] as const) {
      const html = renderSubscribePage(view({ status }), 'n');
      expect(html).toContain(`data-status="${status}"`);
      expect(html).not.toContain('data-testid="dismiss"');
      expect(html).not.toContain('data-testid="return-link"'); // no cancel_url / return_url
    }
    expect(renderNotFoundPage('n')).toContain('Subscription link not found');
  });

  it('says an intent that cannot be subscribed to here is so, with no picker, wallet step or script', () => {
    const unavailable = view({ status: 'unavailable', options: [] });
    const html = renderSubscribePage(unavailable, 'n');
    expect(html).toContain('data-status="unavailable"');
    expect(html).toContain('This subscription cannot be set up here');
    expect(html).not.toContain('subscribe-data');
    expect(html).not.toContain('data-testid="continue"');
    expect(html).not.toContain('data-testid="dismiss"');
    expect(subscribePageScripts(unavailable)).toEqual([]);
  });
});

describe('hosted subscribe page with merchant text stored before the display-text rule', () => {
  // Events are not rewritten: a business name or plan text that shows nothing must not leave the page blank.
  const blank = {
    ...checkout,
    business_name: '\u200B\u2800',
    metadata: { plan_name: '\u3164', plan_description: '\uFEFF\u0301' },
  };

  it('falls back to Stablepay in the header and "the business" in its sentences, and leaves out blank plan texts', () => {
    const html = renderSubscribePage(view({ checkout: blank }), 'n');
    expect(html).toContain('<header class="bar" data-testid="business-name">Stablepay</header>');
    expect(html).toContain('<title>Subscribe to the business</title>');
    expect(html).toContain('<h1>Subscribe to the business</h1>');
    expect(html).not.toContain('data-testid="plan-name"');
    expect(html).not.toContain('data-testid="plan-description"');
    expect(html).toContain('Cancel and return to the business</button>');
  });

  it('names "the business" on the state pages', () => {
    const completed = renderSubscribePage(
      view({ status: 'completed', checkout: { ...blank, status: 'completed' } }),
      'n',
    );
    expect(completed).toContain('<header class="bar" data-testid="business-name">Stablepay</header>');
    expect(completed).toContain('Your subscription to the business is active.');
    expect(completed).toContain('>Return to the business</a>');
    const expired = renderSubscribePage(view({ status: 'expired', checkout: blank }), 'n');
    expect(expired).toContain('Nothing was charged. Ask the business for a new subscription link.');
  });
});

describe('formatting', () => {
  it('formats fiat minor units, token units, rates and periods exactly', () => {
    expect(formatFiat('150000', 'ARS')).toBe('ARS 1,500.00');
    expect(formatFiat('5', 'USD')).toBe('USD 0.05');
    expect(formatFiat('123456789012345678901234567890', 'ARS')).toBe(
      'ARS 1,234,567,890,123,456,789,012,345,678.90',
    );
    expect(formatToken('1265289', 6, 'USDC')).toBe('1.265289 USDC');
    expect(formatToken('1265288907633909743', 18, 'DAI')).toBe('1.265288907633909743 DAI');
    expect(formatToken('1234000000000', 6, 'USDT')).toBe('1,234,000 USDT');
    expect(formatRate('1185.50')).toBe('1,185.50');
    expect(formatPeriod(3600)).toBe('every hour');
    expect(formatPeriod(7200)).toBe('every 2 hours');
    expect(formatPeriod(86400)).toBe('every day');
    expect(formatPeriod(7 * 86400)).toBe('every week');
    expect(formatPeriod(30 * 86400)).toBe('every 30 days');
    expect(formatPeriod(365 * 86400)).toBe('every year');
    expect(formatPeriod(5400)).toBe('every 90 minutes');
    expect(formatPeriod(3601)).toBe('every 3,601 seconds');
  });
});
