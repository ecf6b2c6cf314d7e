import { Interface, Wallet } from 'ethers';
import type { Browser } from 'playwright-core';
import { connectTestStablecoin, SubscriptionManagerAbi } from '@stablepay/contracts';
import { ANVIL_DEV_PRIVATE_KEYS, localChainProvider } from '@stablepay/local-chains';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { ManualClock } from '@stablepay/util';
import { collectPageErrors, describeWithChromium, launchChromium, screenshot } from './browser/chromium';
import { installTestWallet } from './browser/test-wallet';
import { type EmbeddedStack, startEmbedded } from './embedded';

/**
 * The hosted cancel page in Chromium against the embedded stack on anvil: the subscribing wallet (injected test
 * wallet, an anvil key) sends `subscriberCancel` on chain and the subscription ends cancelled by the subscriber; any
 * other wallet is told so and routed to the intent's cancel_url; unknown ids are a 404 page.
 */
type Json = Record<string, unknown>;
const CHAIN = 'eip155:8453';

describeWithChromium('hosted-cancel.e2e')('hosted cancel page (Chromium, embedded stack, anvil)', () => {
  let db: TestDatabase;
  let stack: EmbeddedStack;
  let browser: Browser;
  const merchantPauser = Wallet.createRandom();

  const api = async (method: string, path: string, body?: unknown, auth = true) => {
    const res = await fetch(`${stack.url}${path}`, {
      method,
      headers: {
        ...(auth ? { authorization: `Bearer ${stack.demoApiKey}` } : {}),
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.status, body: (await res.json()) as Json };
  };
  const chain = () => {
    const c = stack.chains?.chains.find((x) => x.caip2 === CHAIN);
    if (!c) throw new Error('no local chain');
    return c;
  };
  const until = async <T>(read: () => Promise<T>, done: (v: T) => boolean): Promise<T> => {
    for (;;) {
      const value = await read();
      if (done(value)) return value;
      await new Promise((r) => setTimeout(r, 200));
    }
  };

  /** A subscription made the way the hosted page makes it (authorize, approve, subscribe, report), from Node. */
  const subscribe = async (keyIndex: number): Promise<{ id: string; checkoutId: string }> => {
    const created = await api('POST', '/subscription-checkouts', {
      price: '150000',
      price_currency: 'ARS',
      supported_chains: [CHAIN],
      cancel_url: 'https://shop.example/account/cancel?intent={SUBSCRIPTION_CHECKOUT_ID}',
    });
    const checkoutId = String(created.body['id']);
    const option = (created.body['subscription_options'] as Json[]).find((o) => o['token_symbol'] === 'USDC');
    const subscriber = new Wallet(
      ANVIL_DEV_PRIVATE_KEYS[keyIndex] ?? '',
      localChainProvider(chain().rpcUrl, chain().chainId),
    );
    const body = { chain: CHAIN, asset: option?.['asset'], subscriber: subscriber.address };
    const auth = await api('POST', `/subscription-checkouts/${checkoutId}/subscribe`, body, false);
    expect(auth.status).toBe(200);
    const token = connectTestStablecoin(String(auth.body['token_address']), subscriber);
    await (await token.mint(subscriber.address, BigInt(String(auth.body['budget_amount'])) * 2n)).wait();
    const [approve, sub] = auth.body['transactions'] as Json[];
    await (
      await subscriber.sendTransaction({ to: String(approve?.['to']), data: String(approve?.['data']) })
    ).wait();
    const sent = await subscriber.sendTransaction({ to: String(sub?.['to']), data: String(sub?.['data']) });
    await sent.wait();
    const reported = await api(
      'POST',
      `/subscription-checkouts/${checkoutId}/subscribe`,
      { ...body, tx_hash: sent.hash },
      false,
    );
    expect(reported.status).toBe(200);
    return { id: String(created.body['onchain_id']), checkoutId };
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
        INDEXER_POLL_MS: '100',
      },
      dataDir: 'memory',
      clock: new ManualClock(new Date()),
    });
    browser = await launchChromium();
    expect(
      (
        await api('POST', '/settings', {
          merchant_signer: Wallet.createRandom().address,
          settlement_address: Wallet.createRandom().address,
        })
      ).status,
    ).toBe(200);
    const declaration = await api('GET', '/settings/pauser');
    expect(
      (
        await api('POST', '/settings/pauser', {
          merchant_pauser: merchantPauser.address,
          signature: await merchantPauser.signMessage(String(declaration.body['declaration_message'])),
        })
      ).status,
    ).toBe(200);
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await stack?.stop();
    await db?.drop();
  });

  it('the subscribing wallet cancels on chain: subscriberCancel sent from it, the subscription ends cancelled', async () => {
    const { id } = await subscribe(3);
    const page = await browser.newPage({ viewport: { width: 520, height: 900 } });
    const errors = collectPageErrors(page);
    const wallet = await installTestWallet(page, {
      privateKey: ANVIL_DEV_PRIVATE_KEYS[3] ?? '',
      chains: [{ chainId: chain().chainId, rpcUrl: chain().rpcUrl }],
    });
    const response = await page.goto(`${stack.url}/hosted/cancel/${id}`);
    expect(response?.status()).toBe(200);
    expect(response?.headers()['cache-control']).toBe('no-store');
    expect(response?.headers()['content-security-policy']).toContain("frame-ancestors 'none'");
    expect(await page.getByTestId('subscriber').innerText()).toBe(wallet.address);
    await screenshot(page, 'hosted-cancel-active');
    await page.getByTestId('cancel').click();
    await page.locator('[data-testid=wallet-note][data-done=true]').waitFor({ timeout: 60_000 });
    // One transaction, from the subscriber to the manager: subscriberCancel(id).
    expect(wallet.sentTransactions).toHaveLength(1);
    const sent = wallet.requests.find((r) => r.method === 'eth_sendTransaction');
    const tx = (sent?.params as [{ from: string; data: string }])[0];
    expect(tx.from).toBe(wallet.address);
    expect(tx.data).toBe(new Interface(SubscriptionManagerAbi).encodeFunctionData('subscriberCancel', [id]));

    const cancelled = await until(
      () => api('GET', `/subscriptions/${id}`),
      (r) => r.body['status'] === 'cancelled',
    );
    expect(cancelled.body['status']).toBe('cancelled');
    await page.reload();
    expect(await page.getByTestId('state').getAttribute('data-status')).toBe('cancelled');
    expect(await page.getByTestId('title').innerText()).toBe('Subscription cancelled');
    await screenshot(page, 'hosted-cancel-cancelled');
    expect(errors).toEqual([]);
    await page.close();
  }, 120_000);

  it('another wallet sends nothing and is routed to the intent cancel_url (the lost-wallet path)', async () => {
    const { id, checkoutId } = await subscribe(4);
    const page = await browser.newPage({ viewport: { width: 520, height: 900 } });
    const wallet = await installTestWallet(page, {
      privateKey: ANVIL_DEV_PRIVATE_KEYS[5] ?? '',
      chains: [{ chainId: chain().chainId, rpcUrl: chain().rpcUrl }],
    });
    await page.goto(`${stack.url}/hosted/cancel/${id}`);
    await page.getByTestId('cancel').click();
    await page.getByTestId('wrong-wallet').waitFor();
    expect(await page.getByTestId('connected-wallet').innerText()).toBe(wallet.address);
    const link = page.getByTestId('wrong-wallet').getByTestId('lost-wallet');
    expect(await link.getAttribute('href')).toBe(`https://shop.example/account/cancel?intent=${checkoutId}`);
    expect(wallet.sentTransactions).toEqual([]);
    await screenshot(page, 'hosted-cancel-wrong-wallet');
    expect((await api('GET', `/subscriptions/${id}`)).body['status']).toBe('active');
    await page.close();
  }, 120_000);

  it('answers an unknown or malformed subscription id with a 404 page', async () => {
    const unknown = await fetch(`${stack.url}/hosted/cancel/0x${'ab'.repeat(32)}`);
    expect(unknown.status).toBe(404);
    expect(await unknown.text()).toContain('Subscription not found');
    const malformed = await fetch(`${stack.url}/hosted/cancel/%3Cscript%3E`);
    expect(malformed.status).toBe(404);
    expect(await malformed.text()).not.toContain('<script>');
  });
});
