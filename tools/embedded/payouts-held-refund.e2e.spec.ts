import { Wallet, id } from 'ethers';
import {
  connectStablepayRegistry,
  connectTestStablecoin,
  payoutDepositAddress,
  toOnChainId,
} from '@stablepay/contracts';
import { SANDBOX_SANCTIONED_PAYER } from '@stablepay/evm';
import { LOCAL_PAYOUT_OFF_RAMP } from '@stablepay/local-chains';
import { signPayoutRefund } from '@stablepay/merchant-sdk';
import { PayoutsAggregates } from '@stablepay/payouts-service';
import { register } from 'prom-client';
import { type Json, until } from './test-support/http';
import { transferToken } from './test-support/payments';
import { activeCustomer as activeCustomerOf, newUsdcPayout } from './test-support/payouts';
import { OnChainStack } from './test-support/stack';

const CHAIN = 'eip155:8453';
const USDC = 1_000_000n;

/**
 * The PayoutDepositFactory addresses of the two earlier factory bytecodes on the local chains' roles (the registry
 * 0x7F6b...33D7 of anvil dev keys 8/0/1): bd7fa6d's (the sweep moved the whole balance) and ddabeff's (the bounded
 * sweep, with the unbounded refund). Computed offline with `deterministicAddress(<that commit's
 * payoutDepositFactoryInitCode>(registry))`; customers created under them keep these factories' addresses.
 */
const EARLIER_FACTORIES = {
  bd7fa6d: '0xb495f922fdc0a3B84d3a7a2c10FD11e41576AD5c',
  ddabeff: '0x0C9e6dCDAF620ae3204f573FF31696F339f87895',
} as const;

/**
 * Held funds on a local chain (docs/payouts.md, "Held funds"): a payout that failed before its sweep keeps its
 * deposit at the customer's address. A `customer_not_active` one goes back to the wallet it came from with the
 * merchant's signed PayoutRefund (POST /payouts/:id/refund_held): exactly its deposit, once, the rest of the address
 * untouched. A payout whose address an earlier factory made (a customer created before the factory changed) is not
 * swept forever: it fails `deposit_address_retired`, and such a customer takes no new payout.
 */
describe('payouts on chain: held funds and retired deposit addresses (anvil)', () => {
  const e2e = new OnChainStack();
  const { api, webhooks } = e2e;
  const chain = e2e.chain(CHAIN);
  const merchantSigner = new Wallet(id('payouts-held-refund e2e merchant signer'));
  const usdc = () => connectTestStablecoin(chain.local.addresses.stablecoins.USDC, chain.provider());
  const aggregates = () => e2e.stack.service.app.get(PayoutsAggregates);
  const owner = () => ({ merchantId: e2e.stack.demoMerchantId, mode: 'test' as const });

  beforeAll(async () => {
    await e2e.start('8453');
    await e2e.receiveWebhooks();
    const settings = await api('POST', '/settings', {
      merchant_signer: merchantSigner.address,
      settlement_address: chain.wallet(3).address,
    });
    expect(settings.status).toBe(200);
    await until(
      () =>
        connectStablepayRegistry(chain.local.addresses.registry, chain.provider()).merchantAuth(
          toOnChainId(e2e.stack.demoMerchantId),
        ),
      (auth) => auth.signer === merchantSigner.address,
      'the merchant registered on chain',
    );
  }, 240_000);

  afterAll(() => e2e.stop());

  const refundHeld = async (payoutId: string, body: unknown, idempotencyKey?: string) => {
    const res = await fetch(`${e2e.stack.url}/payouts/${payoutId}/refund_held`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${e2e.stack.demoApiKey}`,
        'content-type': 'application/json',
        ...(idempotencyKey ? { 'idempotency-key': idempotencyKey } : {}),
      },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Json };
  };

  /** The merchant signer's PayoutRefund of the payout's deposit to its sender, or to `to` (what the SDK's caller signs). */
  const signedRefund = async (payout: Json, signer: Wallet = merchantSigner, to?: string) => {
    const deposit = payout['deposit'] as Json;
    const deadline = (await chain.now()) + 3_600n;
    const epoch = await connectStablepayRegistry(
      chain.local.addresses.registry,
      chain.provider(),
    ).merchantEpoch(toOnChainId(e2e.stack.demoMerchantId));
    const { signature } = await signPayoutRefund(
      signer,
      { chain: CHAIN, verifyingContract: String(payout['deposit_address']) },
      {
        payoutId: String(payout['id']),
        token: String(payout['asset']),
        to: to ?? String(deposit['from']),
        amount: String(deposit['amount']),
        epoch,
        deadline,
      },
    );
    return { deadline: deadline.toString(), signature };
  };

  const expectCannotProcess = (res: { status: number; body: Json }, code: string, param: string) => {
    expect(res.status).toBe(422);
    expect(res.body['error']).toMatchObject({ type: 'cannot_process', code, param });
  };

  /** A customer with a 9 USDC payout, suspended once the payout exists. */
  const suspendedWithPayout = async (name: string, email: string) => {
    const { customerId, address } = await activeCustomerOf(api, name, email);
    const payoutId = await newUsdcPayout(api, customerId, '9000000', CHAIN);
    await aggregates().customer(customerId, owner(), {
      type: 'SuspendCustomer',
      reason: 'compliance_review',
      now: new Date(),
    });
    await until(
      () => api('GET', `/customers/${customerId}`),
      (r) => r.body['status'] === 'suspended',
      'customer suspended',
    );
    return { address, payoutId };
  };

  it("returns a suspended customer's held deposit to its sender, once, with the merchant's signature; the address keeps the rest", async () => {
    // The transfer below is offered to no payout (held), and the deposit recorded as if the intake had taken it just
    // before the suspension showed fails customer_not_active, never swept.
    const { address, payoutId } = await suspendedWithPayout('Held Refund', 'held@example.com');
    const payer = chain.wallet(1);
    const txHash = await transferToken(chain, payer, 'USDC', address, 9n * USDC);
    // 3 USDC no payout waits for: the refund must leave them.
    await transferToken(chain, chain.wallet(2), 'USDC', address, 3n * USDC);
    await aggregates().payout(payoutId, owner(), {
      type: 'RecordDeposit',
      txHash,
      from: payer.address,
      amount: '9000000',
      now: new Date(),
    });
    const failed = (await webhooks.next('payout.failed', payoutId)).data['object'] as Json;
    expect(failed).toMatchObject({ status: 'failed', failure_reason: 'customer_not_active', refund: null });
    expect(await usdc().balanceOf(address)).toBe(12n * USDC);

    // Another key's signature: refused on chain in simulation, nothing changes.
    const forged = await refundHeld(payoutId, await signedRefund(failed, new Wallet(id('not the signer'))));
    expectCannotProcess(forged, 'invalid_signature', 'signature');
    expect(await usdc().balanceOf(address)).toBe(12n * USDC);
    // A malformed body is 400 before anything is read on chain.
    const malformed = await refundHeld(payoutId, { deadline: 'soon', signature: '0x12' });
    expect([malformed.status, (malformed.body['error'] as Json)['param']]).toEqual([400, 'deadline']);

    const before = await usdc().balanceOf(payer.address);
    const body = await signedRefund(failed);
    const refunded = await refundHeld(payoutId, body, `refund-${payoutId}`);
    expect(refunded.status).toBe(200);
    expect(refunded.body).toMatchObject({
      id: payoutId,
      status: 'refunded',
      failure_reason: 'customer_not_active',
      refund: { to: payer.address, amount: '9000000' },
    });
    expect(refunded.body['asset']).toBe(`${CHAIN}/erc20:${chain.local.addresses.stablecoins.USDC}`);
    const refundTx = String((refunded.body['refund'] as Json)['tx_hash']);
    expect((await chain.provider().getTransactionReceipt(refundTx))?.status).toBe(1);
    expect((await usdc().balanceOf(payer.address)) - before).toBe(9n * USDC);
    expect(await usdc().balanceOf(address)).toBe(3n * USDC);
    const event = (await webhooks.next('payout.refunded', payoutId)).data['object'] as Json;
    expect(event).toMatchObject({ status: 'refunded', refund: { tx_hash: refundTx, to: payer.address } });

    // The same request again (its Idempotency-Key) answers the refund; another request is 409, and nothing moves.
    const replay = await refundHeld(payoutId, body, `refund-${payoutId}`);
    expect([replay.status, (replay.body['refund'] as Json)['tx_hash']]).toEqual([200, refundTx]);
    const again = await refundHeld(payoutId, await signedRefund(failed));
    expect([again.status, (again.body['error'] as Json)['code']]).toEqual([409, 'payout_already_refunded']);
    expect(await usdc().balanceOf(address)).toBe(3n * USDC);
    expect(webhooks.all('payout.refunded', payoutId)).toHaveLength(1);
  });

  it("a held deposit minted to the address by a bridge's relayer is never returned to the relayer: refused without a signed destination (422 refund_destination_required), then sent where the merchant signed", async () => {
    const { address, payoutId } = await suspendedWithPayout('Bridged Held', 'bridged-held@example.com');
    // A relayer account (not the customer's) sends the mint, as CCTP's receiveMessage is sent by whoever relays.
    const relayer = chain.wallet(2);
    const mint = await connectTestStablecoin(
      chain.local.addresses.stablecoins.USDC,
      relayer.connect(chain.provider()),
    ).mint(address, 9n * USDC);
    await mint.wait();
    // Recorded as the intake records a mint (payouts-onchain.e2e shows it does): its sender the relayer, minted.
    await aggregates().payout(payoutId, owner(), {
      type: 'RecordDeposit',
      txHash: mint.hash,
      from: relayer.address,
      amount: '9000000',
      minted: true,
      now: new Date(),
    });
    const failed = (await webhooks.next('payout.failed', payoutId)).data['object'] as Json;
    expect(failed).toMatchObject({ deposit: { from: relayer.address, minted: true } });
    const relayerBefore = await usdc().balanceOf(relayer.address);

    const refused = await refundHeld(payoutId, await signedRefund(failed));
    expectCannotProcess(refused, 'refund_destination_required', 'to');
    expect(await usdc().balanceOf(address)).toBe(9n * USDC);

    const customerWallet = Wallet.createRandom().address;
    const body = { ...(await signedRefund(failed, merchantSigner, customerWallet)), to: customerWallet };
    const refunded = await refundHeld(payoutId, body);
    expect(refunded.status).toBe(200);
    expect(refunded.body).toMatchObject({
      status: 'refunded',
      refund: { to: customerWallet, amount: '9000000' },
    });
    expect(await usdc().balanceOf(customerWallet)).toBe(9n * USDC);
    expect(await usdc().balanceOf(relayer.address)).toBe(relayerBefore);
    expect(await usdc().balanceOf(address)).toBe(0n);
  });

  it('a held deposit the chain no longer has (a reorg the indexer has not reported yet) is not returned from the other funds at the address (409 deposit_retracted)', async () => {
    const { address, payoutId } = await suspendedWithPayout('Held Reorged', 'reorged@example.com');
    // Another deposit held at the shared address (no payout takes it while the customer is suspended).
    await transferToken(chain, chain.wallet(2), 'USDC', address, 9n * USDC);
    // The payout's deposit as the intake recorded it, its transaction since taken away by a reorg.
    const payer = chain.wallet(1);
    await aggregates().payout(payoutId, owner(), {
      type: 'RecordDeposit',
      txHash: `0x${'ab'.repeat(32)}`,
      from: payer.address,
      amount: '9000000',
      now: new Date(),
    });
    const failed = (await webhooks.next('payout.failed', payoutId)).data['object'] as Json;
    expect(failed).toMatchObject({ failure_reason: 'customer_not_active' });
    const before = await usdc().balanceOf(payer.address);

    const res = await refundHeld(payoutId, await signedRefund(failed));
    expect([res.status, (res.body['error'] as Json)['code']]).toEqual([409, 'deposit_retracted']);
    expect(await usdc().balanceOf(address)).toBe(9n * USDC);
    expect(await usdc().balanceOf(payer.address)).toBe(before);
    expect((await api('GET', `/payouts/${payoutId}`)).body['status']).toBe('failed');
  });

  it("a flagged sender's held deposit is never returned (422 sender_flagged), and nothing moves", async () => {
    const { customerId, address } = await activeCustomerOf(api, 'Held Flagged', 'flagged@example.com');
    const payoutId = await newUsdcPayout(api, customerId, '4000000', CHAIN);
    const flagged = chain.wallet(9);
    expect(flagged.address).toBe(SANDBOX_SANCTIONED_PAYER);
    await transferToken(chain, flagged, 'USDC', address, 4n * USDC);
    const failed = (await webhooks.next('payout.failed', payoutId)).data['object'] as Json;
    expect(failed).toMatchObject({ failure_reason: 'sender_flagged' });
    const res = await refundHeld(payoutId, await signedRefund(failed));
    expect([res.status, (res.body['error'] as Json)['code']]).toEqual([422, 'sender_flagged']);
    expect(await usdc().balanceOf(address)).toBe(4n * USDC);
    expect((await api('GET', `/payouts/${payoutId}`)).body['status']).toBe('failed');
  });

  it.each(Object.entries(EARLIER_FACTORIES))(
    "a customer of the earlier factory %s: its payout's deposit fails deposit_address_retired (no sweep retried), and it takes no new payout",
    async (commit, factory) => {
      expect(factory).not.toBe(chain.local.addresses.payoutDepositFactory);
      const merchantId = e2e.stack.demoMerchantId;
      const customerId = `cus_${commit}retired00000000000000`.slice(0, 30);
      const oldAddress = payoutDepositAddress({
        factory,
        offRamp: LOCAL_PAYOUT_OFF_RAMP,
        merchantId,
        customerId,
      });
      // The customer as that deployment created it: its creation fact holds the earlier factory's address.
      await aggregates().customer(customerId, owner(), {
        type: 'CreateCustomer',
        id: customerId,
        input: { name: `Retired ${commit}`, email: 'retired@example.com' },
        depositAddresses: [{ address: oldAddress, chains: ['Base'], tokens: ['USDC', 'USDT'] }],
        kycSessionId: `kycs_${commit}retired000000000000000`.slice(0, 31),
        hostedUrl: `${e2e.stack.url}/hosted`,
        now: new Date(),
      });
      const customer = await until(
        () => api('GET', `/customers/${customerId}`),
        (r) => r.status === 200,
        'the customer projected',
      );
      const kyc = await fetch(String(customer.body['kyc_url']), {
        method: 'POST',
        redirect: 'manual',
        body: '',
      });
      expect(kyc.status).toBe(303);
      const beneficiary = await api('POST', '/beneficiaries', {
        holder_name: 'Ada Lovelace',
        country: 'US',
        currency: 'USD',
        account_number: '000123456789',
        routing_number: '110000000',
      });
      const create = {
        customer: customerId,
        beneficiary: beneficiary.body['id'],
        amount: '4000000',
        chain: CHAIN,
        token: 'USDC',
      };
      const refused = await api('POST', '/payouts', create);
      expect(refused.status).toBe(422);
      expect(refused.body['error']).toMatchObject({
        type: 'cannot_process',
        code: 'deposit_address_retired',
        param: 'customer',
      });

      // A payout created before the factory changed, waiting for its deposit at the earlier address.
      const payoutId = `po_${commit}retired0000000000000000`.slice(0, 29);
      await aggregates().payout(payoutId, owner(), {
        type: 'CreatePayout',
        id: payoutId,
        input: create,
        context: {
          customer: { id: customerId, status: 'active', depositAddress: oldAddress },
          beneficiary: { id: String(beneficiary.body['id']), currency: 'USD' },
          tokens: [
            {
              chain: CHAIN,
              symbol: 'USDC',
              asset: `${CHAIN}/erc20:${chain.local.addresses.stablecoins.USDC}`,
              decimals: 6,
            },
          ],
        },
        now: new Date(),
      });
      const sweepFailures = await failedSweeps();
      await transferToken(chain, chain.wallet(1), 'USDC', oldAddress, 4n * USDC);
      await webhooks.next('payout.deposit_detected', payoutId);
      const failed = (await webhooks.next('payout.failed', payoutId)).data['object'] as Json;
      expect(failed).toMatchObject({
        status: 'failed',
        failure_reason: 'deposit_address_retired',
        forward_tx_hash: null,
        refund: null,
      });
      expect(webhooks.all('payout.forwarded', payoutId)).toEqual([]);
      expect(await failedSweeps()).toBe(sweepFailures);
      expect(await usdc().balanceOf(oldAddress)).toBe(4n * USDC);
      // Held for the operator: neither the off-ramp nor the merchant's refund moves it from here.
      const res = await refundHeld(payoutId, await signedRefund(failed));
      expect([res.status, (res.body['error'] as Json)['code']]).toEqual([409, 'deposit_address_retired']);
      expect(await usdc().balanceOf(oldAddress)).toBe(4n * USDC);
    },
  );
});

async function failedSweeps(): Promise<number> {
  const metric = await register.getSingleMetric('stablepay_payout_sweeps_total')?.get();
  return (metric?.values ?? [])
    .filter((v) => v.labels['outcome'] === 'failed')
    .reduce((sum, v) => sum + v.value, 0);
}
