import { MaxUint256, Wallet } from 'ethers';
import type { Browser, Page } from 'playwright-core';
import { connectTestStablecoin } from '@stablepay/contracts';
import { ANVIL_DEV_PRIVATE_KEYS, localChainProvider } from '@stablepay/local-chains';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { ManualClock } from '@stablepay/util';
import { collectPageErrors, describeWithChromium, launchChromium, screenshot } from './browser/chromium';
import { installTestWallet, type TestWallet } from './browser/test-wallet';
import { type EmbeddedStack, startEmbedded } from './embedded';

/**
 * The hosted subscribe page's wallet step in Chromium against the embedded stack on anvil: the customer picks the
 * network and stablecoin, connects an injected EIP-1193 wallet (an anvil key), sees the first charge, cap and budget
 * converted at one rate, approves the manager for the maximum allowance and sends the one subscribe transaction;
 * the intent completes and the subscription is active on chain. 6- and 18-decimal tokens.
 */
type Json = Record<string, unknown>;
const CHAIN = 'eip155:8453';

describeWithChromium('hosted-subscribe-wallet.e2e')(
  'hosted subscribe page wallet step (Chromium, embedded stack, anvil)',
  () => {
    let db: TestDatabase;
    let stack: EmbeddedStack;
    let browser: Browser;
    const clock = new ManualClock(new Date());
    const merchantSigner = Wallet.createRandom();
    const merchantPauser = Wallet.createRandom();

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
    const chain = () => {
      const c = stack.chains?.chains.find((x) => x.caip2 === CHAIN);
      if (!c) throw new Error('no local chain');
      return c;
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
        clock,
      });
      browser = await launchChromium();
      expect(
        (
          await api('POST', '/settings', {
            merchant_signer: merchantSigner.address,
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
      expect(
        (await api('PATCH', '/settings', { background_color: '#0B1F3A', primary_color: '#FFB000' })).status,
      ).toBe(200);
    }, 180_000);

    afterAll(async () => {
      await browser?.close();
      await stack?.stop();
      await db?.drop();
    });

    const openWithWallet = async (
      url: string,
      keyIndex: number,
    ): Promise<{ page: Page; wallet: TestWallet; errors: string[] }> => {
      const page = await browser.newPage({ viewport: { width: 520, height: 1100 } });
      const errors = collectPageErrors(page);
      const wallet = await installTestWallet(page, {
        privateKey: ANVIL_DEV_PRIVATE_KEYS[keyIndex] ?? '',
        chains: [{ chainId: chain().chainId, rpcUrl: chain().rpcUrl }],
      });
      await page.goto(url);
      return { page, wallet, errors };
    };

    const fund = async (keyIndex: number, symbol: 'USDC' | 'DAI', amount: bigint) => {
      const signer = new Wallet(
        ANVIL_DEV_PRIVATE_KEYS[keyIndex] ?? '',
        localChainProvider(chain().rpcUrl, chain().chainId),
      );
      const token = connectTestStablecoin(chain().addresses.stablecoins[symbol], signer);
      await (await token.mint(signer.address, amount)).wait();
      return token;
    };

    it.each([
      { symbol: 'USDC' as const, decimals: 6, keyIndex: 3, shot: true },
      { symbol: 'DAI' as const, decimals: 18, keyIndex: 4, shot: false },
    ])(
      'subscribes with $symbol ($decimals decimals): approve max, one subscribe transaction, intent completed, subscription active',
      async ({ symbol, decimals, keyIndex, shot }) => {
        const created = await api('POST', '/subscription-checkouts', {
          price: '150000',
          price_currency: 'ARS',
          supported_chains: [CHAIN],
          metadata: { plan_name: 'Pro streaming' },
          success_url: 'https://shop.example/welcome/{SUBSCRIPTION_CHECKOUT_ID}',
        });
        expect(created.status).toBe(201);
        const checkout = created.body;
        const option = (checkout['subscription_options'] as Json[]).find((o) => o['token_symbol'] === symbol);
        if (!option) throw new Error(`no ${symbol} option`);
        expect(option['token_decimals']).toBe(decimals);
        const token = await fund(keyIndex, symbol, BigInt(String(option['budget_amount'])) * 2n);

        const { page, wallet, errors } = await openWithWallet(String(checkout['checkout_url']), keyIndex);
        await page.getByTestId('token-select').selectOption({ label: symbol });
        expect(await page.getByTestId('continue').isEnabled()).toBe(true);
        await page.getByTestId('continue').click();
        await page.getByTestId('confirm').waitFor();

        // The figures the wallet will sign: price, cap and budget converted at one rate, rounded up (rule 4).
        const show = (units: string) => {
          const digits = units.padStart(decimals + 1, '0');
          const whole = digits.slice(0, -decimals).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
          const fraction = digits.slice(-decimals).replace(/0+$/, '');
          return `${whole}${fraction ? `.${fraction}` : ''} ${symbol}`;
        };
        expect(await page.getByTestId('confirm-wallet').innerText()).toBe(wallet.address);
        expect(await page.getByTestId('confirm-first-charge').innerText()).toBe(
          show(String(option['price_amount'])),
        );
        expect(await page.getByTestId('confirm-cap').innerText()).toBe(show(String(option['cap_amount'])));
        expect(await page.getByTestId('confirm-budget').innerText()).toBe(
          show(String(option['budget_amount'])),
        );
        expect(await page.getByTestId('confirm-rate').innerText()).toContain(`1 ${symbol} = 1185.50 ARS`);
        const manager = await page.getByTestId('confirm-manager').innerText();
        if (shot) await screenshot(page, 'hosted-subscribe-confirm');

        await page.getByTestId('subscribe').click();
        await page.locator('[data-testid=state][data-status=completed]').waitFor({ timeout: 60_000 });
        expect(await page.locator('h1').innerText()).toBe("You're subscribed");
        if (shot) await screenshot(page, 'hosted-subscribe-subscribed');

        // Exactly two transactions from the wallet: the max approval, then the subscribe.
        expect(wallet.sentTransactions).toHaveLength(2);
        const subscription = await api('GET', `/subscriptions/${String(checkout['onchain_id'])}`);
        expect(subscription.status).toBe(200);
        expect(subscription.body).toMatchObject({
          status: 'active',
          subscriber: wallet.address,
          token_symbol: symbol,
          token_decimals: decimals,
          cap_amount: option['cap_amount'],
          budget: option['budget_amount'],
          spent_this_period: option['price_amount'],
        });
        const intent = await api('GET', `/subscription-checkouts/${String(checkout['id'])}`);
        expect(intent.body).toMatchObject({ status: 'completed', subscriber: wallet.address });
        // SPEC Rules 5: the wallet approved the manager for the maximum allowance (limits live in the contract).
        expect(await token.allowance(wallet.address, manager)).toBe(MaxUint256);
        expect(errors).toEqual([]);
        await page.close();
      },
      120_000,
    );

    it('a declined approval sends nothing and lets the customer try again', async () => {
      const created = await api('POST', '/subscription-checkouts', {
        price: '150000',
        price_currency: 'ARS',
        supported_chains: [CHAIN],
      });
      const { page, wallet } = await openWithWallet(String(created.body['checkout_url']), 5);
      await page.getByTestId('continue').click();
      await page.getByTestId('confirm').waitFor();
      wallet.rejectNext('eth_sendTransaction');
      await page.getByTestId('subscribe').click();
      await page.getByTestId('wallet-error').waitFor();
      expect(await page.getByTestId('wallet-error').innerText()).toBe(
        'You declined in your wallet. Nothing was sent.',
      );
      expect(wallet.sentTransactions).toEqual([]);
      expect(await page.getByTestId('subscribe').isEnabled()).toBe(true);
      const intent = await api('GET', `/subscription-checkouts/${String(created.body['id'])}`);
      expect(intent.body['status']).toBe('pending');
      await page.close();
    });
  },
);
