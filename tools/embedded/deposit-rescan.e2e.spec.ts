import { Wallet, id } from 'ethers';
import { DataSource } from 'typeorm';
import { EVENT_STORE } from '@stablepay/aggregate';
import { connectPaymentDeposit } from '@stablepay/contracts';
import type { EventStore } from '@stablepay/event-store';
import { IndexerWatchList } from '@stablepay/indexer-service';
import { signCapture } from '@stablepay/merchant-sdk';
import { DepositFlow, paymentStreamId } from '@stablepay/payments-service';
import { PayoutChainDeposits, PayoutFlowConsumer } from '@stablepay/payouts-service';
import { runAdminCli } from './admin-cli';
import { adminPost, createMerchant, expectRefusals, type Json, until } from './test-support/http';
import {
  merchantRegistered,
  newPayment,
  paymentSigning,
  paymentUntil,
  transferToken,
} from './test-support/payments';
import { activeCustomer, newUsdcPayout } from './test-support/payouts';
import { OnChainStack } from './test-support/stack';

const CHAIN = 'eip155:8453';
const ADMIN_TOKEN = 'admin-token-for-deposit-rescans-0123456789';
const ORDER = '10000000';
const merchantSigner = new Wallet(id('deposit-rescan e2e merchant signer'));

/**
 * The operator's re-scan of a deposit address (docs/chain-operator.md, "Re-scanning a deposit address"), through
 * HTTP on the embedded stack with a local anvil. A deposit watch registered the way it was before 0fba65e / 6eefdeb
 * (from the indexer's checkpoint, after the customer had already paid) never sees the transfer: the payment stays
 * pending, the payout awaits its deposit. The re-scan from the block before the object's creation feeds it through
 * the indexer and the usual consumers; a second re-scan changes nothing.
 */
describe('re-scanning a deposit address (operator API, anvil)', () => {
  const e2e = new OnChainStack();
  const { api } = e2e;
  const chain = e2e.chain(CHAIN);

  beforeAll(async () => {
    // A reorg window of 2 blocks: by the second re-scan the indexer has forgotten that it published the transfer, so
    // it publishes it again, and the consumers must take it once.
    await e2e.start('8453', { ADMIN_TOKEN, INDEXER_REORG_WINDOW: '2' });
    const settings = await api('POST', '/settings', {
      merchant_signer: merchantSigner.address,
      settlement_address: Wallet.createRandom().address,
    });
    if (settings.status !== 200) throw new Error(JSON.stringify(settings.body));
    // Escrows are deployed, and captures verified, against the registry's record of the merchant.
    await merchantRegistered(chain, e2e.stack.demoMerchantId, merchantSigner.address);
    // The stack's start (PGlite migrations in-process) and the registration's transaction on a loaded machine.
  }, 240_000);

  afterAll(() => e2e.stop());

  const app = () => e2e.stack.service.app;
  const db = () => app().get(DataSource);
  const admin = adminPost(() => e2e.stack, ADMIN_TOKEN);
  const merchant = () => e2e.stack.demoMerchantId;

  const watch = async (address: string) => {
    const rows = (await db().query(
      'SELECT scanned_through::text AS scanned_through FROM indexer_watched_addresses WHERE chain = $1 AND address = $2',
      [CHAIN, address.toLowerCase()],
    )) as { scanned_through: string | null }[];
    return rows[0];
  };

  /**
   * The indexer has scanned every watch past the chain's current head and published all of it, and the deposit
   * consumers have taken all of it: what is not on the object by then was not found.
   */
  const indexed = async (): Promise<void> => {
    const head = await chain.provider().getBlockNumber();
    await chain.mine(2);
    await until(
      async () =>
        (await db().query(
          `SELECT (SELECT block_number FROM indexer_checkpoints WHERE chain = $1)::text AS checkpoint,
                  (SELECT count(*) FROM indexer_outbox WHERE chain = $1)::int AS outbox,
                  (SELECT count(*) FROM indexer_watched_addresses WHERE chain = $1 AND scanned_through IS NOT NULL)::int AS lagging`,
          [CHAIN],
        )) as { checkpoint: string; outbox: number; lagging: number }[],
      ([s]) => s !== undefined && Number(s.checkpoint) > head && s.outbox === 0 && s.lagging === 0,
      'the indexer past the head with nothing left to publish',
    );
    await app().get(DepositFlow).caughtUp();
    await app().get(PayoutChainDeposits).caughtUp();
    await app().get(PayoutFlowConsumer).caughtUp();
  };

  /**
   * The watch as it was registered before the fix: the consumer's registration comes after the transfer is mined and
   * scanned, and starts at the indexer's checkpoint. Its row is taken away while the transfer is mined and indexed,
   * then added without a first block, as the old consumer did.
   */
  const payBeforeTheWatch = async (address: string, amount: bigint): Promise<string> => {
    await until(
      () => watch(address),
      (w) => w?.scanned_through === null,
      'the deposit address watched',
    );
    await db().query('DELETE FROM indexer_watched_addresses WHERE chain = $1 AND address = $2', [
      CHAIN,
      address.toLowerCase(),
    ]);
    const txHash = await transferToken(chain, chain.wallet(1), 'USDC', address, amount);
    await indexed();
    await app().get(IndexerWatchList).watchDepositAddress(CHAIN, address);
    await indexed();
    return txHash;
  };

  const streamLength = async (streamId: string) =>
    (await app().get<EventStore>(EVENT_STORE).readStream(streamId)).length;
  /** The indexer's observations of one transaction on the chain's stream. */
  const published = async (txHash: string) =>
    (await app().get<EventStore>(EVENT_STORE).readStream(`chain-${CHAIN}`)).filter(
      (e) => e.type === 'Erc20TransferObserved.v1' && (e.data as Json)['txHash'] === txHash,
    ).length;

  it("a payment's transfer mined before its watch started is seen after the re-scan, once", async () => {
    const p = await newPayment(api, { amount: ORDER, accepted_chains: [CHAIN], accepted_tokens: ['USDC'] });
    const paymentId = String(p['id']);
    const address = String(p['deposit_address']);
    const txHash = await payBeforeTheWatch(address, BigInt(ORDER));
    const missed = (await api('GET', `/payments/${paymentId}`)).body;
    expect(missed['transactions']).toEqual([]);
    expect(missed['status']).toBe('pending');
    const transferBlock = (await chain.provider().getTransactionReceipt(txHash))?.blockNumber ?? 0;

    const rescan = await admin(`/merchants/${merchant()}/payments/${paymentId}/deposit-rescans`);
    expect(rescan.status).toBe(200);
    expect(rescan.body).toMatchObject({
      object: 'deposit_rescan',
      merchant_id: merchant(),
      payment_id: paymentId,
      rescans: [{ address, chain: CHAIN, was_watched: true }],
    });
    const [first] = rescan.body['rescans'] as Json[];
    expect(Number(first?.['from_block'])).toBeLessThanOrEqual(transferBlock);

    const seen = await paymentUntil(
      api,
      paymentId,
      (x) => (x['transactions'] as Json[]).length > 0,
      'the transfer found by the re-scan',
    );
    expect(seen['transactions']).toEqual([expect.objectContaining({ tx_hash: txHash, amount: ORDER })]);
    await indexed();
    const events = await streamLength(paymentStreamId(paymentId));
    const before = (await api('GET', `/payments/${paymentId}`)).body;

    // The second through the operator CLI (npm run admin -- rescan-deposit).
    const out: string[] = [];
    const code = await runAdminCli(
      [
        'rescan-deposit',
        '--merchant',
        merchant(),
        '--payment',
        paymentId,
        '--chain',
        CHAIN,
        '--from-block',
        String(first?.['from_block']),
        '--url',
        e2e.stack.url,
      ],
      { ADMIN_TOKEN },
      (s) => out.push(s),
    );
    expect(code).toBe(0);
    expect(JSON.parse(out.join('\n'))).toMatchObject({ payment_id: paymentId, rescans: [first] });
    await indexed();
    // Published again (the indexer no longer remembers it), under the re-scan's own event id; taken once.
    expect(await published(txHash)).toBe(2);
    expect(await streamLength(paymentStreamId(paymentId))).toBe(events);
    expect((await api('GET', `/payments/${paymentId}`)).body).toEqual(before);
  });

  it("a customer's deposit mined before its watch started funds the payout after the re-scan, once", async () => {
    const { customerId, address } = await activeCustomer(api, 'Ada Lovelace', 'rescan@example.com');
    const payoutId = await newUsdcPayout(api, customerId, '5000000', CHAIN);
    const txHash = await payBeforeTheWatch(address, 5_000_000n);
    expect((await api('GET', `/payouts/${payoutId}`)).body['status']).toBe('awaiting_deposit');

    const rescan = await admin(`/merchants/${merchant()}/customers/${customerId}/deposit-rescans`);
    expect(rescan.status).toBe(200);
    expect(rescan.body).toMatchObject({
      object: 'deposit_rescan',
      customer_id: customerId,
      rescans: [{ address, chain: CHAIN, was_watched: true }],
    });
    const detected = await until(
      async () => (await api('GET', `/payouts/${payoutId}`)).body,
      (x) => x['status'] !== 'awaiting_deposit',
      'the deposit found by the re-scan',
    );
    expect(detected['deposit']).toMatchObject({ tx_hash: txHash, amount: '5000000' });
    expect(await published(txHash)).toBe(1);
    await until(
      async () => (await api('GET', `/payouts/${payoutId}`)).body,
      (x) => x['status'] === 'completed',
      'the payout completed',
    );
    await indexed();
    const events = await streamLength(`customer-${customerId}`);
    const payoutEvents = await streamLength(`payout-${payoutId}`);

    expect((await admin(`/merchants/${merchant()}/customers/${customerId}/deposit-rescans`)).status).toBe(
      200,
    );
    await indexed();
    expect(await published(txHash)).toBe(2);
    expect(await streamLength(`customer-${customerId}`)).toBe(events);
    expect(await streamLength(`payout-${payoutId}`)).toBe(payoutEvents);
  });

  it("a capture out of a payment's deposit that the indexer missed is recorded by the re-scan, once", async () => {
    const p = await newPayment(api, {
      amount: ORDER,
      method: 'TWO_STEP',
      accepted_chains: [CHAIN],
      accepted_tokens: ['USDC'],
    });
    const paymentId = String(p['id']);
    const address = String(p['deposit_address']);
    await transferToken(chain, chain.wallet(1), 'USDC', address, BigInt(ORDER));
    const escrowed = await paymentUntil(
      api,
      paymentId,
      (x) => x['status'] === 'escrow_confirmed',
      'the escrow deployed by the payment flow',
    );
    // The indexer stops following the deposit contract (as during an outage its watch never covered, or an RPC gap):
    // a capture submitted by a third party with the merchant's signature moves the escrow out unseen.
    await until(
      async () =>
        (await db().query('SELECT 1 FROM indexer_watched_contracts WHERE chain = $1 AND address = $2', [
          CHAIN,
          address.toLowerCase(),
        ])) as unknown[],
      (rows) => rows.length === 1,
      'the deposit contract watched',
    );
    await db().query('DELETE FROM indexer_watched_contracts WHERE chain = $1 AND address = $2', [
      CHAIN,
      address.toLowerCase(),
    ]);
    const signing = await paymentSigning(chain, merchant(), escrowed);
    const { deadline } = signing;
    const { signature } = await signCapture(merchantSigner, signing.domain, {
      ...signing,
      amount: BigInt(ORDER),
    });
    const usdc = chain.local.addresses.stablecoins.USDC;
    const captured = await (
      await connectPaymentDeposit(address, chain.wallet(6)).capture(usdc, BigInt(ORDER), deadline, signature)
    ).wait();
    if (!captured) throw new Error('the capture was not mined');
    await indexed();
    expect((await api('GET', `/payments/${paymentId}`)).body).toMatchObject({
      status: 'escrow_confirmed',
      amount_captured: '0',
    });

    const rescan = await admin(`/merchants/${merchant()}/payments/${paymentId}/deposit-rescans`, {
      chain: CHAIN,
    });
    expect(rescan.status).toBe(200);
    const log = captured.logs.find((l) => l.address.toLowerCase() === address.toLowerCase());
    const found = {
      tx_hash: captured.hash.toLowerCase(),
      log_index: log?.index,
      block_number: captured.blockNumber,
      block_hash: captured.blockHash.toLowerCase(),
      kind: 'captured',
      amount: ORDER,
    };
    expect(rescan.body['rescans']).toEqual([
      expect.objectContaining({
        address,
        chain: CHAIN,
        outflows: [expect.objectContaining({ ...found, status: 'queued' })],
      }),
    ]);
    const settled = await paymentUntil(
      api,
      paymentId,
      (x) => x['status'] === 'settled',
      'the capture found by the re-scan recorded',
    );
    expect(settled['amount_captured']).toBe(ORDER);
    const facts = async () =>
      (await app().get<EventStore>(EVENT_STORE).readStream(paymentStreamId(paymentId))).map((e) => e.type);
    await until(
      facts,
      (types) => types.includes('PaymentCaptureConfirmed.v1'),
      'the capture confirmed at the chain confirmations',
    );
    expect((await facts()).filter((t) => t === 'PaymentCaptured.v1')).toHaveLength(1);
    const events = await streamLength(paymentStreamId(paymentId));

    // Again: the payment holds it; nothing recorded twice.
    const again = await admin(`/merchants/${merchant()}/payments/${paymentId}/deposit-rescans`, {
      chain: CHAIN,
    });
    expect(again.body['rescans']).toEqual([
      expect.objectContaining({
        outflows: [expect.objectContaining({ ...found, status: 'already_recorded' })],
      }),
    ]);
    await indexed();
    expect(await streamLength(paymentStreamId(paymentId))).toBe(events);
    expect((await api('GET', `/payments/${paymentId}`)).body).toMatchObject({
      status: 'settled',
      amount_captured: ORDER,
    });
  });

  it('refuses what it cannot do, with the error envelope, and scans nothing', async () => {
    const p = await newPayment(api, { amount: ORDER, accepted_chains: [CHAIN], accepted_tokens: ['USDC'] });
    const path = `/merchants/${merchant()}/payments/${String(p['id'])}/deposit-rescans`;
    const other = await createMerchant(e2e.stack, ADMIN_TOKEN, 'Other');
    const head = await chain.provider().getBlockNumber();
    const refusals: [string, unknown, number, Json][] = [
      [
        path,
        { from_block: -1 },
        400,
        { type: 'validation_error', param: 'from_block', code: 'parameter_invalid' },
      ],
      [path, { from_block: '12abc' }, 400, { type: 'validation_error', param: 'from_block' }],
      // Past the chain's head: nothing there to scan yet (the indexer would keep the watch where it is).
      [
        path,
        { from_block: head + 1_000 },
        400,
        { type: 'validation_error', param: 'from_block', code: 'parameter_invalid' },
      ],
      [
        path,
        { chain: 'eip155:1' },
        400,
        { type: 'validation_error', param: 'chain', code: 'parameter_invalid' },
      ],
      [path, { block: 1 }, 400, { type: 'validation_error', param: 'block', code: 'unknown_parameter' }],
      // Another merchant's payment, named under that merchant: as if it did not exist.
      [
        `/merchants/${other.id}/payments/${String(p['id'])}/deposit-rescans`,
        {},
        404,
        { type: 'invalid_request', code: 'resource_missing', param: 'id' },
      ],
      [
        `/merchants/${merchant()}/customers/cus_nothere/deposit-rescans`,
        {},
        404,
        { code: 'resource_missing', param: 'id' },
      ],
    ];
    await expectRefusals(admin, refusals);
    // A merchant's API key is no operator token.
    const merchantKey = await admin(path, {}, { token: other.apiKey });
    expect(merchantKey.status).toBe(401);
    expect(merchantKey.body['error']).toMatchObject({ type: 'authentication_error' });
    const [row] = (await db().query(
      'SELECT rescans FROM indexer_watched_addresses WHERE chain = $1 AND address = $2',
      [CHAIN, String(p['deposit_address']).toLowerCase()],
    )) as { rescans: number }[];
    expect(row?.rescans ?? 0).toBe(0);
  });
});
