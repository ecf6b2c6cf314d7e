import { connectTestStablecoin, payoutDepositAddress } from '@stablepay/contracts';
import { SANDBOX_SANCTIONED_PAYER } from '@stablepay/evm';
import { LOCAL_PAYOUT_OFF_RAMP } from '@stablepay/local-chains';
import type { Json } from './test-support/http';
import { transferToken } from './test-support/payments';
import { activeCustomer as activeCustomerOf, newUsdcPayout } from './test-support/payouts';
import { OnChainStack } from './test-support/stack';

const CHAIN = 'eip155:8453';

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
    await e2e.start('8453');
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
