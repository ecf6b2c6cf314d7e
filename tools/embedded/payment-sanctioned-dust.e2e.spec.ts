import { Wallet } from 'ethers';
import { connectPaymentFactory, connectTestStablecoin } from '@stablepay/contracts';
import { SANDBOX_SANCTIONED_PAYER } from '@stablepay/evm';
import { signRescue } from '@stablepay/merchant-sdk';
import { ManualClock } from '@stablepay/util';
import { type Json } from './test-support/http';
import { newPayment, paymentSigning, paymentUntil, transferToken } from './test-support/payments';
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

describe('dust sent to a deposit address neither freezes nor takes over the payer’s payment (embedded stack, anvil)', () => {
  const clock = new ManualClock(new Date());
  const e2e = new OnChainStack(clock);
  const { api, webhooks } = e2e;
  const chain = e2e.chain(CHAIN);
  const settlement = Wallet.createRandom().address;
  const signer = Wallet.createRandom();
  const usdc = (holder: string) =>
    connectTestStablecoin(chain.local.addresses.stablecoins.USDC, chain.provider()).balanceOf(holder);

  beforeAll(async () => {
    await e2e.start('8453');
    await readyForSubscriptions(api, undefined, e2e.stack.demoMerchantId, [chain], {
      signer,
      pauser: Wallet.createRandom(),
      settlement,
    });
    await e2e.receiveWebhooks();
  }, 180_000);

  afterAll(() => e2e.stop());

  /** A 20 USD DIRECT checkout on the chain in `tokens`: its payment id and deposit address. */
  const checkout = async (tokens: string[]) => {
    const p = await newPayment(api, {
      amount: '20000000',
      accepted_chains: [CHAIN],
      accepted_tokens: tokens,
    });
    return { id: String(p['id']), deposit: String(p['deposit_address']) };
  };

  it('DIRECT: the order settles from the payer’s funds, the dust stays held in the deposit (listed as sanctioned, never recovered), nothing is flagged', async () => {
    const attacker = chain.wallet(9);
    expect(attacker.address).toBe(SANDBOX_SANCTIONED_PAYER);
    const payer = chain.wallet(5);
    const { id, deposit } = await checkout(['USDC']);

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

  it('dust sent first by anyone, in another accepted token and in the payment token, names neither the token nor the payer: the order settles in the payer’s token, attested to the payer', async () => {
    const duster = chain.wallet(6);
    const payer = chain.wallet(5);
    const { id, deposit } = await checkout(['USDC', 'USDT']);

    await transferToken(chain, duster, 'USDT', deposit, 1n);
    await transferToken(chain, duster, 'USDC', deposit, 1n);
    await paymentUntil(api, id, (x) => (x['transactions'] as Json[]).length === 2, 'the dust observed');

    const before = await usdc(settlement);
    await transferToken(chain, payer, 'USDC', deposit, 20n * USDC);
    const observed = await paymentUntil(
      api,
      id,
      (x) => (x['transactions'] as Json[]).length === 3,
      'the payer’s transfer observed',
    );
    // Before, the USDT dust fixed the payment's token: this transfer was wrong_token and the order expired unpaid.
    expect((observed['transactions'] as Json[])[2]).toMatchObject({ from: payer.address, is_funding: true });
    expect(observed).toMatchObject({ detected_token_symbol: 'USDC', amount_paid: '20000001' });
    const settled = await paymentUntil(
      api,
      id,
      (x) => typeof x['recovery_destination'] === 'string',
      'settled, the dust over the order announced',
    );
    expect(settled).toMatchObject({
      status: 'recoverable',
      detected_token_symbol: 'USDC',
      amount_paid: '20000001',
      payer_addresses: [payer.address, duster.address],
      // The deploy attested the sender of the larger part: refunds and recover go to the payer, not the duster.
      recovery_destination: payer.address,
      recoverable_amount: '1',
    });
    expect(
      (settled['transactions'] as Json[]).map((t) => [t['from'], t['is_funding'], t['non_funding_reason']]),
    ).toEqual([
      [duster.address, false, 'wrong_token'],
      [duster.address, true, null],
      [payer.address, true, null],
    ]);
    expect((await usdc(settlement)) - before).toBe(20n * USDC);
  }, 180_000);

  it('a sanctioned sender after the deploy, in the payment token and in another one, is screened and held: not the payer’s surplus (nothing to recover), and rescue refuses its USDT (409 sanctioned_funds_held)', async () => {
    const attacker = chain.wallet(9);
    const payer = chain.wallet(5);
    const { id, deposit } = await checkout(['USDC']);
    await transferToken(chain, payer, 'USDC', deposit, 20n * USDC);
    const settled = await paymentUntil(api, id, (x) => x['status'] === 'settled', 'settled');

    await transferToken(chain, attacker, 'USDC', deposit, 3n);
    await transferToken(chain, attacker, 'USDT', deposit, 2n);
    // Before, never screened: the USDC became the payer's surplus (recover sent it to the payer) and the merchant
    // could rescue the USDT anywhere.
    const held = await paymentUntil(
      api,
      id,
      (x) =>
        (x['transactions'] as Json[]).filter((t) => t['non_funding_reason'] === 'sanctioned').length === 2,
      'the late senders screened and held',
    );
    expect(held).toMatchObject({ status: 'settled', payer_addresses: [payer.address] });
    expect(held).not.toHaveProperty('recoverable_amount');
    expect(webhooks.all('payment.flagged', id)).toEqual([]);
    expect(webhooks.all('payment.recoverable', id)).toEqual([]);
    const recover = await api('POST', `/payments/${id}/recover`);
    expect(recover.status).toBe(409);
    expect(recover.body['error']).toMatchObject({ code: 'nothing_to_recover' });

    const s = await paymentSigning(chain, e2e.stack.demoMerchantId, settled);
    const usdt = chain.local.addresses.stablecoins.USDT;
    const { signature } = await signRescue(signer, s.domain, {
      paymentId: s.paymentId,
      token: usdt,
      to: attacker.address,
      amount: 2n,
      epoch: s.epoch,
      deadline: s.deadline,
    });
    const rescue = await api('POST', `/payments/${id}/rescue`, {
      token: `${CHAIN}/erc20:${usdt}`,
      to: attacker.address,
      amount: '2',
      deadline: s.deadline.toString(),
      signature,
    });
    expect(rescue.status).toBe(409);
    expect(rescue.body['error']).toMatchObject({ code: 'sanctioned_funds_held' });
    expect(await usdc(deposit)).toBe(3n);
    expect(await connectTestStablecoin(usdt, chain.provider()).balanceOf(deposit)).toBe(2n);
  }, 180_000);
});
