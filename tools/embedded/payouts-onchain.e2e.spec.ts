import { EVENT_STORE } from '@stablepay/aggregate';
import { connectTestStablecoin, payoutDepositAddress } from '@stablepay/contracts';
import type { EventStore } from '@stablepay/event-store';
import { SANDBOX_SANCTIONED_PAYER } from '@stablepay/evm';
import { LOCAL_PAYOUT_OFF_RAMP } from '@stablepay/local-chains';
import { runAdminCli } from './admin-cli';
import { adminPost, createMerchant, expectRefusals, type Json } from './test-support/http';
import { transferToken } from './test-support/payments';
import { activeCustomer as activeCustomerOf, newUsdcPayout } from './test-support/payouts';
import { OnChainStack } from './test-support/stack';

const CHAIN = 'eip155:8453';
const ADMIN_TOKEN = 'admin-token-for-withheld-refund-returns-0123';

/**
 * Payouts (beta) on a local chain (docs/payouts.md, "Deposits"): a customer's deposit address is its CREATE2
 * PayoutDeposit clone, watched by the indexer; USDC sent there on chain is detected (payout.deposit_detected with
 * the transaction and sender), swept on chain by the operator to the off-ramp bound into the clone (payout.forwarded
 * with the sweep's transaction) and the payout runs to completed through the sandbox off-ramp.
 */
describe('payouts on chain: a deposit to the customer address funds the payout (anvil)', () => {
  const e2e = new OnChainStack();
  const { api, webhooks } = e2e;
  const chain = e2e.chain(CHAIN);

  beforeAll(async () => {
    await e2e.start('8453', { ADMIN_TOKEN });
    await e2e.receiveWebhooks();
  });

  afterAll(() => e2e.stop());

  const activeCustomer = (name: string) => activeCustomerOf(api, name, 'payouts-onchain@example.com');
  const newPayout = (customerId: string, amount: string) => newUsdcPayout(api, customerId, amount, CHAIN);

  it('USDC sent to the deposit address is detected, swept to the off-ramp on chain, and the payout completes', async () => {
    const { customerId, address, deposit } = await activeCustomer('Ada Lovelace');
    expect(address).toBe(
      payoutDepositAddress({
        factory: chain.local.addresses.payoutDepositFactory,
        offRamp: LOCAL_PAYOUT_OFF_RAMP,
        merchantId: e2e.stack.demoMerchantId,
        customerId,
      }),
    );
    expect(deposit?.['chains']).toEqual(['Base']);
    const id = await newPayout(customerId, '25000000');
    const payer = chain.wallet(1);
    const txHash = await transferToken(chain, payer, 'USDC', address, 25_000_000n);
    const detected = await webhooks.next('payout.deposit_detected', id);
    expect(detected.data['object']).toMatchObject({
      status: 'deposit_detected',
      deposit: { tx_hash: txHash, from: payer.address, amount: '25000000' },
    });
    const forwarded = await webhooks.next('payout.forwarded', id);
    const sweepTx = String((forwarded.data['object'] as Json)['forward_tx_hash']);
    expect(sweepTx).toMatch(/^0x[0-9a-f]{64}$/);
    const receipt = await chain.provider().getTransactionReceipt(sweepTx);
    expect(receipt?.status).toBe(1);
    const completed = await webhooks.next('payout.completed', id);
    expect(completed.data['object']).toMatchObject({
      status: 'completed',
      fiat_amount: '2500',
      forward_tx_hash: sweepTx,
    });
    // The funds moved before the off-ramp was asked to pay out: the off-ramp holds them, the deposit address none.
    const usdc = connectTestStablecoin(chain.local.addresses.stablecoins.USDC, chain.provider());
    expect(await usdc.balanceOf(LOCAL_PAYOUT_OFF_RAMP)).toBe(25_000_000n);
    expect(await usdc.balanceOf(address)).toBe(0n);
  });

  it('USDC minted straight to the deposit address (a bridge, an issuer: the log names no sender) is recorded as minted, its sender the account that sent the minting transaction', async () => {
    const { customerId, address } = await activeCustomer('Mary Somerville');
    const id = await newPayout(customerId, '4000000');
    const minter = chain.wallet(2);
    const usdc = connectTestStablecoin(
      chain.local.addresses.stablecoins.USDC,
      minter.connect(chain.provider()),
    );
    const tx = await usdc.mint(address, 4_000_000n);
    await tx.wait();
    const detected = await webhooks.next('payout.deposit_detected', id);
    // The sender screened (never the zero address), marked minted: a held deposit's refund never goes to it unasked.
    expect(detected.data['object']).toMatchObject({
      deposit: { tx_hash: tx.hash, from: minter.address, minted: true, amount: '4000000' },
    });
    await webhooks.next('payout.completed', id);
  });

  it('a minted deposit whose payout fails at the off-ramp is not refunded to its minting sender: payout.failed and GET show the refund withheld (deposit_minted), the funds with the off-ramp', async () => {
    const { customerId, address } = await activeCustomer('Emmy Noether');
    // Sandbox off-ramp: an amount ending 0666 fails the sell order (rampoff_order_failed) after the sweep.
    const id = await newPayout(customerId, '3000666');
    const minter = chain.wallet(2);
    const usdc = connectTestStablecoin(
      chain.local.addresses.stablecoins.USDC,
      minter.connect(chain.provider()),
    );
    const offRampBefore = await usdc.balanceOf(LOCAL_PAYOUT_OFF_RAMP);
    await (await usdc.mint(address, 3_000_666n)).wait();
    const failed = await webhooks.next('payout.failed', id);
    const failedObject = failed.data['object'] as Json;
    expect(failedObject).toMatchObject({
      status: 'failed',
      failure_reason: 'rampoff_order_failed',
      deposit: { from: minter.address, minted: true },
      refund: null,
      refund_withheld: { reason: 'deposit_minted' },
    });
    const got = await api('GET', `/payouts/${id}`);
    expect(got.body).toMatchObject({
      status: 'failed',
      refund: null,
      refund_withheld: { reason: 'deposit_minted', withheld_at: failedObject['updated_at'] },
    });
    expect(await usdc.balanceOf(LOCAL_PAYOUT_OFF_RAMP)).toBe(offRampBefore + 3_000_666n);
  });

  const admin = adminPost(() => e2e.stack, ADMIN_TOKEN);

  it("the operator records the off-ramp's return of a withheld refund: the payout is refunded, payout.refunded once; bad input, another merchant's payout and a payout without a withheld refund refused, nothing recorded", async () => {
    const { customerId, address } = await activeCustomer('Sofia Kovalevskaya');
    // Sandbox off-ramp: an amount ending 0666 fails the sell order after the sweep.
    const id = await newPayout(customerId, '2000666');
    const usdc = connectTestStablecoin(
      chain.local.addresses.stablecoins.USDC,
      chain.wallet(2).connect(chain.provider()),
    );
    await (await usdc.mint(address, 2_000_666n)).wait();
    await webhooks.next('payout.failed', id);
    const store = e2e.stack.service.app.get<EventStore>(EVENT_STORE);
    const events = async () => (await store.readStream(`payout-${id}`)).map((e) => e.type);
    const before = await events();
    const path = `/merchants/${e2e.stack.demoMerchantId}/payouts/${id}/withheld-refund-returns`;
    const wallet = chain.wallet(3).address;
    const RETURN_TX = `0x${'ab'.repeat(32)}`;
    const other = await createMerchant(e2e.stack, ADMIN_TOKEN, 'Other payouts merchant');
    const waiting = await newPayout(customerId, '1000000');
    const refusals: [string, unknown, number, Json][] = [
      [path, { tx_hash: RETURN_TX }, 400, { param: 'to', code: 'parameter_missing' }],
      [
        path,
        { to: `0x${'0'.repeat(40)}`, tx_hash: RETURN_TX },
        400,
        { param: 'to', code: 'invalid_address' },
      ],
      [path, { to: wallet, tx_hash: '0x1234' }, 400, { param: 'tx_hash', code: 'invalid_tx_hash' }],
      [path, { to: wallet }, 400, { param: 'tx_hash', code: 'parameter_missing' }],
      [
        path,
        { to: wallet, reference: 'r', amount: '1' },
        400,
        { param: 'amount', code: 'unknown_parameter' },
      ],
      [
        `/merchants/${other.id}/payouts/${id}/withheld-refund-returns`,
        { to: wallet, tx_hash: RETURN_TX },
        404,
        { type: 'invalid_request', code: 'resource_missing' },
      ],
      [
        `/merchants/${e2e.stack.demoMerchantId}/payouts/${waiting}/withheld-refund-returns`,
        { to: wallet, tx_hash: RETURN_TX },
        409,
        { code: 'refund_not_withheld' },
      ],
      [
        path,
        { to: SANDBOX_SANCTIONED_PAYER, tx_hash: RETURN_TX },
        422,
        { param: 'to', code: 'destination_flagged' },
      ],
    ];
    await expectRefusals(admin, refusals);
    // A merchant's API key is no operator token.
    expect((await admin(path, { to: wallet, tx_hash: RETURN_TX }, { token: other.apiKey })).status).toBe(401);
    expect(await events()).toEqual(before);

    const body = { to: wallet, tx_hash: RETURN_TX, reference: 'sandbox-refund-1' };
    const recorded = await admin(path, body, { idempotencyKey: 'withheld-return-1' });
    expect(recorded.status).toBe(200);
    expect(recorded.body).toMatchObject({
      id,
      status: 'refunded',
      refund: { to: wallet, amount: '2000666', tx_hash: RETURN_TX },
      refund_withheld: null,
    });
    const refunded = await webhooks.next('payout.refunded', id);
    expect(refunded.data['object']).toMatchObject({
      status: 'refunded',
      refund: { to: wallet, amount: '2000666' },
    });
    // The same Idempotency-Key answers the refunded payout (here through npm run admin); another request is 409:
    // one refund, one webhook.
    const out: string[] = [];
    const cli = await runAdminCli(
      [
        'record-withheld-refund-return',
        '--merchant',
        e2e.stack.demoMerchantId,
        '--payout',
        id,
        '--to',
        wallet,
        '--tx-hash',
        RETURN_TX,
        '--reference',
        'sandbox-refund-1',
        '--idempotency-key',
        'withheld-return-1',
        '--url',
        e2e.stack.url,
      ],
      { ADMIN_TOKEN },
      (s) => out.push(s),
    );
    expect([cli, (JSON.parse(out.join('\n')) as Json)['status']]).toEqual([0, 'refunded']);
    const again = await admin(path, body, { idempotencyKey: 'withheld-return-2' });
    expect([again.status, again.body['error']]).toEqual([
      409,
      expect.objectContaining({ code: 'payout_already_refunded' }),
    ]);
    expect((await events()).filter((t) => t === 'PayoutRefunded.v1')).toHaveLength(1);
    expect((await api('GET', `/payouts/${id}`)).body).toMatchObject({
      status: 'refunded',
      refund_withheld: null,
    });
  });

  it("held funds stay at the customer's address when another of its payouts is swept: a flagged sender's deposit and one no payout waits for", async () => {
    const { customerId, address } = await activeCustomer('Grace Hopper');
    const usdc = connectTestStablecoin(chain.local.addresses.stablecoins.USDC, chain.provider());
    const flaggedPayout = await newPayout(customerId, '10000000');
    // Anvil's dev account 9 is the sandbox screening's sanctioned wallet.
    const flagged = chain.wallet(9);
    expect(flagged.address).toBe(SANDBOX_SANCTIONED_PAYER);
    await transferToken(chain, flagged, 'USDC', address, 10_000_000n);
    const failed = await webhooks.next('payout.failed', flaggedPayout);
    expect(failed.data['object']).toMatchObject({ failure_reason: 'sender_flagged', forward_tx_hash: null });
    // 3 USDC no payout waits for.
    await transferToken(chain, chain.wallet(1), 'USDC', address, 3_000_000n);
    const offRampBefore = await usdc.balanceOf(LOCAL_PAYOUT_OFF_RAMP);

    const paid = await newPayout(customerId, '25000000');
    await transferToken(chain, chain.wallet(1), 'USDC', address, 25_000_000n);
    const forwarded = await webhooks.next('payout.forwarded', paid);
    const sweepTx = String((forwarded.data['object'] as Json)['forward_tx_hash']);
    expect((await chain.provider().getTransactionReceipt(sweepTx))?.status).toBe(1);
    await webhooks.next('payout.completed', paid);
    // Only the paid payout's 25 USDC left: the flagged 10 and the unclaimed 3 are still held at the address.
    expect((await usdc.balanceOf(LOCAL_PAYOUT_OFF_RAMP)) - offRampBefore).toBe(25_000_000n);
    expect(await usdc.balanceOf(address)).toBe(13_000_000n);
  });
});
