import { Wallet } from 'ethers';
import { connectPaymentFactory, connectTestStablecoin } from '@stablepay/contracts';
import { SANDBOX_SANCTIONED_PAYER } from '@stablepay/evm';
import { ManualClock } from '@stablepay/util';
import { type Json } from './test-support/http';
import { newPayment, paymentUntil, transferToken } from './test-support/payments';
import { OnChainStack } from './test-support/stack';
import { readyForSubscriptions } from './test-support/subscriptions';

/**
 * Dust from a sanctioned address sent to a public deposit address before the honest payer pays (so it even counts
 * as the first funding transfer): through HTTP on the embedded stack with a local anvil, real transfers, the
 * sandbox screening (anvil dev account 9 is its sanctions match) and the service's own deploy. Before, every
 * sender of the payment token flagged the whole payment, so anyone holding a sanctioned address could freeze any
 * checkout; now the dust is held in the deposit and the payer's order settles.
 */
const CHAIN = 'eip155:8453';
const USDC = 10n ** 6n;

describe('sanctioned dust sent to a deposit address does not freeze the payer’s payment (embedded stack, anvil)', () => {
  const clock = new ManualClock(new Date());
  const e2e = new OnChainStack(clock);
  const { api, webhooks } = e2e;
  const chain = e2e.chain(CHAIN);
  const settlement = Wallet.createRandom().address;
  const usdc = (holder: string) =>
    connectTestStablecoin(chain.local.addresses.stablecoins.USDC, chain.provider()).balanceOf(holder);

  beforeAll(async () => {
    await e2e.start('8453');
    await readyForSubscriptions(api, undefined, e2e.stack.demoMerchantId, [chain], {
      signer: Wallet.createRandom(),
      pauser: Wallet.createRandom(),
      settlement,
    });
    await e2e.receiveWebhooks();
  }, 180_000);

  afterAll(() => e2e.stop());

  it('DIRECT: the order settles from the payer’s funds, the dust stays held in the deposit (listed as sanctioned, never recovered), nothing is flagged', async () => {
    const attacker = chain.wallet(9);
    expect(attacker.address).toBe(SANDBOX_SANCTIONED_PAYER);
    const payer = chain.wallet(5);
    const p = await newPayment(api, {
      amount: '20000000',
      accepted_chains: [CHAIN],
      accepted_tokens: ['USDC'],
    });
    const id = String(p['id']);
    const deposit = String(p['deposit_address']);

    await transferToken(chain, attacker, 'USDC', deposit, 1n);
    const dusted = await paymentUntil(
      api,
      id,
      (x) => (x['transactions'] as Json[]).length === 1,
      'the dust observed',
    );
    // Mined first, so it was recorded as the payment's first funding transfer.
    expect((dusted['transactions'] as Json[])[0]).toMatchObject({ from: attacker.address, is_funding: true });

    const before = await usdc(settlement);
    await transferToken(chain, payer, 'USDC', deposit, 20n * USDC);
    const settled = await paymentUntil(
      api,
      id,
      (x) => x['status'] === 'settled' || x['status'] === 'flagged',
      'settled (or flagged)',
    );
    expect(settled).toMatchObject({
      status: 'settled',
      amount_paid: '20000000',
      payer_addresses: [payer.address],
      non_funding_transactions_count: 1,
    });
    expect(settled).not.toHaveProperty('recoverable_amount');
    expect((settled['transactions'] as Json[])[0]).toMatchObject({
      from: attacker.address,
      amount: '1',
      is_funding: false,
      non_funding_reason: 'sanctioned',
    });
    // The order, and not one unit more, reached the merchant; the dust is still in the deposit, not flagged on chain.
    expect((await usdc(settlement)) - before).toBe(20n * USDC);
    expect(await usdc(deposit)).toBe(1n);
    const factory = connectPaymentFactory(chain.local.addresses.paymentFactory, chain.provider());
    expect(await factory.isFlagged(deposit)).toBe(false);

    const hook = await webhooks.next('payment.settled', id);
    expect(hook.data['object']).toMatchObject({ status: 'settled', payer_addresses: [payer.address] });
    expect(webhooks.all('payment.flagged', id)).toEqual([]);

    // The payer's own surplus is announced without the dust; recover (the contract returns the whole balance above
    // the escrow) is refused while the dust is there, and nothing is sent.
    await transferToken(chain, payer, 'USDC', deposit, 5n);
    const recoverable = await paymentUntil(
      api,
      id,
      (x) => x['status'] === 'recoverable',
      'the payer’s surplus recoverable',
    );
    expect(recoverable).toMatchObject({ recovery_destination: payer.address, recoverable_amount: '5' });
    const recover = await api('POST', `/payments/${id}/recover`);
    expect(recover.status).toBe(409);
    expect(recover.body['error']).toMatchObject({ code: 'sanctioned_funds_held' });
    expect(await usdc(deposit)).toBe(6n);
  }, 180_000);
});
