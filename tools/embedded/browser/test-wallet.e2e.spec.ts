import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Interface, verifyMessage, verifyTypedData } from 'ethers';
import type { Browser, Page } from 'playwright-core';
import {
  ANVIL_DEV_PRIVATE_KEYS,
  type LocalChains,
  localChainProvider,
  startLocalChains,
} from '@stablepay/local-chains';
import { collectPageErrors, describeWithChromium, launchChromium } from './chromium';
import { installTestWallet, type TestWallet } from './test-wallet';

/**
 * The injected test wallet on its own: a page under the hosted pages' strict CSP (no script of its own allowed)
 * reaches `window.ethereum`, and what it asks is done for real on anvil.
 */
interface Eip1193 {
  request(args: { method: string; params?: unknown }): Promise<unknown>;
  on(event: string, fn: (value: unknown) => void): void;
}
type WalletGlobal = { ethereum: Eip1193; __events?: unknown[] };

const ask = (page: Page, method: string, params?: unknown) =>
  page.evaluate(
    async ([m, p]) => {
      try {
        return {
          result: await (globalThis as unknown as WalletGlobal).ethereum.request({ method: m, params: p }),
        };
      } catch (e) {
        return { error: { code: (e as { code?: number }).code, message: (e as Error).message } };
      }
    },
    [method, params] as const,
  );

describeWithChromium('test wallet (EIP-1193 in Chromium, anvil-backed)')(
  'test wallet (EIP-1193 in Chromium, anvil-backed)',
  () => {
    let chains: LocalChains;
    let browser: Browser;
    let server: Server;
    let origin: string;
    const key = ANVIL_DEV_PRIVATE_KEYS[5];

    beforeAll(async () => {
      chains = await startLocalChains({ chainIds: [8453, 137] });
      browser = await launchChromium();
      server = createServer((_req, res) => {
        res.writeHead(200, {
          'content-type': 'text/html; charset=utf-8',
          'content-security-policy': "default-src 'none'; script-src 'none'; frame-ancestors 'none'",
        });
        res.end('<!doctype html><title>blank</title><p>blank</p>');
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    }, 120_000);

    afterAll(async () => {
      await browser?.close();
      await new Promise((resolve) => server?.close(resolve));
      await chains?.stop();
    });

    const openWithWallet = async (): Promise<{ page: Page; wallet: TestWallet; errors: string[] }> => {
      const page = await browser.newPage();
      const errors = collectPageErrors(page);
      const wallet = await installTestWallet(page, {
        privateKey: key,
        chains: chains.chains.map((c) => ({ chainId: c.chainId, rpcUrl: c.rpcUrl })),
      });
      await page.goto(origin);
      return { page, wallet, errors };
    };

    it('connects, reports and switches chains (with chainChanged), and refuses an unknown chain with 4902', async () => {
      const { page, wallet, errors } = await openWithWallet();
      expect(await ask(page, 'eth_accounts')).toEqual({ result: [] });
      expect(await ask(page, 'eth_requestAccounts')).toEqual({ result: [wallet.address] });
      expect(await ask(page, 'eth_chainId')).toEqual({ result: '0x2105' });
      await page.evaluate(() => {
        const g = globalThis as unknown as WalletGlobal;
        g.__events = [];
        g.ethereum.on('chainChanged', (v) => g.__events?.push(v));
      });
      expect(await ask(page, 'wallet_switchEthereumChain', [{ chainId: '0x89' }])).toEqual({ result: null });
      expect(await ask(page, 'eth_chainId')).toEqual({ result: '0x89' });
      expect(await page.evaluate(() => (globalThis as unknown as WalletGlobal).__events)).toEqual(['0x89']);
      expect(await ask(page, 'wallet_switchEthereumChain', [{ chainId: '0x1' }])).toMatchObject({
        error: { code: 4902 },
      });
      expect(wallet.chainId()).toBe(137);
      expect(errors).toEqual([]);
      await page.close();
    });

    it('sends a page-built transaction from the anvil key to the current chain, and reads through eth_call', async () => {
      const { page, wallet } = await openWithWallet();
      const chain = chains.chains[1];
      if (!chain) throw new Error('no second chain');
      const usdc = chain.addresses.stablecoins.USDC;
      const provider = localChainProvider(chain.rpcUrl, chain.chainId);
      try {
        const erc20 = new Interface([
          'function mint(address to, uint256 amount)',
          'function transfer(address to, uint256 amount) returns (bool)',
          'function balanceOf(address) view returns (uint256)',
        ]);
        const recipient = '0x000000000000000000000000000000000000bEEF';
        await ask(page, 'eth_requestAccounts');
        await ask(page, 'wallet_switchEthereumChain', [{ chainId: '0x89' }]);
        // The token lets anyone mint: the wallet funds itself, then pays, both as page-built calls.
        const mint = await ask(page, 'eth_sendTransaction', [
          {
            from: wallet.address,
            to: usdc,
            data: erc20.encodeFunctionData('mint', [wallet.address, 5_000_000n]),
          },
        ]);
        const pay = await ask(page, 'eth_sendTransaction', [
          {
            from: wallet.address,
            to: usdc,
            data: erc20.encodeFunctionData('transfer', [recipient, 1_250_000n]),
          },
        ]);
        expect(wallet.sentTransactions).toEqual([
          (mint as { result: string }).result,
          (pay as { result: string }).result,
        ]);
        const receipt = await provider.waitForTransaction((pay as { result: string }).result);
        expect(receipt?.status).toBe(1);
        const balance = await ask(page, 'eth_call', [
          { to: usdc, data: erc20.encodeFunctionData('balanceOf', [recipient]) },
          'latest',
        ]);
        expect(BigInt((balance as { result: string }).result)).toBe(1_250_000n);
        // The other chain saw nothing.
        const base = chains.chains[0];
        if (!base) throw new Error('no first chain');
        const onBase = await localChainProvider(base.rpcUrl, base.chainId).call({
          to: base.addresses.stablecoins.USDC,
          data: erc20.encodeFunctionData('balanceOf', [recipient]),
        });
        expect(BigInt(onBase)).toBe(0n);
        // A transaction for another account is refused.
        expect(
          await ask(page, 'eth_sendTransaction', [{ from: recipient, to: usdc, data: '0x' }]),
        ).toMatchObject({ error: { code: 4100 } });
      } finally {
        provider.destroy();
        await page.close();
      }
    });

    it('signs messages and EIP-712 typed data with the key, and refuses like a user when told to', async () => {
      const { page, wallet } = await openWithWallet();
      expect(await ask(page, 'personal_sign', ['0x68656c6c6f', wallet.address])).toMatchObject({
        error: { code: 4100 },
      });
      await ask(page, 'eth_requestAccounts');
      const signed = (await ask(page, 'personal_sign', ['0x68656c6c6f', wallet.address])) as {
        result: string;
      };
      expect(verifyMessage('hello', signed.result)).toBe(wallet.address);

      const typed = {
        domain: {
          name: 'Test',
          version: '1',
          chainId: 8453,
          verifyingContract: '0x0000000000000000000000000000000000000001',
        },
        types: {
          EIP712Domain: [
            { name: 'name', type: 'string' },
            { name: 'version', type: 'string' },
            { name: 'chainId', type: 'uint256' },
            { name: 'verifyingContract', type: 'address' },
          ],
          Cancel: [{ name: 'id', type: 'bytes32' }],
        },
        primaryType: 'Cancel',
        message: { id: `0x${'11'.repeat(32)}` },
      };
      const sig = (await ask(page, 'eth_signTypedData_v4', [wallet.address, JSON.stringify(typed)])) as {
        result: string;
      };
      expect(verifyTypedData(typed.domain, { Cancel: typed.types.Cancel }, typed.message, sig.result)).toBe(
        wallet.address,
      );

      wallet.rejectNext('eth_sendTransaction');
      expect(await ask(page, 'eth_sendTransaction', [{ from: wallet.address, to: wallet.address }])).toEqual({
        error: { code: 4001, message: 'User rejected the request.' },
      });
      expect(wallet.sentTransactions).toEqual([]);
      expect(wallet.requests.map((r) => r.method)).toContain('eth_signTypedData_v4');
      await page.close();
    });
  },
);
