import type { HostedCancelView } from './hosted-cancel.port';
import { cancelPageScripts, renderCancelPage } from './cancel-page';

const view = (over: Partial<HostedCancelView> = {}): HostedCancelView => ({
  subscription_id: '0x' + 'cd'.repeat(32),
  status: 'active',
  subscriber: '0x1111111111111111111111111111111111111111',
  chain: 'eip155:8453',
  chain_id: 8453,
  chain_name: 'Base',
  token_symbol: 'USDC',
  manager_address: '0x2222222222222222222222222222222222222222',
  business_name: 'Acme',
  cancel_url: 'https://shop.example/account',
  background_color: null,
  primary_color: null,
  ...over,
});

describe('hosted cancel page', () => {
  it('names the business in the header, the title and the way back', () => {
    const html = renderCancelPage(view(), 'n');
    expect(html).toContain('<header class="bar" data-testid="business-name">Acme</header>');
    expect(html).toContain('<title>Cancel your Acme subscription</title>');
    expect(html).toContain('Ask Acme to cancel</a>');
  });

  // A name stored before the API refused text with no visible character (events are not rewritten).
  it.each([
    ['a word joiner and a BOM', '\u2060\uFEFF'],
    ['tag characters', '\u{E0041}\u{E0042}'],
    ['combining marks alone', '\u0301'],
  ])('falls back to Stablepay and "the business" for a stored name of %s', (_label, stored) => {
    const active = renderCancelPage(view({ business_name: stored }), 'n');
    expect(active).toContain('<header class="bar" data-testid="business-name">Stablepay</header>');
    expect(active).toContain('<title>Cancel your subscription</title>');
    expect(active).toContain('<p class="muted">To the business, paid in USDC on Base.</p>');
    expect(active).toContain('Ask the business to cancel</a>');
    const cancelled = renderCancelPage(view({ business_name: stored, status: 'cancelled' }), 'n');
    expect(cancelled).toContain('<header class="bar" data-testid="business-name">Stablepay</header>');
    expect(cancelled).toContain('>Return to the business</a>');
  });

  it('a subscription of the other chain mode is a state page that offers no wallet cancel', () => {
    const unavailable = view({ status: 'unavailable', manager_address: null });
    const html = renderCancelPage(unavailable, 'n');
    expect(html).toContain('data-status="unavailable"');
    expect(html).toContain('<title>This subscription cannot be cancelled here</title>');
    expect(html).toContain('Ask Acme to cancel it for you.');
    expect(html).toContain('href="https://shop.example/account">Return to Acme</a>');
    expect(html).not.toContain('cancel-data');
    expect(html).not.toContain('data-testid="cancel"');
    expect(cancelPageScripts(unavailable)).toEqual([]);
  });
});
