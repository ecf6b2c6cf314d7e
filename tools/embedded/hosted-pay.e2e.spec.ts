import { Interface, Wallet } from 'ethers';
import type { Browser } from 'playwright-core';
import { ANVIL_DEV_PRIVATE_KEYS, localChainProvider } from '@stablepay/local-chains';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { ManualClock } from '@stablepay/util';
import { collectPageErrors, describeWithChromium, launchChromium, screenshot } from './browser/chromium';
import { installTestWallet } from './browser/test-wallet';
import { type EmbeddedStack, startEmbedded } from './embedded';

/**
 * The hosted payment page served by the gateway for a real checkout (embedded stack on anvil): what the page shows
 * comes from the payments scope's public status read, the customer's wallet pays the deposit address on anvil from
 * the page, and a status change made through the API (cancel) reaches the open page by its polling.
 */
type Json = Record<string, unknown>;
const erc20 = new Interface([
  'function mint(address to, uint256 amount)',
  'function balanceOf(address) view returns (uint256)',
]);

describeWithChromium('hosted-pay.e2e')('hosted payment page (Chromium, embedded stack, anvil)', () => {
  let db: TestDatabase;
  let stack: EmbeddedStack;
  let browser: Browser;
  const settlement = Wallet.createRandom().address;

  const api = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${stack.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${stack.demoApiKey}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.status, body: (await res.json()) as Json };
  };
  const createCheckout = async () => {
    const created = await api('POST', '/checkouts', {
      amount: '25000000',
      currency: 'USD',
      success_url: 'https://shop.example/thanks',
      cancel_url: 'https://shop.example/cart',
    });
    expect(created.status).toBe(201);
    return created.body;
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    stack = await startEmbedded({
      env: {
        DATABASE_URL: db.url,
        PORT: '0',
        LOG_LEVEL: 'error',
        STABLEPAY_LOCAL_CHAINS: 'true',
        LOCAL_CHAIN_IDS: '8453',
      },
      dataDir: 'memory',
      clock: new ManualClock(new Date()),
    });
    browser = await launchChromium();
    // A DIRECT payment settles to the merchant's settlement address once its deposit is deployed.
    expect(
      (
        await api('POST', '/settings', {
          merchant_signer: Wallet.createRandom().address,
          settlement_address: settlement,
        })
      ).status,
    ).toBe(200);
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await stack?.stop();
    await db?.drop();
  });

  it('shows the checkout from the status read, pays the deposit address from the browser wallet on anvil and follows the payment to paid', async () => {
    const checkout = await createCheckout();
    const url = String(checkout['checkout_url']);
    expect(url).toBe(`${stack.url}/hosted/pay/${String(checkout['id'])}`);
    const chain = stack.chains?.chains[0];
    if (!chain) throw new Error('no local chain');
    const page = await browser.newPage({ viewport: { width: 520, height: 1000 } });
    const errors = collectPageErrors(page);
    const wallet = await installTestWallet(page, {
      privateKey: ANVIL_DEV_PRIVATE_KEYS[6] ?? '',
      chains: [{ chainId: chain.chainId, rpcUrl: chain.rpcUrl }],
    });
    const response = await page.goto(url);
    expect(response?.status()).toBe(200);
    expect(response?.headers()['cache-control']).toBe('no-store');
    expect(response?.headers()['content-security-policy']).toMatch(/script-src 'sha256-[^']+';/);
    expect(await page.getByTestId('order-amount').innerText()).toBe('25.00 USD');
    expect(await page.getByTestId('deposit-address').innerText()).toBe(String(checkout['deposit_address']));
    expect(await page.locator('[data-testid=qr] svg path').count()).toBeGreaterThan(0);
    expect(await page.getByTestId('payment-status').getAttribute('data-status')).toBe('pending');
    const assets = checkout['accepted_assets'] as Json[];
    const first = assets[0];
    if (!first) throw new Error('no accepted asset');
    expect(await page.getByTestId('send-amount').innerText()).toBe(
      `${String(first['token_amount_decimal'])} ${String(first['token_symbol'])}`,
    );
    expect(await page.getByTestId('send-chain').innerText()).toBe('Base');
    await screenshot(page, 'hosted-pay-embedded-pending');

    // The wallet holds the token (anyone can mint the test tokens), then pays from the page.
    const token = String(first['asset']).split('/erc20:')[1] ?? '';
    const provider = localChainProvider(chain.rpcUrl, chain.chainId);
    try {
      const funder = new Wallet(ANVIL_DEV_PRIVATE_KEYS[6] ?? '', provider);
      await (
        await funder.sendTransaction({
          to: token,
          data: erc20.encodeFunctionData('mint', [wallet.address, BigInt(String(first['token_amount']))]),
        })
      ).wait();
      await page.getByTestId('wallet-pay').click();
      await page.locator('[data-testid=wallet-note][data-tx-hash]').waitFor();
      const hash = String(await page.getByTestId('wallet-note').getAttribute('data-tx-hash'));
      expect((await provider.waitForTransaction(hash))?.status).toBe(1);
      const balance = await provider.call({
        to: token,
        data: erc20.encodeFunctionData('balanceOf', [String(checkout['deposit_address'])]),
      });
      expect(BigInt(balance)).toBe(BigInt(String(first['token_amount'])));
      // The payments scope sees the transfer, confirms it and settles: the open page follows to its final page.
      await page.locator('[data-testid=state][data-status=paid]').waitFor({ timeout: 90_000 });
      expect(await page.getByTestId('title').innerText()).toBe('Payment complete');
      expect(await page.getByTestId('return-link').getAttribute('href')).toBe('https://shop.example/thanks');
      await screenshot(page, 'hosted-pay-embedded-paid');
      const settled = await provider.call({
        to: token,
        data: erc20.encodeFunctionData('balanceOf', [settlement]),
      });
      expect(BigInt(settled)).toBe(BigInt(String(first['token_amount'])));
    } finally {
      provider.destroy();
    }
    expect(errors).toEqual([]);
    await page.close();
  }, 120_000);

  it('follows a status change made through the API to the final page (cancelled, with the way back)', async () => {
    const checkout = await createCheckout();
    const page = await browser.newPage({ viewport: { width: 520, height: 900 } });
    await page.goto(String(checkout['checkout_url']));
    expect(await page.getByTestId('payment-status').getAttribute('data-status')).toBe('pending');
    expect((await api('POST', `/checkouts/${String(checkout['id'])}/cancel`)).status).toBe(200);
    await page.locator('[data-testid=state][data-status=cancelled]').waitFor({ timeout: 30_000 });
    expect(await page.getByTestId('title').innerText()).toBe('Payment cancelled');
    expect(await page.getByTestId('return-link').getAttribute('href')).toBe('https://shop.example/cart');
    await screenshot(page, 'hosted-pay-embedded-cancelled');
    await page.close();
  }, 60_000);

  it('answers an unknown or malformed checkout id with a 404 page', async () => {
    const unknown = await fetch(`${stack.url}/hosted/pay/chk_${'0'.repeat(26)}`);
    expect(unknown.status).toBe(404);
    expect(await unknown.text()).toContain('Payment link not found');
    expect((await fetch(`${stack.url}/hosted/pay/not-an-id`)).status).toBe(404);
  });
});
