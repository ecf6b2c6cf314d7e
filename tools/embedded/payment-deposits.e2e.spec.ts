import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { Wallet } from 'ethers';
import { type Histogram, register } from 'prom-client';
import { DataSource } from 'typeorm';
import { EVENT_STORE } from '@stablepay/aggregate';
import { CHAIN_OPERATOR_CONFIG, type ChainOperatorConfig } from '@stablepay/chain-operator';
import { connectPaymentDeposit, connectPaymentFactory, connectTestStablecoin } from '@stablepay/contracts';
import type { EventStore } from '@stablepay/event-store';
import { ANVIL_DEV_PRIVATE_KEYS, localChainProvider } from '@stablepay/local-chains';
import { verifyWebhook } from '@stablepay/merchant-sdk';
import { MerchantChainRegistration } from '@stablepay/merchants-service';
import {
  CheckoutStatusRepair,
  PaymentFacts,
  paymentStreamId,
  type PaymentObject,
} from '@stablepay/payments-service';
import { SANDBOX_SANCTIONED_PAYER, SANDBOX_UNREACHABLE_PAYER } from '@stablepay/evm';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { ManualClock } from '@stablepay/util';
import { type EmbeddedStack, startEmbedded } from './embedded';

/**
 * One-time payment deposits on a local chain, through HTTP: `POST /checkouts`, real token transfers from the
 * customer's key to the deposit address on anvil, the indexer observing them, the payments service confirming,
 * screening and deploying the deposit contract, `GET /payments/:id` and the signed webhooks showing the outcome.
 * One stack for every case; expiry moves the service clock and the chain's time together.
 */
const ADMIN_TOKEN = 'admin-token-for-tests-0123456789';
const CHAIN = 'eip155:8453';

async function until<T>(
  probe: () => Promise<T | null | undefined | false>,
  what: string,
  seen?: () => Promise<unknown>,
): Promise<T> {
  for (let i = 0; i < 900; i++) {
    const value = await probe();
    if (value) return value;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(
    `timed out waiting for ${what}${seen ? `; last seen ${JSON.stringify(await seen())}` : ''}`,
  );
}

interface Hook {
  readonly type: string;
  readonly object: PaymentObject & Record<string, unknown>;
}

describe('payment deposits on chain, through HTTP (embedded stack, local chain)', () => {
  let db: TestDatabase;
  let stack: EmbeddedStack;
  let receiver: Server;
  let merchantId: string;
  let settlement: string;
  let apiKey: string;
  let webhookSecret: string;
  const hooks: Hook[] = [];
  const clock = new ManualClock(new Date());

  const http = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${stack.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${apiKey}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };

  beforeAll(async () => {
    receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        // Only events whose signature verifies count: a webhook is what the merchant can trust. The tolerance
        // covers the service clock this suite moves past expiries.
        const verified = verifyWebhook(body, req.headers, webhookSecret, {
          now: clock.now(),
          toleranceSeconds: 86_400,
        });
        if (verified.valid) {
          const event = JSON.parse(body) as { type: string; data: { object: Hook['object'] } };
          hooks.push({ type: event.type, object: event.data.object });
        }
        res.writeHead(verified.valid ? 200 : 400).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const address = receiver.address();
    if (address === null || typeof address === 'string') throw new Error('receiver has no port');
    db = await createTestDatabase();
    stack = await startEmbedded({
      env: {
        DATABASE_URL: db.url,
        PORT: '0',
        ADMIN_TOKEN,
        LOG_LEVEL: 'error',
        LOCAL_CHAIN_IDS: '8453',
        WEBHOOK_POLL_INTERVAL_MS: '50',
        PAYMENT_EXPIRY_POLL_MS: '50',
      },
      dataDir: 'memory',
      clock,
    });
    const created = (await (
      await fetch(`${stack.url}/admin/merchants`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'Acme', mode: 'test' }),
      })
    ).json()) as { id: string; api_key: string };
    merchantId = created.id;
    apiKey = created.api_key;
    settlement = Wallet.createRandom().address;
    const signer = await http('POST', '/settings', {
      merchant_signer: Wallet.createRandom().address,
      settlement_address: settlement,
    });
    if (signer.status !== 200) throw new Error(JSON.stringify(signer.body));
    const hooked = await http('PATCH', '/settings', {
      webhook_url: `http://127.0.0.1:${address.port}/hooks`,
    });
    if (hooked.status !== 200) throw new Error(JSON.stringify(hooked.body));
    webhookSecret = String(hooked.body['webhook_secret']);
    const registration = stack.service.app.get(MerchantChainRegistration);
    await until(
      async () => (await registration.statusOf(merchantId))[0]?.status === 'registered',
      'registration',
    );
  }, 180_000);

  afterAll(async () => {
    await stack?.stop();
    await db?.drop();
    await new Promise<void>((resolve) => receiver?.close(() => resolve()));
  });

  const chain = () => {
    const local = stack.chains?.chains[0];
    if (!local) throw new Error('no local chain');
    return local;
  };
  const config = () => stack.service.app.get<ChainOperatorConfig>(CHAIN_OPERATOR_CONFIG);
  const withProvider = async <T>(
    use: (p: ReturnType<typeof localChainProvider>) => Promise<T>,
  ): Promise<T> => {
    const provider = localChainProvider(chain().rpcUrl, chain().chainId);
    try {
      return await use(provider);
    } finally {
      provider.destroy();
    }
  };

  /** POST /checkouts; the payment's id and deposit address as GET /payments/:id shows them. */
  async function checkout(
    body: Record<string, unknown>,
  ): Promise<{ id: string; checkoutId: string; depositAddress: string }> {
    const created = await http('POST', '/checkouts', { currency: 'USD', ...body });
    if (created.status !== 201) throw new Error(JSON.stringify(created.body));
    const id = String(created.body['payment_id']);
    const read = await http('GET', `/payments/${id}`);
    return {
      id,
      checkoutId: String(created.body['id']),
      depositAddress: String(read.body['deposit_address']),
    };
  }

  /** The alternate surface's configure call (x-api-key), on a payment of POST /checkouts. */
  const configure = async (id: string, body: Record<string, unknown>) => {
    const res = await fetch(`${stack.url}/payment-requests/payments/configure/${id}`, {
      method: 'POST',
      headers: { 'x-api-key': apiKey, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };

  const payment = async (id: string): Promise<PaymentObject> =>
    (await http('GET', `/payments/${id}`)).body as unknown as PaymentObject;

  const eventTypes = async (id: string): Promise<string[]> =>
    (await stack.service.app.get<EventStore>(EVENT_STORE).readStream(paymentStreamId(id))).map((e) => e.type);

  const statusIs = (id: string, status: string) =>
    until(
      async () => {
        const p = await payment(id);
        return p.status === status ? p : null;
      },
      `GET /payments/${id} to say ${status}`,
      () => payment(id),
    );

  /** The signed webhooks received for a payment, in arrival order. */
  const hooksOf = (id: string) => hooks.filter((h) => h.object.id === id);
  const hookArrives = (id: string, type: string) =>
    until(
      async () => hooksOf(id).find((h) => h.type === type),
      `webhook ${type} of ${id}`,
      async () => hooksOf(id).map((h) => h.type),
    );

  /** Mints `amount` of `symbol` to the payer and transfers it to `to`, from the payer's own key. */
  async function pay(payerKey: string, to: string, amount: bigint, symbol: 'USDC' | 'USDT' | 'DAI' = 'USDC') {
    return withProvider(async (provider) => {
      const payer = new Wallet(payerKey, provider);
      const token = connectTestStablecoin(chain().addresses.stablecoins[symbol], payer);
      await (await token.mint(payer.address, amount)).wait();
      const tx = await token.transfer(to, amount);
      await tx.wait();
      return tx.hash;
    });
  }

  const balanceOf = (address: string, symbol: 'USDC' | 'USDT' = 'USDC'): Promise<bigint> =>
    withProvider((provider) =>
      connectTestStablecoin(chain().addresses.stablecoins[symbol], provider).balanceOf(address),
    );

  /** Past a checkout's expiry: the service clock (the expiry timer) and the chain's block time move together. */
  async function afterExpiry(seconds: number): Promise<void> {
    clock.advance(seconds * 1000);
    await withProvider(async (provider) => {
      await provider.send('evm_increaseTime', [seconds]);
      await provider.send('evm_mine', []);
    });
  }

  const customer = ANVIL_DEV_PRIVATE_KEYS[3];
  const customerAddress = new Wallet(customer).address;

  /**
   * Reverts to `snapshot` (taken at `forkBlock`) and answers the orphaned blocks' transactions as signed, the
   * customer's apart from the operator's, for the test to send again in the order the new fork is to mine them.
   */
  async function revertKeepingOrphans(
    provider: ReturnType<typeof localChainProvider>,
    snapshot: string,
    forkBlock: number,
  ): Promise<{ operator: string[]; customers: string[] }> {
    const operator: string[] = [];
    const customers: string[] = [];
    for (let n = forkBlock + 1; n <= (await provider.getBlockNumber()); n++) {
      const block = await provider.getBlock(n, true);
      for (const tx of block?.prefetchedTransactions ?? []) {
        const raw = (await provider.send('eth_getRawTransactionByHash', [tx.hash])) as string;
        (tx.from.toLowerCase() === customerAddress.toLowerCase() ? customers : operator).push(raw);
      }
    }
    await provider.send('evm_revert', [snapshot]);
    return { operator, customers };
  }

  /** A counter's value on the process's metrics registry (what /metrics serves). */
  const metric = async (name: string, labels: Record<string, string> = {}): Promise<number | undefined> => {
    const values = (await register.getSingleMetric(name)?.get())?.values ?? [];
    return values.find((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l))?.value;
  };

  /** Passes the deposit worker finished (its duration histogram's count). */
  const workerPasses = async (): Promise<number> => {
    const metric = register.getSingleMetric('stablepay_payment_deposit_worker_pass_seconds') as
      Histogram | undefined;
    const values = (await metric?.get())?.values ?? [];
    return (
      values.find((v) => v.metricName === 'stablepay_payment_deposit_worker_pass_seconds_count')?.value ?? 0
    );
  };

  it('DIRECT: the deposit is confirmed, then deployed, and the order reaches the settlement address', async () => {
    const before = await balanceOf(settlement);
    const p = await checkout({ amount: '12500000', method: 'DIRECT' });
    const txHash = await pay(customer, p.depositAddress, 12_500_000n);
    const settled = await statusIs(p.id, 'settled');
    expect(settled).toMatchObject({
      amount_paid: '12500000',
      detected_chain: CHAIN,
      non_funding_transactions_count: 0,
      payer_addresses: [customerAddress],
      transactions: [expect.objectContaining({ tx_hash: txHash, is_funding: true })],
    });
    expect(settled.deploy_tx_hash).toMatch(/^0x[0-9a-f]{64}$/);
    expect((await balanceOf(settlement)) - before).toBe(12_500_000n);
    const types = await eventTypes(p.id);
    expect(types.indexOf('PaymentDepositConfirmed.v1')).toBeLessThan(types.indexOf('PaymentSettled.v1'));
    expect((await hookArrives(p.id, 'payment.settled')).object).toMatchObject({ status: 'settled' });
    await hookArrives(p.id, 'payment.deposit_confirmed');
  }, 60_000);

  it('TWO_STEP: the funds are held in escrow with an authorization expiry', async () => {
    const p = await checkout({ amount: '5000000', method: 'TWO_STEP', authorization_period: 86_400 });
    await pay(customer, p.depositAddress, 5_000_000n);
    const escrowed = await statusIs(p.id, 'escrow_confirmed');
    expect(escrowed.deploy_tx_hash).toMatch(/^0x/);
    expect(await balanceOf(p.depositAddress)).toBe(5_000_000n);
    const types = await eventTypes(p.id);
    expect(types.indexOf('PaymentDepositConfirmed.v1')).toBeLessThan(types.indexOf('PaymentEscrowFunded.v1'));
    await hookArrives(p.id, 'payment.escrow_confirmed');
  }, 60_000);

  it("tokens minted straight to the deposit by a bridge's relayer (the log names no sender) settle; the relayer is listed as the minting sender, never the payer: the deploy attests the settlement address, where the surplus is recovered", async () => {
    const before = await balanceOf(settlement);
    const p = await checkout({ amount: '3000000', method: 'DIRECT' });
    // A relayer account (not the customer's) sends the mint, as CCTP's receiveMessage is sent by whoever relays.
    const relayer = new Wallet(ANVIL_DEV_PRIVATE_KEYS[2] ?? '').address;
    const txHash = await withProvider(async (provider) => {
      const minter = new Wallet(ANVIL_DEV_PRIVATE_KEYS[2] ?? '', provider);
      const tx = await connectTestStablecoin(chain().addresses.stablecoins.USDC, minter).mint(
        p.depositAddress,
        3_500_000n,
      );
      await tx.wait();
      return tx.hash;
    });
    const recoverable = await until(
      async () => {
        const seen = await payment(p.id);
        return seen.status === 'recoverable' && seen.recovery_destination === settlement ? seen : null;
      },
      'settled with the surplus recoverable to the settlement address',
      () => payment(p.id),
    );
    expect(recoverable).toMatchObject({
      amount_paid: '3500000',
      recoverable_reason: 'over_deposit',
      recoverable_amount: '500000',
      transactions: [
        expect.objectContaining({ tx_hash: txHash, from: relayer, minted: true, is_funding: true }),
      ],
    });
    expect((await balanceOf(settlement)) - before).toBe(3_000_000n);
    // The contract sends refund, reclaim and recover only to the payer it holds: the settlement address, not the relayer.
    const onChain = await withProvider((provider) =>
      connectPaymentDeposit(p.depositAddress, provider).payment(),
    );
    expect(onChain.payer).toBe(settlement);
  }, 60_000);

  it('a wallet that deducts its fee underpays; a top-up before expiry adds up to a settled payment', async () => {
    const before = await balanceOf(settlement);
    const p = await checkout({ amount: '10000000' });
    await pay(customer, p.depositAddress, 9_900_000n);
    const short = await until(async () => {
      const seen = await payment(p.id);
      return seen.amount_paid === '9900000' ? seen : null;
    }, 'the underpayment');
    expect(short.status).toBe('pending');
    await pay(customer, p.depositAddress, 100_000n);
    const settled = await statusIs(p.id, 'settled');
    expect(settled.amount_paid).toBe('10000000');
    expect(settled.transactions.map((t) => [t.amount, t.is_funding])).toEqual([
      ['9900000', true],
      ['100000', true],
    ]);
    expect((await balanceOf(settlement)) - before).toBe(10_000_000n);
    await hookArrives(p.id, 'payment.settled');
    // One confirmation, once the order was covered; no recoverable notice (nothing left over).
    expect(hooksOf(p.id).filter((h) => h.type === 'payment.deposit_confirmed')).toHaveLength(1);
    expect(await eventTypes(p.id)).not.toContain('PaymentRecoverable.v1');
  }, 60_000);

  it('a token the checkout does not accept is counted as non-funding and does not settle anything', async () => {
    const p = await checkout({ amount: '3000000', accepted_tokens: ['USDC'] });
    await pay(customer, p.depositAddress, 3_000_000n, 'USDT');
    const counted = await until(async () => {
      const seen = await payment(p.id);
      return seen.non_funding_transactions_count === 1 ? seen : null;
    }, 'the wrong-token transfer');
    expect(counted).toMatchObject({ status: 'pending', amount_paid: '0' });
    expect(counted.transactions).toEqual([
      expect.objectContaining({ is_funding: false, non_funding_reason: 'wrong_token' }),
    ]);
    await pay(customer, p.depositAddress, 3_000_000n, 'USDC');
    expect((await statusIs(p.id, 'settled')).non_funding_transactions_count).toBe(1);
  }, 60_000);

  it('an over-deposit and stragglers after the settle are counted non-funding; the surplus is recoverable to the payer', async () => {
    const p = await checkout({ amount: '2000000' });
    await pay(customer, p.depositAddress, 2_000_000n);
    await statusIs(p.id, 'settled');
    // The customer pays again (the same token) and sends another token after the settle.
    const again = await pay(customer, p.depositAddress, 2_000_000n);
    const otherToken = await pay(customer, p.depositAddress, 700_000n, 'USDT');
    const recoverable = await until(async () => {
      const seen = await payment(p.id);
      return seen.status === 'recoverable' && seen.non_funding_transactions_count === 2 ? seen : null;
    }, 'the straggler and the other token counted, the surplus recoverable');
    expect(recoverable).toMatchObject({
      amount_paid: '2000000',
      recoverable_reason: 'over_deposit',
      recovery_destination: customerAddress,
      recoverable_amount: '2000000',
    });
    expect(recoverable.transactions).toEqual([
      expect.objectContaining({ amount: '2000000', is_funding: true }),
      expect.objectContaining({ tx_hash: again, is_funding: false, non_funding_reason: 'straggler' }),
      // After the settle the funding window is closed: whatever the token, it arrived too late (docs/payments.md).
      expect.objectContaining({
        tx_hash: otherToken,
        token_symbol: 'USDT',
        is_funding: false,
        non_funding_reason: 'straggler',
      }),
    ]);
    // Both stay in the deposit: the payment-token surplus for recover, the other token for rescue.
    expect(await balanceOf(p.depositAddress)).toBe(2_000_000n);
    expect(await balanceOf(p.depositAddress, 'USDT')).toBe(700_000n);
    const notice = await hookArrives(p.id, 'payment.recoverable');
    expect(notice.object).toMatchObject({
      recoverable_reason: 'over_deposit',
      recovery_destination: customerAddress,
    });
  }, 60_000);

  it('a sanctioned payer flags the payment: flagged on chain, never deployed, never re-screened', async () => {
    const key = ANVIL_DEV_PRIVATE_KEYS[9];
    expect(new Wallet(key).address).toBe(SANDBOX_SANCTIONED_PAYER);
    const p = await checkout({ amount: '2000000' });
    await pay(key, p.depositAddress, 2_000_000n);
    const flagged = await statusIs(p.id, 'flagged');
    expect(flagged.deploy_tx_hash).toBeNull();
    await withProvider(async (provider) => {
      const factory = connectPaymentFactory(config().addresses?.paymentFactory ?? '', provider);
      await until(async () => (await factory.isFlagged(p.depositAddress)) as boolean, 'flagPayment on chain');
    });
    const types = await eventTypes(p.id);
    expect(types.filter((t) => t === 'PaymentFlagged.v1')).toHaveLength(1);
    expect(types).not.toContain('PaymentDeployRequested.v1');
    expect(await balanceOf(p.depositAddress)).toBe(2_000_000n);
    await hookArrives(p.id, 'payment.flagged');
  }, 60_000);

  it('an unreachable screening provider holds the payment (screening_pending), re-screens with backoff, then settles', async () => {
    const key = ANVIL_DEV_PRIVATE_KEYS[7];
    expect(new Wallet(key).address).toBe(SANDBOX_UNREACHABLE_PAYER);
    const p = await checkout({ amount: '1000000' });
    await pay(key, p.depositAddress, 1_000_000n);
    await statusIs(p.id, 'settled');
    const types = await eventTypes(p.id);
    expect(types.filter((t) => t === 'PaymentScreeningUnavailable.v1')).toHaveLength(1);
    expect(types.indexOf('PaymentScreeningUnavailable.v1')).toBeLessThan(
      types.indexOf('PaymentPayerCleared.v1'),
    );
    await hookArrives(p.id, 'payment.screening_pending');
    await hookArrives(p.id, 'payment.settled');
  }, 60_000);

  it('a confirmed deposit lost to a reorg fails the payment with deposit_lost_to_reorg', async () => {
    await withProvider(async (provider) => {
      const p = await checkout({ amount: '4000000', method: 'TWO_STEP' });
      // Let the watch reach the indexer before the snapshot, so only the transfer is undone.
      await new Promise((r) => setTimeout(r, 1_500));
      const snapshot = (await provider.send('evm_snapshot', [])) as string;
      const forkBlock = await provider.getBlockNumber();
      await pay(customer, p.depositAddress, 4_000_000n);
      await until(
        async () => (await eventTypes(p.id)).includes('PaymentDepositConfirmed.v1'),
        'deposit confirmed',
      );
      // A node puts an orphaned block's transactions back in its pool; evm_revert drops them. The service's own
      // ones (the deposit's deploy can be mined before the revert) are sent again, as a real reorg would keep
      // them: without that, the operator's next nonce has no transaction under it and every later transaction of
      // the service waits behind the gap. Only the customer's transactions are lost.
      const orphaned: string[] = [];
      for (let n = forkBlock + 1; n <= (await provider.getBlockNumber()); n++) {
        const block = await provider.getBlock(n, true);
        for (const tx of block?.prefetchedTransactions ?? [])
          if (tx.from.toLowerCase() !== customerAddress.toLowerCase())
            orphaned.push((await provider.send('eth_getRawTransactionByHash', [tx.hash])) as string);
      }
      await provider.send('evm_revert', [snapshot]);
      for (const raw of orphaned) await provider.send('eth_sendRawTransaction', [raw]);
      // A longer fork without the transfer: the follower sees the parent hashes change and retracts it.
      await provider.send('anvil_mine', ['0x8']);
      const failed = await statusIs(p.id, 'failed');
      expect(failed.failure_reason).toBe('deposit_lost_to_reorg');
      expect((await hookArrives(p.id, 'payment.failed')).object).toMatchObject({
        failure_reason: 'deposit_lost_to_reorg',
      });
      // The checkout agrees with its payment: the deposit that paid it is gone.
      expect((await http('GET', `/checkouts/${p.checkoutId}`)).body).toMatchObject({ status: 'failed' });

      // A row the projection wrote before checkouts knew the reorg failure (8729b6b) said paid, and no later event
      // rewrote it: the start-time repair does, once.
      const dataSource = stack.service.app.get(DataSource);
      await dataSource.query(
        `UPDATE checkouts SET status = 'paid', object = jsonb_set(object, '{status}', '"paid"') WHERE id = $1`,
        [p.checkoutId],
      );
      const listedFailed = async () =>
        ((await http('GET', '/checkouts?status=failed&limit=100')).body['data'] as Array<{ id: string }>).map(
          (c) => c.id,
        );
      expect(await listedFailed()).not.toContain(p.checkoutId);
      const repair = stack.service.app.get(CheckoutStatusRepair);
      expect(await repair.repairAll()).toEqual([p.id]);
      expect(await listedFailed()).toContain(p.checkoutId);
      expect((await http('GET', `/checkouts/${p.checkoutId}`)).body).toMatchObject({ status: 'failed' });
      expect(await repair.repairAll()).toEqual([]);
    });
  }, 90_000);

  it('a reorg fails a payment paid in parts after its deploy: the deploy undone, what comes back to the deposit (the rest, the lost part mined again) recovered to the payer', async () => {
    await withProvider(async (provider) => {
      const p = await checkout({ amount: '4000000' });
      // Paid at once: the deposit's watch starts before the payment was created, whenever it is registered.
      const first = await pay(customer, p.depositAddress, 2_000_000n);
      await until(
        async () => (await payment(p.id)).transactions.find((t) => t.tx_hash === first)?.confirmed,
        'the first part confirmed',
      );
      const snapshot = (await provider.send('evm_snapshot', [])) as string;
      const forkBlock = await provider.getBlockNumber();
      const second = await pay(customer, p.depositAddress, 2_000_000n);
      const settled = await statusIs(p.id, 'settled');
      // Every transaction of the orphaned blocks, the deploy first: on the new fork it runs before the second part
      // is back (reverted: the deposit holds half the order), then the customer's mint and transfer are mined again.
      const { operator, customers } = await revertKeepingOrphans(provider, snapshot, forkBlock);
      for (const raw of [...operator, ...customers]) await provider.send('eth_sendRawTransaction', [raw]);
      const redeploy = await provider.getTransactionReceipt(String(settled.deploy_tx_hash));
      expect(redeploy?.status).toBe(0);
      await provider.send('anvil_mine', ['0x8']);

      await hookArrives(p.id, 'payment.failed');
      const recoverable = await until(
        async () => {
          const seen = await payment(p.id);
          return seen.status === 'recoverable' &&
            seen.recoverable_amount === '4000000' &&
            seen.deploy_tx_hash !== null &&
            seen.deploy_tx_hash !== settled.deploy_tx_hash
            ? seen
            : null;
        },
        'both parts recoverable after a NONE deployment',
        () => payment(p.id),
      );
      expect(recoverable).toMatchObject({
        failure_reason: 'deposit_lost_to_reorg',
        recoverable_reason: 'abandoned',
        recovery_destination: customerAddress,
      });
      expect(recoverable.transactions.map((t) => [t.tx_hash, t.confirmed])).toEqual([
        [first, true],
        [second, true],
      ]);
      expect(await balanceOf(p.depositAddress)).toBe(4_000_000n);
      const types = await eventTypes(p.id);
      expect(types).toEqual(
        expect.arrayContaining([
          'PaymentFailed.v1',
          'PaymentDeploymentLost.v1',
          'PaymentTransferReincluded.v1',
          'PaymentDepositDeployed.v1',
        ]),
      );

      // The payer the NONE deploy attested is final one day later (chain time; the service clock with it).
      await afterExpiry(86_401);
      const before = await balanceOf(customerAddress);
      const recovered = await http('POST', `/payments/${p.id}/recover`);
      expect(recovered.body['error']).toBeUndefined();
      expect(recovered.status).toBe(200);
      expect((await balanceOf(customerAddress)) - before).toBe(4_000_000n);
      expect(await balanceOf(p.depositAddress)).toBe(0n);
      expect(recovered.body).toMatchObject({ status: 'failed', failure_reason: 'deposit_lost_to_reorg' });
      expect(recovered.body).not.toHaveProperty('recoverable_amount');
      await hookArrives(p.id, 'payment.recovered');
      // Nothing is sent twice: a second recover finds nothing.
      expect((await http('POST', `/payments/${p.id}/recover`)).status).toBe(409);
      expect((await balanceOf(customerAddress)) - before).toBe(4_000_000n);
    });
  }, 120_000);

  it('a reorg fails a settled payment and both its transfer and its deploy land again on the new fork: the payment is reinstated (settled, payment.settled), its checkout paid again', async () => {
    await withProvider(async (provider) => {
      const before = await balanceOf(settlement);
      const p = await checkout({ amount: '3000000' });
      // Let the watch reach the indexer before the snapshot, so only the payment's own transactions are undone.
      await new Promise((r) => setTimeout(r, 1_500));
      const snapshot = (await provider.send('evm_snapshot', [])) as string;
      const forkBlock = await provider.getBlockNumber();
      const paid = await pay(customer, p.depositAddress, 3_000_000n);
      const settled = await statusIs(p.id, 'settled');
      // Every transaction of the orphaned blocks, the customer's first: on the new fork the transfer is mined again
      // before the deploy, which then forwards the order again (a node keeps an orphaned block's transactions).
      const { operator, customers } = await revertKeepingOrphans(provider, snapshot, forkBlock);
      expect(await balanceOf(settlement)).toBe(before);
      for (const raw of [...customers, ...operator]) await provider.send('eth_sendRawTransaction', [raw]);
      const redeploy = await provider.getTransactionReceipt(String(settled.deploy_tx_hash));
      expect(redeploy?.status).toBe(1);
      await provider.send('anvil_mine', ['0x8']);

      await hookArrives(p.id, 'payment.failed');
      const reinstated = await until(
        async () => {
          const seen = await payment(p.id);
          return seen.status === 'settled' && (await eventTypes(p.id)).includes('PaymentReinstated.v1')
            ? seen
            : null;
        },
        'the payment reinstated',
        () => payment(p.id),
      );
      expect(reinstated).toMatchObject({
        deploy_tx_hash: settled.deploy_tx_hash,
        amount_paid: '3000000',
        transactions: [expect.objectContaining({ tx_hash: paid, confirmed: true, is_funding: true })],
      });
      expect(reinstated).not.toHaveProperty('failure_reason');
      expect(await balanceOf(settlement)).toBe(before + 3_000_000n);
      const types = await eventTypes(p.id);
      expect(types).not.toContain('PaymentDeploymentLost.v1');
      expect(types.filter((t) => t === 'PaymentDeployRequested.v1')).toHaveLength(1);
      // The merchant was told payment.failed, then payment.settled again (the latest is authoritative).
      await until(
        async () => {
          const seen = hooksOf(p.id).map((h) => h.type);
          return seen.lastIndexOf('payment.settled') > seen.indexOf('payment.failed') ? seen : null;
        },
        'payment.settled after payment.failed',
        async () => hooksOf(p.id).map((h) => h.type),
      );
      expect((await http('GET', `/checkouts/${p.checkoutId}`)).body).toMatchObject({ status: 'paid' });
    });
  }, 120_000);

  it('a transfer queued for confirmation before its payment recorded it stays queued and is confirmed once recorded', async () => {
    // The interleaving that left deposits pending for good: the worker reached a queued transfer the payment had
    // not recorded yet, decided nothing, and dropped it from the queue. (The flow now records first, so the row is
    // written here by hand; rows from before the fix are re-queued by a migration.)
    const p = await checkout({ amount: '1500000', accepted_tokens: ['USDC'] });
    const dataSource = stack.service.app.get(DataSource);
    const transfer = { chain: CHAIN, txHash: `0x${'ab'.repeat(32)}`, logIndex: 0 };
    const observationId = randomUUID();
    await dataSource.query(
      `INSERT INTO payment_deposit_transfers (observation_id, payment_id, chain, tx_hash, log_index, block_number, state)
       VALUES ($1, $2, $3, $4, $5, 1, 'observed')`,
      [observationId, p.id, transfer.chain, transfer.txHash, transfer.logIndex],
    );
    const queueState = async () =>
      (
        (await dataSource.query('SELECT state FROM payment_deposit_transfers WHERE observation_id = $1', [
          observationId,
        ])) as { state: string }[]
      )[0]?.state;
    const passes = await workerPasses();
    await until(async () => (await workerPasses()) >= passes + 2, 'two worker passes');
    expect(await queueState()).toBe('observed');
    expect(await eventTypes(p.id)).not.toContain('PaymentTransferConfirmed.v1');

    // Recorded now (a token the checkout does not accept: nothing to deploy afterwards).
    const usdt = config().chains[0]?.stablecoins.find((c) => c.symbol === 'USDT')?.assetId ?? '';
    await stack.service.app.get(PaymentFacts).append(
      p.id,
      {
        type: 'ObserveTransfer',
        transfer: { ...transfer, from: customerAddress, asset: usdt, amount: '1500000', blockNumber: '1' },
        blockTime: clock.now(),
      },
      `observe:${observationId}`,
    );
    await until(async () => (await queueState()) === 'confirmed', 'the queued transfer confirmed');
    expect(await eventTypes(p.id)).toContain('PaymentTransferConfirmed.v1');
  }, 60_000);

  it('refuses a checkout of a merchant with no signer on chain, on both surfaces (422 merchant_signer_required), and creates nothing', async () => {
    const other = (await (
      await fetch(`${stack.url}/admin/merchants`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'No signer yet', mode: 'test' }),
      })
    ).json()) as { id: string; api_key: string };
    const as = async (path: string, headers: Record<string, string>) => {
      const res = await fetch(`${stack.url}${path}`, {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json' },
        body: JSON.stringify({ amount: '1000000', currency: 'USD' }),
      });
      return { status: res.status, body: (await res.json()) as { error?: Record<string, unknown> } };
    };
    const settings = await fetch(`${stack.url}/settings`, {
      headers: { authorization: `Bearer ${other.api_key}` },
    });
    expect(((await settings.json()) as { chain_registrations: unknown }).chain_registrations).toEqual([
      expect.objectContaining({ chain: CHAIN, status: 'not_started' }),
    ]);
    for (const refused of [
      await as('/checkouts', { authorization: `Bearer ${other.api_key}` }),
      await as('/payment-requests/payments/new', { 'x-api-key': other.api_key }),
    ]) {
      expect(refused.status).toBe(422);
      expect(refused.body.error).toMatchObject({
        type: 'cannot_process',
        code: 'merchant_signer_required',
        param: 'merchant_signer',
      });
      expect(String(refused.body.error?.['message'])).toContain('POST /settings');
    }
    const payments = await fetch(`${stack.url}/payments`, {
      headers: { authorization: `Bearer ${other.api_key}` },
    });
    expect(((await payments.json()) as { data: unknown[] }).data).toEqual([]);
  }, 60_000);

  it('a settings change the chain has not taken refuses new checkouts (409 merchant_change_pending) and holds the deploy of an earlier one (pending, funds in the deposit, alerted) until they agree', async () => {
    const before = await balanceOf(settlement);
    const held = (await metric('stablepay_payment_deposit_registry_mismatches_total', { chain: CHAIN })) ?? 0;
    // Taken while the merchant is registered as its settings say.
    const p = await checkout({ amount: '3000000' });
    // A settlement change the chain does not follow without the merchant's MerchantChange signature: from here
    // the registry (the old address) and the service record (the new one) disagree.
    const elsewhere = Wallet.createRandom().address;
    expect((await http('PUT', '/settings', { settlement_address: elsewhere })).status).toBe(200);
    await until(
      async () =>
        ((await http('GET', '/settings')).body['chain_registrations'] as Array<{ status: string }>)[0]
          ?.status === 'change_requires_merchant_signature',
      'the registration to await the merchant change',
    );
    const refused = await http('POST', '/checkouts', { currency: 'USD', amount: '1000000' });
    expect(refused.status).toBe(409);
    expect(refused.body['error']).toMatchObject({
      type: 'invalid_request',
      code: 'merchant_change_pending',
      param: 'accepted_chains',
    });
    expect(String((refused.body['error'] as Record<string, unknown>)['message'])).toContain(
      'POST /settings/merchant-change',
    );

    await pay(customer, p.depositAddress, 3_000_000n);
    await until(
      async () =>
        ((await metric('stablepay_payment_deposit_registry_mismatches_total', { chain: CHAIN })) ?? 0) > held,
      'the deploy held',
    );
    // The merchant sees why: the payment says the deploy waits for its MerchantChange.
    const shown = await until(async () => {
      const read = await payment(p.id);
      return read.deploy_hold_reason ? read : null;
    }, 'the hold on the payment');
    expect(shown).toMatchObject({
      status: 'pending',
      deploy_tx_hash: null,
      deploy_hold_reason: 'merchant_change_pending',
      amount_paid: '3000000',
    });
    expect(await eventTypes(p.id)).toEqual(
      expect.arrayContaining(['PaymentDeployRequested.v1', 'PaymentDeployHeld.v1']),
    );
    expect(await balanceOf(p.depositAddress)).toBe(3_000_000n);
    expect(await balanceOf(elsewhere)).toBe(0n);

    // The records agree again: the held deploy goes ahead (the retry's backoff runs on the service clock).
    expect((await http('PUT', '/settings', { settlement_address: settlement })).status).toBe(200);
    clock.advance(60_000);
    expect(await statusIs(p.id, 'settled')).toMatchObject({ deploy_hold_reason: null });
    expect((await balanceOf(settlement)) - before).toBe(3_000_000n);
    expect(await balanceOf(elsewhere)).toBe(0n);
    await until(
      async () =>
        ((await http('GET', '/settings')).body['chain_registrations'] as Array<{ status: string }>)[0]
          ?.status === 'registered',
      'the registration to agree again',
    );
    expect((await http('POST', '/checkouts', { currency: 'USD', amount: '1000000' })).status).toBe(201);
  }, 90_000);

  it("one unit of USDC from a third party blocks neither cancel nor configure nor shows the customer a payment; a payer's partial payment blocks only configure to another token, and a cancel returns it to the payer", async () => {
    const griefer = ANVIL_DEV_PRIVATE_KEYS[5];
    const grieferAddress = new Wallet(griefer).address;
    const seenTransfers = (id: string, count: number) =>
      until(
        async () => {
          const seen = await payment(id);
          return seen.transactions.length === count ? seen : null;
        },
        `${count} transfer(s) observed on ${id}`,
        () => payment(id),
      );

    // Cancel: the dust is observed (amount_paid 1), and the merchant's cancel still goes through.
    const dusted = await checkout({ amount: '4000000' });
    const dust = await pay(griefer, dusted.depositAddress, 1n);
    expect((await seenTransfers(dusted.id, 1)).amount_paid).toBe('1');
    // The customer's hosted page still asks for the payment (it said "Payment received, confirming").
    const hosted = async (checkoutId: string) =>
      ((await (await fetch(`${stack.url}/hosted/pay/${checkoutId}/status`)).json()) as { status: string })
        .status;
    expect(await hosted(dusted.checkoutId)).toBe('pending');
    const cancelled = await http('POST', `/checkouts/${dusted.checkoutId}/cancel`, {});
    expect(cancelled.status).toBe(200);
    expect(cancelled.body['status']).toBe('cancelled');
    await hookArrives(dusted.id, 'payment.cancelled');
    // The dust is then what any funds left in a cancelled checkout are: abandoned, recoverable to its sender.
    expect(await statusIs(dusted.id, 'recoverable')).toMatchObject({
      recoverable_reason: 'abandoned',
      recovery_destination: grieferAddress,
      recoverable_amount: '1',
      transactions: [expect.objectContaining({ tx_hash: dust, amount: '1' })],
    });

    // Configure: the dust stays in USDC, listed wrong_token once USDT is chosen; the payer's USDT pays the order.
    const configured = await checkout({ amount: '3000000' });
    const usdcDust = await pay(griefer, configured.depositAddress, 1n);
    await seenTransfers(configured.id, 1);
    expect((await configure(configured.id, { chain: CHAIN, token: 'USDT' })).status).toBe(200);
    await pay(customer, configured.depositAddress, 3_000_000n, 'USDT');
    const settled = await statusIs(configured.id, 'settled');
    expect(settled).toMatchObject({ amount_paid: '3000000', payer_addresses: [customerAddress] });
    expect(settled.transactions).toEqual([
      expect.objectContaining({ tx_hash: usdcDust, is_funding: false, non_funding_reason: 'wrong_token' }),
      expect.objectContaining({ token_symbol: 'USDT', is_funding: true }),
    ]);

    // A real partial payment (half the order) by the payer: the hosted page says it arrived, and configure is
    // refused (another token would leave the half where only the merchant's rescue moves it).
    const partial = await checkout({ amount: '4000000' });
    const half = await pay(customer, partial.depositAddress, 2_000_000n);
    expect((await seenTransfers(partial.id, 1)).amount_paid).toBe('2000000');
    expect(await hosted(partial.checkoutId)).toBe('confirming');
    const unconfigurable = await configure(partial.id, { chain: CHAIN, token: 'USDT' });
    expect(unconfigurable.status).toBe(409);
    expect(unconfigurable.body).toMatchObject({ error: { code: 'payment_has_deposit' } });
    // The token the half was paid in can still be chosen (a griefer's share no longer blocks the call itself).
    const sameToken = await configure(partial.id, { chain: CHAIN, token: 'USDC' });
    expect(sameToken.body['error']).toBeUndefined();
    expect(sameToken.status).toBe(200);
    // The cancel goes through (a part of the order never blocks it: a griefer's share blocked it until expiry), and
    // the half is what funds left in a cancelled checkout are: recoverable to its payer after a NONE deployment.
    const partCancelled = await http('POST', `/checkouts/${partial.checkoutId}/cancel`, {});
    expect(partCancelled.body['error']).toBeUndefined();
    expect(partCancelled.body['status']).toBe('cancelled');
    await hookArrives(partial.id, 'payment.cancelled');
    const returned = await until(
      async () => {
        const seen = await payment(partial.id);
        return seen.status === 'recoverable' && seen.deploy_tx_hash !== null ? seen : null;
      },
      'the half recoverable after a NONE deployment',
      () => payment(partial.id),
    );
    expect(returned).toMatchObject({
      recoverable_reason: 'abandoned',
      recovery_destination: customerAddress,
      recoverable_amount: '2000000',
      transactions: [expect.objectContaining({ tx_hash: half, is_funding: true })],
    });
    expect(await balanceOf(partial.depositAddress)).toBe(2_000_000n);
    // A payment in full still blocks the cancel (409 checkout_has_deposit while it confirms, checkout_not_pending
    // once settled: the deploy may come first).
    const full = await checkout({ amount: '4000000' });
    await pay(customer, full.depositAddress, 4_000_000n);
    await seenTransfers(full.id, 1);
    const refused = await http('POST', `/checkouts/${full.checkoutId}/cancel`, {});
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({ error: { type: 'invalid_request' } });
    expect(['checkout_has_deposit', 'checkout_not_pending']).toContain(
      (refused.body['error'] as { code: string }).code,
    );
    expect((await payment(full.id)).status).not.toBe('cancelled');
  }, 120_000);

  it('an order paid in full in a token an earlier configure left out settles once configure chooses that token', async () => {
    const p = await checkout({ amount: '2000000' });
    expect((await configure(p.id, { chain: CHAIN, token: 'USDT' })).status).toBe(200);
    const txHash = await pay(customer, p.depositAddress, 2_000_000n);
    const listed = await until(
      async () => {
        const seen = await payment(p.id);
        return seen.transactions.length === 1 ? seen : null;
      },
      `the USDC transfer listed on ${p.id}`,
      () => payment(p.id),
    );
    expect(listed).toMatchObject({
      amount_paid: '0',
      transactions: [expect.objectContaining({ non_funding_reason: 'wrong_token' })],
    });
    const chosen = await configure(p.id, { chain: CHAIN, token: 'USDC' });
    expect(chosen.body['error']).toBeUndefined();
    expect(chosen.status).toBe(200);
    const settled = await statusIs(p.id, 'settled');
    expect(settled).toMatchObject({
      amount_paid: '2000000',
      payer_addresses: [customerAddress],
      transactions: [
        expect.objectContaining({ tx_hash: txHash, is_funding: true, non_funding_reason: null }),
      ],
    });
    expect(await eventTypes(p.id)).toContain('PaymentTransferReclassified.v1');
  }, 60_000);

  // The last two move the service clock and the chain's time past an expiry.
  it('a transfer after expiry is a straggler, recoverable to its sender (abandoned), after a NONE deployment', async () => {
    const p = await checkout({ amount: '2500000', expires_in: 300 });
    await afterExpiry(301);
    await statusIs(p.id, 'expired');
    await pay(customer, p.depositAddress, 2_500_000n);
    const recoverable = await statusIs(p.id, 'recoverable');
    expect(recoverable).toMatchObject({
      recoverable_reason: 'abandoned',
      recovery_destination: customerAddress,
      amount_paid: '0',
      non_funding_transactions_count: 1,
    });
    await until(
      async () => (await payment(p.id)).deploy_tx_hash !== null,
      'the NONE deployment',
      () => payment(p.id),
    );
    expect(await balanceOf(p.depositAddress)).toBe(2_500_000n);
    await hookArrives(p.id, 'payment.expired');
    expect((await hookArrives(p.id, 'payment.recoverable')).object).toMatchObject({
      recoverable_reason: 'abandoned',
      recovery_destination: customerAddress,
    });
  }, 90_000);

  it('a partial payment expires; a late overpaying transfer is recoverable with it, every transfer listed', async () => {
    const p = await checkout({ amount: '6000000', expires_in: 300 });
    const partial = await pay(customer, p.depositAddress, 2_000_000n);
    await until(async () => (await payment(p.id)).amount_paid === '2000000', 'the partial payment');
    await afterExpiry(301);
    await statusIs(p.id, 'recoverable');
    const late = await pay(customer, p.depositAddress, 7_000_000n);
    const whole = await until(
      async () => {
        const seen = await payment(p.id);
        return seen.recoverable_amount === '9000000' ? seen : null;
      },
      'the late transfer recoverable with the partial one',
      () => payment(p.id),
    );
    expect(whole).toMatchObject({
      status: 'recoverable',
      recoverable_reason: 'abandoned',
      recovery_destination: customerAddress,
      amount_paid: '2000000',
      non_funding_transactions_count: 1,
    });
    expect(whole.transactions).toEqual([
      expect.objectContaining({ tx_hash: partial, amount: '2000000', is_funding: true }),
      expect.objectContaining({
        tx_hash: late,
        amount: '7000000',
        is_funding: false,
        non_funding_reason: 'straggler',
      }),
    ]);
    expect(await balanceOf(p.depositAddress)).toBe(9_000_000n);
    const types = await eventTypes(p.id);
    expect(types).toContain('PaymentExpired.v1');
    expect(types).not.toContain('PaymentSettled.v1');
    await hookArrives(p.id, 'payment.expired');
    // The notice follows the payer-owned balance: the last one names all of it.
    await until(
      async () =>
        hooksOf(p.id).find(
          (h) => h.type === 'payment.recoverable' && h.object.recoverable_amount === '9000000',
        ),
      'payment.recoverable naming the whole balance',
      async () => hooksOf(p.id).map((h) => [h.type, h.object.recoverable_amount]),
    );
  }, 90_000);
});
