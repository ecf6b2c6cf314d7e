import { createServer, type ServerResponse, type Server } from 'node:http';
import { getAddress } from 'ethers';
import { register } from 'prom-client';
import { connectTestStablecoin } from '@stablepay/contracts';
import { LOCAL_PAYOUT_OFF_RAMP } from '@stablepay/local-chains';
import { PayoutFlowConsumer } from '@stablepay/payouts-service';
import { reorgLosing } from './test-support/anvil';
import { type Json, until } from './test-support/http';
import { transferToken } from './test-support/payments';
import { activeCustomer as activeCustomerOf, newUsdcPayout } from './test-support/payouts';
import { OnChainStack } from './test-support/stack';

const CHAIN = 'eip155:8453';
const AMOUNT = 25_000_000n;
const RETRACTED_AFTER_FORWARD = 'stablepay_payout_deposit_retracted_after_forward_total';

/**
 * The screening provider the stack asks before each sweep (SANCTIONS_SCREENING_PROVIDER=chainalysis, pointed here):
 * it lists `listed` addresses, and keeps the request for a `held` address unanswered until the test releases it. A
 * held request is the flow stopped between a confirmed deposit and its sweep, for as long as the test needs: no
 * timing, the test decides when the sweep may go.
 */
class ScreeningGate {
  readonly listed = new Set<string>();
  private readonly held = new Map<string, ServerResponse[]>();
  private readonly asked = new Map<string, number>();
  private server: Server | undefined;
  url = '';

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      const address = getAddress(decodeURIComponent((req.url ?? '').split('/').pop() ?? ''));
      this.asked.set(address, (this.asked.get(address) ?? 0) + 1);
      const waiting = this.held.get(address);
      if (waiting) waiting.push(res);
      else this.answer(res, address);
    });
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    const bound = this.server.address();
    if (bound === null || typeof bound === 'string') throw new Error('screening gate has no port');
    this.url = `http://127.0.0.1:${bound.port}`;
  }

  hold(address: string): void {
    this.held.set(getAddress(address), []);
  }

  /** Answers the held requests of `address` (and every later one). */
  release(address: string): void {
    const key = getAddress(address);
    for (const res of this.held.get(key) ?? []) this.answer(res, key);
    this.held.delete(key);
  }

  /** Requests for `address` kept unanswered right now. */
  holding(address: string): number {
    return this.held.get(getAddress(address))?.length ?? 0;
  }

  async stop(): Promise<void> {
    for (const address of [...this.held.keys()]) this.release(address);
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  private answer(res: ServerResponse, address: string): void {
    const identifications = this.listed.has(address)
      ? [{ category: 'sanctions', name: 'OFAC SDN test' }]
      : [];
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ identifications }));
  }
}

/**
 * Payouts through a real reorg on a local chain (docs/payouts.md, "Reorgs"): the indexer retracts a confirmed deposit
 * whose block a longer fork orphaned, and the payouts scope answers it through the HTTP API:
 * - before the sweep (the flow held at the screening), the payout waits for a deposit again with `deposit` null, the
 *   flow sweeps nothing for it, and the same transfer re-included in another block funds the oldest payout waiting;
 * - after the forward, the payout keeps its state and the retraction is counted for the operator.
 */
describe('payouts through a chain reorg: a retracted deposit (anvil)', () => {
  const gate = new ScreeningGate();
  const e2e = new OnChainStack();
  const { api } = e2e;
  const chain = e2e.chain(CHAIN);
  const usdc = () => connectTestStablecoin(chain.local.addresses.stablecoins.USDC, chain.provider());

  beforeAll(async () => {
    await gate.start();
    await e2e.start('8453', {
      SANCTIONS_SCREENING_PROVIDER: 'chainalysis',
      CHAINALYSIS_API_KEY: 'screening-gate-key',
      CHAINALYSIS_API_URL: gate.url,
      // A held screening must outlast the reorg the test drives meanwhile (a timeout would only retry it, held again).
      SANCTIONS_SCREENING_TIMEOUT_MS: '60000',
    });
    await e2e.receiveWebhooks();
  });

  afterAll(async () => {
    await gate.stop();
    await e2e.stop();
  });

  const activeCustomer = (name: string) => activeCustomerOf(api, name, 'payouts-reorg@example.com');
  const newPayout = (customerId: string) => newUsdcPayout(api, customerId, AMOUNT.toString(), CHAIN);

  const payout = async (id: string): Promise<Json> => (await api('GET', `/payouts/${id}`)).body;
  const payoutUntil = (id: string, done: (p: Json) => boolean, what: string) =>
    until(() => payout(id), done, what);

  const retractedAfterForward = async (): Promise<number> => {
    const values = (await register.getSingleMetric(RETRACTED_AFTER_FORWARD)?.get())?.values ?? [];
    return values.find((v) => v.labels['chain'] === CHAIN)?.value ?? 0;
  };

  it('before the sweep: the payout awaits a deposit again, nothing is swept for it, and the transfer re-included funds the oldest payout waiting', async () => {
    const { customerId, address } = await activeCustomer('Ada Lovelace');
    // Funds held at the address (a listed sender's deposit): what a sweep for a payout without a deposit would take.
    const listed = chain.wallet(2);
    gate.listed.add(listed.address);
    const flagged = await newPayout(customerId);
    await transferToken(chain, listed, 'USDC', address, AMOUNT);
    await payoutUntil(flagged, (p) => p['failure_reason'] === 'sender_flagged', 'the listed deposit held');

    const oldest = await newPayout(customerId);
    const newer = await newPayout(customerId);
    const payer = chain.wallet(3);
    gate.hold(payer.address);
    const snapshot = (await chain.provider().send('evm_snapshot', [])) as string;
    const forkBlock = await chain.provider().getBlockNumber();
    const txHash = await transferToken(chain, payer, 'USDC', address, AMOUNT);
    const first = await chain.provider().getTransactionReceipt(txHash);
    const detected = await payoutUntil(
      oldest,
      (p) => p['status'] === 'deposit_detected',
      'the deposit detected',
    );
    expect(detected['deposit']).toMatchObject({
      tx_hash: txHash,
      from: payer.address,
      amount: AMOUNT.toString(),
    });
    // The flow is at the screening before the sweep, and stays there.
    await until(
      async () => gate.holding(payer.address),
      (n) => n > 0,
      'the sweep step held at the screening',
    );

    const lost = await reorgLosing(chain, snapshot, forkBlock, payer.address);
    const retracted = await payoutUntil(
      oldest,
      (p) => p['status'] === 'awaiting_deposit',
      'the deposit retracted',
    );
    expect(retracted).toMatchObject({ deposit: null, forward_tx_hash: null });
    expect(await payout(newer)).toMatchObject({ status: 'awaiting_deposit', deposit: null });

    // The held step goes on now: the payout it was for has no deposit any more, so nothing may leave the address.
    const offRampBefore = await usdc().balanceOf(LOCAL_PAYOUT_OFF_RAMP);
    gate.release(payer.address);
    await e2e.stack.service.app.get(PayoutFlowConsumer).caughtUp();
    expect(await usdc().balanceOf(address)).toBe(AMOUNT);
    expect(await usdc().balanceOf(LOCAL_PAYOUT_OFF_RAMP)).toBe(offRampBefore);
    expect(await payout(oldest)).toMatchObject({ status: 'awaiting_deposit', deposit: null });

    // The same transfer (the payer's mint and transfer, as signed) mined again in a block of the new fork.
    for (const raw of lost) await chain.provider().send('eth_sendRawTransaction', [raw]);
    const again = await chain.provider().getTransactionReceipt(txHash);
    expect(again?.blockHash).not.toBe(first?.blockHash);
    const completed = await payoutUntil(
      oldest,
      (p) => p['status'] === 'completed',
      'the re-funded payout completed',
    );
    expect(completed['deposit']).toMatchObject({ tx_hash: txHash, amount: AMOUNT.toString() });
    const sweep = await chain.provider().getTransactionReceipt(String(completed['forward_tx_hash']));
    expect(sweep?.status).toBe(1);
    // Swept after the deposit it moves arrived on this fork.
    expect(sweep?.blockNumber).toBeGreaterThan(again?.blockNumber ?? Infinity);
    expect(await payout(newer)).toMatchObject({ status: 'awaiting_deposit', deposit: null });
    expect((await usdc().balanceOf(LOCAL_PAYOUT_OFF_RAMP)) - offRampBefore).toBe(AMOUNT);
    expect(await usdc().balanceOf(address)).toBe(AMOUNT);
  }, 180_000);

  it('after the forward: the payout keeps its state and the retraction is counted for the operator', async () => {
    const { customerId, address } = await activeCustomer('Grace Hopper');
    const id = await newPayout(customerId);
    const payer = chain.wallet(4);
    const counted = await retractedAfterForward();
    const snapshot = (await chain.provider().send('evm_snapshot', [])) as string;
    const forkBlock = await chain.provider().getBlockNumber();
    const txHash = await transferToken(chain, payer, 'USDC', address, AMOUNT);
    const completed = await payoutUntil(id, (p) => p['status'] === 'completed', 'the payout completed');
    expect(completed['deposit']).toMatchObject({ tx_hash: txHash });

    await reorgLosing(chain, snapshot, forkBlock, payer.address);
    await until(retractedAfterForward, (n) => n === counted + 1, 'the retraction after the forward counted');
    expect(await payout(id)).toEqual(completed);
  }, 180_000);
});
