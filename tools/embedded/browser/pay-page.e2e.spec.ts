import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Interface, Wallet } from 'ethers';
import type { Browser, Page } from 'playwright-core';
import {
  type HostedPaymentView,
  hostedPageHeaders,
  payPageScripts,
  qrSvg,
  renderPayPage,
} from '@stablepay/hosted-ui';
import {
  ANVIL_DEV_PRIVATE_KEYS,
  type LocalChains,
  localChainProvider,
  startLocalChains,
} from '@stablepay/local-chains';
import { collectPageErrors, describeWithChromium, launchChromium, screenshot } from './chromium';
import { installTestWallet } from './test-wallet';

/**
 * The hosted payment page's own behaviour in Chromium: rendered by renderPayPage under its real headers, served by
 * a plain HTTP server whose `/status` answers what the test sets (the page's contract with the payments scope's
 * public status read, docs/openapi.yaml HostedPaymentStatus). The wallet on the page sends a real ERC-20 transfer
 * to the deposit address on anvil; the status then moves pending -> confirming -> paid as the server reports it.
 */
const erc20 = new Interface([
  'function mint(address to, uint256 amount)',
  'function balanceOf(address) view returns (uint256)',
]);

describeWithChromium('pay-page.e2e')('hosted payment page in Chromium (page contract)', () => {
  let chains: LocalChains;
  let browser: Browser;
  let server: Server;
  let origin: string;
  let current: HostedPaymentView;
  const statusRequests: string[] = [];
  const deposit = Wallet.createRandom().address;

  beforeAll(async () => {
    chains = await startLocalChains({ chainIds: [8453, 137] });
    browser = await launchChromium();
    const qr = await qrSvg(deposit);
    server = createServer((req, res) => {
      const url = req.url ?? '/';
      if (url === `/hosted/pay/${current.checkout_id}/status`) {
        statusRequests.push(current.status);
        res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' });
        res.end(JSON.stringify({ object: 'hosted_payment_status', ...current }));
        return;
      }
      if (url === `/hosted/pay/${current.checkout_id}`) {
        const nonce = randomBytes(16).toString('base64');
        res.writeHead(200, hostedPageHeaders({ nonce, scripts: payPageScripts(current) }));
        res.end(
          renderPayPage(current, {
            nonce,
            qrSvg: qr,
            chainNames: { 'eip155:8453': 'Base', 'eip155:137': 'Polygon' },
            pollMs: 200,
          }),
        );
        return;
      }
      res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await new Promise((resolve) => server?.close(resolve));
    await chains?.stop();
  });

  const viewOnLocalChains = (): HostedPaymentView => {
    const [base, polygon] = chains.chains;
    if (!base || !polygon) throw new Error('two local chains expected');
    return {
      checkout_id: 'chk_01jxyzpaypage0000000000000',
      status: 'pending',
      amount: '25000000',
      currency: 'USD',
      amount_paid: '0',
      accepted_assets: [
        {
          asset: `${base.caip2}/erc20:${base.addresses.stablecoins.USDC}`,
          chain: base.caip2,
          token_symbol: 'USDC',
          token_amount: '25000000',
          token_amount_decimal: '25',
        },
        {
          asset: `${polygon.caip2}/erc20:${polygon.addresses.stablecoins.USDT}`,
          chain: polygon.caip2,
          token_symbol: 'USDT',
          token_amount: '25000000',
          token_amount_decimal: '25',
        },
        {
          asset: `${polygon.caip2}/erc20:${polygon.addresses.stablecoins.DAI}`,
          chain: polygon.caip2,
          token_symbol: 'DAI',
          token_amount: '25000000000000000000',
          token_amount_decimal: '25',
        },
      ],
      deposit_address: deposit,
      detected_asset: null,
      detected_chain: null,
      expires_at: '2026-06-01T10:30:00.000Z',
      success_url: 'https://shop.example/thanks?order=42',
      cancel_url: 'https://shop.example/cart',
      business_name: 'Río Coffee & Co',
      background_color: '#0B1F3A',
      primary_color: '#FFB000',
    };
  };

  it('pays from a browser wallet on anvil (18-decimal DAI on the second chain) and follows pending -> confirming -> paid', async () => {
    current = viewOnLocalChains();
    const polygon = chains.chains[1];
    if (!polygon) throw new Error('no second chain');
    const payerKey = ANVIL_DEV_PRIVATE_KEYS[6];
    const payer = new Wallet(payerKey, localChainProvider(polygon.rpcUrl, polygon.chainId));
    // The payer holds DAI on Polygon (the token lets anyone mint).
    await (
      await payer.sendTransaction({
        to: polygon.addresses.stablecoins.DAI,
        data: erc20.encodeFunctionData('mint', [payer.address, 100n * 10n ** 18n]),
      })
    ).wait();

    const page: Page = await browser.newPage({ viewport: { width: 520, height: 1000 } });
    const errors = collectPageErrors(page);
    const wallet = await installTestWallet(page, {
      privateKey: payerKey,
      chains: chains.chains.map((c) => ({ chainId: c.chainId, rpcUrl: c.rpcUrl })),
    });
    const response = await page.goto(`${origin}/hosted/pay/${current.checkout_id}`);
    expect(response?.headers()['cache-control']).toBe('no-store');
    expect(await page.getByTestId('order-amount').innerText()).toBe('25.00 USD');
    expect(await page.getByTestId('deposit-address').innerText()).toBe(deposit);
    expect(await page.locator('[data-testid=qr] svg path').count()).toBeGreaterThan(0);
    expect(await page.getByTestId('send-amount').innerText()).toBe('25 USDC');
    expect(await page.getByTestId('send-chain').innerText()).toBe('Base');
    await page.getByTestId('chain-select').selectOption('eip155:137');
    expect(await page.getByTestId('token-select').locator('option').allInnerTexts()).toEqual(['USDT', 'DAI']);
    await page.getByTestId('token-select').selectOption({ label: 'DAI' });
    expect(await page.getByTestId('send-amount').innerText()).toBe('25 DAI');
    expect(await page.getByTestId('send-chain').innerText()).toBe('Polygon');
    expect(await page.getByTestId('payment-status').getAttribute('data-status')).toBe('pending');
    await screenshot(page, 'hosted-pay-pending');

    // The wallet is on Base: the page switches it to Polygon and sends transfer(deposit, 25 DAI).
    await page.getByTestId('wallet-pay').click();
    await page.locator('[data-testid=wallet-note][data-tx-hash]').waitFor();
    const hash = await page.getByTestId('wallet-note').getAttribute('data-tx-hash');
    expect(wallet.sentTransactions).toEqual([hash]);
    expect(wallet.chainId()).toBe(137);
    expect(wallet.requests.map((r) => r.method)).toEqual([
      'eth_requestAccounts',
      'eth_chainId',
      'wallet_switchEthereumChain',
      'eth_sendTransaction',
    ]);
    const provider = localChainProvider(polygon.rpcUrl, polygon.chainId);
    try {
      expect((await provider.waitForTransaction(String(hash)))?.status).toBe(1);
      const received = await provider.call({
        to: polygon.addresses.stablecoins.DAI,
        data: erc20.encodeFunctionData('balanceOf', [deposit]),
      });
      expect(BigInt(received)).toBe(25n * 10n ** 18n);
    } finally {
      provider.destroy();
    }

    // What the payments scope reports once its indexer saw the transfer, then once the deposit settled.
    current = {
      ...current,
      status: 'confirming',
      amount_paid: (25n * 10n ** 18n).toString(),
      detected_asset: current.accepted_assets[2]?.asset ?? null,
      detected_chain: 'eip155:137',
    };
    await page.locator('[data-testid=payment-status][data-status=confirming]').waitFor();
    expect(await page.getByTestId('status-title').innerText()).toBe('Payment received, confirming');
    await screenshot(page, 'hosted-pay-confirming');

    current = { ...current, status: 'paid' };
    await page.locator('[data-testid=state][data-status=paid]').waitFor();
    expect(await page.getByTestId('title').innerText()).toBe('Payment complete');
    expect(await page.getByTestId('return-link').getAttribute('href')).toBe(
      'https://shop.example/thanks?order=42',
    );
    // Final: the page stops asking.
    const asked = statusRequests.length;
    await page.reload();
    expect(statusRequests.length).toBe(asked);
    await screenshot(page, 'hosted-pay-paid');
    expect(errors).toEqual([]);
    await page.close();
  });

  it('moves to the expired page when the status read says so, and offers no wallet payment without a wallet', async () => {
    current = viewOnLocalChains();
    const page = await browser.newPage({ viewport: { width: 520, height: 1000 } });
    const errors = collectPageErrors(page);
    await page.goto(`${origin}/hosted/pay/${current.checkout_id}`);
    expect(await page.getByTestId('wallet-pay').isHidden()).toBe(true);
    current = { ...current, status: 'expired' };
    await page.locator('[data-testid=state][data-status=expired]').waitFor();
    expect(await page.getByTestId('title').innerText()).toBe('This payment link has expired');
    expect(await page.getByTestId('return-link').getAttribute('href')).toBe('https://shop.example/cart');
    expect(await page.getByTestId('deposit-address').count()).toBe(0);
    await screenshot(page, 'hosted-pay-expired');
    expect(errors).toEqual([]);
    await page.close();
  });

  it('keeps nothing on the page when the wallet declines', async () => {
    current = viewOnLocalChains();
    const page = await browser.newPage();
    const wallet = await installTestWallet(page, {
      privateKey: ANVIL_DEV_PRIVATE_KEYS[7],
      chains: chains.chains.map((c) => ({ chainId: c.chainId, rpcUrl: c.rpcUrl })),
    });
    await page.goto(`${origin}/hosted/pay/${current.checkout_id}`);
    wallet.rejectNext('eth_sendTransaction');
    await page.getByTestId('wallet-pay').click();
    await page.getByText('You declined in your wallet. Nothing was sent.').waitFor();
    expect(wallet.sentTransactions).toEqual([]);
    expect(await page.getByTestId('wallet-pay').isEnabled()).toBe(true);
    await page.close();
  });
});
