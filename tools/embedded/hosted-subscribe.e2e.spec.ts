import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { SubscriptionCheckoutCommands, SubscriptionCheckoutReader } from '@stablepay/subscriptions-service';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { ManualClock } from '@stablepay/util';
import { ARTIFACTS, collectPageErrors, describeWithChromium, launchChromium } from './browser/chromium';
import { type EmbeddedStack, startEmbedded } from './embedded';

/**
 * The hosted subscribe page in headless Chromium (Debian's `chromium`, driven by playwright-core): content,
 * escaping of merchant metadata, branding colors with automatic text contrast, the chain and token picker, the
 * dismiss action and the state pages. Screenshots land in test-artifacts/. Skipped, with the reason printed,
 * only where no Chromium is installed (.ci/run installs it, so CI always runs this).
 */
const ADMIN_TOKEN = 'admin-token-for-tests-0123456789';
const clock = new ManualClock('2026-06-01T10:00:00.000Z');
type Json = Record<string, unknown>;

/** The browser globals the page functions below use (this project compiles without the DOM library). */
interface BrowserGlobal {
  __pwned?: number;
  getComputedStyle(element: unknown): { getPropertyValue(property: string): string };
}

const rgb = (hex: string) => {
  const n = parseInt(hex.slice(1), 16);
  return `rgb(${(n >> 16) & 255}, ${(n >> 8) & 255}, ${n & 255})`;
};

describeWithChromium('hosted-subscribe.e2e')(
  'hosted subscribe page (headless Chromium, embedded stack)',
  () => {
    let db: TestDatabase;
    let stack: EmbeddedStack;
    let browser: Browser;
    let key: string;

    const api = async (method: string, path: string, body?: unknown, apiKey = key) => {
      const res = await fetch(`${stack.url}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${apiKey}`,
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
      return { status: res.status, body: (await res.json()) as Json };
    };
    const newMerchant = async (name: string) => {
      const res = await fetch(`${stack.url}/admin/merchants`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name, mode: 'test' }),
      });
      return String(((await res.json()) as Json)['api_key']);
    };
    const createIntent = async (body: Json, apiKey = key) => {
      const res = await api('POST', '/subscription-checkouts', body, apiKey);
      expect(res.status).toBe(201);
      return { id: String(res.body['id']), url: String(res.body['checkout_url']), body: res.body };
    };
    const open = async (
      url: string,
      expectedStatus = 200,
    ): Promise<{ page: Page; status: number; headers: Record<string, string> }> => {
      const page = await browser.newPage({ viewport: { width: 520, height: 900 } });
      // The document's own status shows as a failed resource load when it is the expected 404.
      const errors = collectPageErrors(page, (t) => expectedStatus === 404 && t.includes('status of 404'));
      const response = await page.goto(url);
      if (!response) throw new Error(`no response for ${url}`);
      // A CSP violation or a script error would show here.
      expect(errors).toEqual([]);
      return { page, status: response.status(), headers: response.headers() };
    };
    const text = (page: Page, testId: string) => page.getByTestId(testId).innerText();

    beforeAll(async () => {
      db = await createTestDatabase();
      stack = await startEmbedded({
        env: {
          DATABASE_URL: db.url,
          PORT: '0',
          ADMIN_TOKEN,
          LOG_LEVEL: 'error',
          STABLEPAY_LOCAL_CHAINS: 'false',
          SUBSCRIPTION_EXPIRY_POLL_MS: '60000',
        },
        dataDir: 'memory',
        clock,
      });
      browser = await launchChromium();
      key = await newMerchant('Río Streaming & Co');
      expect(
        (await api('PATCH', '/settings', { background_color: '#0B1F3A', primary_color: '#FFB000' })).status,
      ).toBe(200);
    }, 120_000);

    afterAll(async () => {
      await browser?.close();
      await stack?.stop();
      await db?.drop();
    });

    it('shows the business, the plan (escaped), the recurring amount, the converted amount and rate, the picker and the branding', async () => {
      const planName = 'Pro <script>window.__pwned = 1</script>';
      const planDescription = 'Unlimited "4K" & offline <img src=x onerror="window.__pwned = 2">';
      const intent = await createIntent({
        price: '150000',
        price_currency: 'ARS',
        supported_chains: ['eip155:8453', 'eip155:137'],
        metadata: { plan_name: planName, plan_description: planDescription, internal: 'never shown' },
      });
      expect(intent.url).toBe(`${stack.url}/hosted/subscribe/${intent.id}`);
      const { page, status, headers } = await open(intent.url);
      expect(status).toBe(200);
      expect(headers['content-type']).toContain('text/html');
      expect(headers['content-security-policy']).toMatch(/script-src 'sha256-[A-Za-z0-9+/]+=*';/);
      expect(headers['x-frame-options']).toBe('DENY');
      expect(headers['cache-control']).toBe('no-store');

      expect(await text(page, 'business-name')).toBe('Río Streaming & Co');
      expect(await text(page, 'plan-name')).toBe(planName);
      expect(await text(page, 'plan-description')).toBe(planDescription);
      expect(await page.evaluate(() => (globalThis as unknown as BrowserGlobal).__pwned)).toBeUndefined();
      expect(await page.locator('img').count()).toBe(0);
      expect(await page.content()).not.toContain('never shown');
      expect(await text(page, 'recurring-amount')).toBe('ARS 1,500.00');
      expect(await text(page, 'period')).toBe('every 30 days');

      // Base USDC first: 1,500.00 ARS at 1,185.50 ARS/USDC = 1.2652889... rounded up.
      expect(await text(page, 'token-amount')).toBe('1.265289 USDC');
      expect(await text(page, 'rate')).toBe('1 USDC = 1,185.50 ARS');
      expect(await page.getByTestId('chain-select').locator('option').allInnerTexts()).toEqual([
        'Base',
        'Polygon',
      ]);
      expect(await page.getByTestId('token-select').locator('option').allInnerTexts()).toEqual(['USDC']);
      await page.getByTestId('chain-select').selectOption('eip155:137');
      expect(await page.getByTestId('token-select').locator('option').allInnerTexts()).toEqual([
        'USDC',
        'USDT',
      ]);
      await page.getByTestId('token-select').selectOption({ label: 'USDT' });
      expect(await text(page, 'token-amount')).toBe('1.264489 USDT');
      expect(await text(page, 'rate')).toBe('1 USDT = 1,186.25 ARS');
      expect(await text(page, 'limits')).toBe(
        'Limits: 12.64489 USDT (ARS 15,000.00) per charge, 12.64489 USDT (ARS 15,000.00) per period.',
      );

      // Without a wallet in the browser the wallet step cannot start, and the page says what is needed.
      expect(await page.getByTestId('continue').isDisabled()).toBe(true);
      expect(await text(page, 'wallet-note')).toBe(
        'To subscribe, open this page in a browser with a crypto wallet.',
      );

      // Branding: dark background gets light text, a light primary gets dark text.
      const style = (selector: string, prop: string) =>
        page
          .locator(selector)
          .first()
          .evaluate(
            (el, p) => (globalThis as unknown as BrowserGlobal).getComputedStyle(el).getPropertyValue(p),
            prop,
          );
      expect(await style('body', 'background-color')).toBe(rgb('#0B1F3A'));
      expect(await style('header.bar', 'background-color')).toBe(rgb('#0B1F3A'));
      expect(await style('header.bar', 'color')).toBe(rgb('#FFFFFF'));
      expect(await style('#continue', 'background-color')).toBe(rgb('#FFB000'));
      expect(await style('#continue', 'color')).toBe(rgb('#111827'));
      // The card is a light surface tinted by the background, so its text is dark.
      expect(await style('.card', 'background-color')).toBe(rgb('#E2E4E7'));
      expect(await style('.card', 'color')).toBe(rgb('#111827'));

      await page.screenshot({ path: join(ARTIFACTS, 'hosted-subscribe-pending.png'), fullPage: true });
      await page.close();
    });

    it('uses the platform colors when none are set (white header, dark text)', async () => {
      const otherKey = await newMerchant('Plain Co');
      const intent = await createIntent(
        { price: '99900', price_currency: 'ARS', period_duration: 7 * 86400 },
        otherKey,
      );
      const { page } = await open(intent.url);
      const style = (selector: string, prop: string) =>
        page
          .locator(selector)
          .first()
          .evaluate(
            (el, p) => (globalThis as unknown as BrowserGlobal).getComputedStyle(el).getPropertyValue(p),
            prop,
          );
      expect(await style('header.bar', 'background-color')).toBe(rgb('#FFFFFF'));
      expect(await style('header.bar', 'color')).toBe(rgb('#111827'));
      expect(await style('#continue', 'color')).toBe(rgb('#FFFFFF'));
      expect(await text(page, 'period')).toBe('every week');
      expect(await page.getByTestId('plan-name').count()).toBe(0);
      await page.close();
    });

    it('dismiss cancels the intent and shows the cancelled page with the way back', async () => {
      const intent = await createIntent({
        price: '150000',
        price_currency: 'ARS',
        cancel_url: 'https://shop.example/cancelled?schk={SUBSCRIPTION_CHECKOUT_ID}',
      });
      const { page } = await open(intent.url);
      await Promise.all([page.waitForURL(intent.url), page.getByTestId('dismiss').click()]);
      expect(await page.getByTestId('state').getAttribute('data-status')).toBe('cancelled');
      expect(await page.locator('h1').innerText()).toBe('Subscription cancelled');
      expect(await page.getByTestId('return-link').getAttribute('href')).toBe(
        `https://shop.example/cancelled?schk=${intent.id}`,
      );
      await page.screenshot({ path: join(ARTIFACTS, 'hosted-subscribe-cancelled.png'), fullPage: true });
      const got = await api('GET', `/subscription-checkouts/${intent.id}`);
      expect(got.body).toMatchObject({ status: 'cancelled', cancellation_reason: 'customer_dismissed' });
      // Dismissing again (another tab) changes nothing and lands on the same page.
      const again = await fetch(`${intent.url}/dismiss`, { method: 'POST', redirect: 'manual' });
      expect(again.status).toBe(303);
      expect(again.headers.get('location')).toBe(`../${intent.id}`);
      await page.close();
    });

    it('shows the expired page once expires_at passes (before or after the timer records it)', async () => {
      const intent = await createIntent({
        price: '150000',
        price_currency: 'ARS',
        expires_in: 60,
        return_url: 'https://shop.example/account',
      });
      clock.advance(61_000);
      const { page } = await open(intent.url);
      expect(await page.getByTestId('state').getAttribute('data-status')).toBe('expired');
      expect(await page.locator('h1').innerText()).toBe('This subscription link has expired');
      expect(await page.getByTestId('return-link').getAttribute('href')).toBe('https://shop.example/account');
      expect(await page.getByTestId('dismiss').count()).toBe(0);
      await page.screenshot({ path: join(ARTIFACTS, 'hosted-subscribe-expired.png'), fullPage: true });
      await page.close();
    });

    it('shows the completed page once the subscribe flow recorded the completion', async () => {
      const intent = await createIntent({
        price: '150000',
        price_currency: 'ARS',
        success_url: 'https://shop.example/welcome/{SUBSCRIPTION_CHECKOUT_ID}',
      });
      const row = await stack.service.app.get(SubscriptionCheckoutReader).find(intent.id);
      if (!row) throw new Error('row missing');
      await stack.service.app.get(SubscriptionCheckoutCommands).complete(row, {
        subscriber: '0x2222222222222222222222222222222222222222',
        chain: 'eip155:8453',
        asset: 'eip155:8453/erc20:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
        txHash: null,
      });
      const { page } = await open(intent.url);
      expect(await page.getByTestId('state').getAttribute('data-status')).toBe('completed');
      expect(await page.locator('h1').innerText()).toBe("You're subscribed");
      expect(await page.getByTestId('return-link').getAttribute('href')).toBe(
        `https://shop.example/welcome/${intent.id}`,
      );
      await page.screenshot({ path: join(ARTIFACTS, 'hosted-subscribe-completed.png'), fullPage: true });
      await page.close();
    });

    it('answers an unknown link with a 404 page, and needs no API key', async () => {
      const { page, status } = await open(
        `${stack.url}/hosted/subscribe/schk_00000000000000000000000000`,
        404,
      );
      expect(status).toBe(404);
      expect(await page.locator('h1').innerText()).toBe('Subscription link not found');
      await page.close();
      const raw = await fetch(`${stack.url}/hosted/subscribe/not-an-id`);
      expect(raw.status).toBe(404);
      expect(raw.headers.get('content-type')).toContain('text/html');
    });
  },
);
