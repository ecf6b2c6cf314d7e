import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { type JsonRpcProvider, Transaction, Wallet } from 'ethers';
import { DataSource } from 'typeorm';
import {
  connectStablepayRegistry,
  connectSubscriptionManager,
  connectTestStablecoin,
  toOnChainId,
} from '@stablepay/contracts';
import { EVENT_STORE } from '@stablepay/aggregate';
import type { EventStore } from '@stablepay/event-store';
import { SANDBOX_SANCTIONED_PAYER } from '@stablepay/evm';
import { ANVIL_DEV_PRIVATE_KEYS, localChainProvider } from '@stablepay/local-chains';
import { signCharge, verifyWebhook } from '@stablepay/merchant-sdk';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { type EmbeddedStack, startEmbedded } from './embedded';
import { ledgerListed } from './test-support/subscriptions';

/**
 * Chain events of subscriptions beyond the happy path, end to end through HTTP on the embedded stack and a local
 * anvil: compliance screening at subscribe and at migration (docs/subscriptions.md, Compliance screening), the
 * manager's pause and migration proposals (Manager events), a charge receipt timeout (Charge receipt timeout), and reorgs
 * (Reorgs: evm_snapshot, the facts land and the indexer observes them, evm_revert and a longer fork without them; the
 * indexer retracts the observations and the subscription, its window and the charge ledger follow, with the webhooks
 * a merchant needs). The reorg test runs last: it rewinds the chain under the stack.
 */
type Json = Record<string, unknown>;
const CHAIN = 'eip155:8453';
// Stream ids as docs/asyncapi.yaml publishes them (an app may not import the domain lib that builds them).
const subscriptionStreamId = (id: string) => `subscription-${id.toLowerCase()}`;
const subscriptionManagerStreamId = (chain: string, address: string) =>
  `subscriptionManager-${chain}:${address.toLowerCase()}`;

const until = async <T>(read: () => Promise<T>, done: (v: T) => boolean, what: string): Promise<T> => {
  const deadline = Date.now() + 45_000;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(value)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
};

describe('subscription chain events: screening, manager events, receipt timeout, reorgs (embedded stack, anvil)', () => {
  let db: TestDatabase;
  let stack: EmbeddedStack;
  const merchantSigner = Wallet.createRandom();
  // A funded dev account: it sends the manager's pause and unpause itself.
  const merchantPauser = new Wallet(ANVIL_DEV_PRIVATE_KEYS[6] ?? '');
  let receiver: Server;
  let webhookSecret = '';
  const received: Array<{ body: string; headers: IncomingHttpHeaders }> = [];
  type Hook = { id: string; type: string; data: Record<string, Json> };
  const hooks = () => received.map((r) => ({ ...r, event: JSON.parse(r.body) as Hook }));
  const hook = (type: string, match: (e: Hook) => boolean) =>
    until(
      async () => hooks().find((h) => h.event.type === type && match(h.event)),
      (h) => h !== undefined,
      `webhook ${type}`,
    ).then((h) => {
      if (!h) throw new Error('unreachable');
      expect(verifyWebhook(h.body, h.headers, webhookSecret)).toMatchObject({ valid: true });
      return h.event;
    });

  let subscriptionId = '';
  let managerAddress = '';
  let subscriber: Wallet;

  const api = async (method: string, path: string, body?: unknown, auth = true) => {
    const res = await fetch(`${stack.url}${path}`, {
      method,
      headers: {
        ...(auth ? { authorization: `Bearer ${stack.demoApiKey}` } : {}),
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.status, body: (await res.json()) as Json };
  };
  const providers: JsonRpcProvider[] = [];
  const provider = () => {
    const chain = stack.chains?.chains.find((c) => c.caip2 === CHAIN);
    if (!chain) throw new Error('no local chain');
    const p = localChainProvider(chain.rpcUrl, chain.chainId);
    providers.push(p);
    return p;
  };
  const wallet = (index: number) => new Wallet(ANVIL_DEV_PRIVATE_KEYS[index] ?? '', provider());
  const subscription = async (id = subscriptionId) => (await api('GET', `/subscriptions/${id}`)).body;
  const ledgerRows = async () =>
    (
      await api(
        'GET',
        `/merchants/${stack.demoMerchantId}/charges?subscription_id=${subscriptionId}&limit=100`,
      )
    ).body['data'] as Json[];
  const ledgerRow = async (id: string) => (await ledgerRows()).find((c) => c['id'] === id);
  const ledgerCount = async () => (await ledgerRows()).length;
  /** Whether the indexer's observation of `txHash` reached the subscriptions service (so it can be retracted). */
  const observed = async (txHash: string) => {
    const rows: unknown[] = await stack.service.app
      .get(DataSource)
      .query('SELECT 1 FROM subscription_chain_observations WHERE lower(tx_hash) = lower($1)', [txHash]);
    return rows.length > 0;
  };
  /** The merchant's signed charge body (signCharge) for the quoted amount at the subscription's charge_nonce. */
  const signedCharge = async (target = { id: subscriptionId, manager: managerAddress }) => {
    const q = await api('POST', `/subscriptions/${target.id}/charge-quote`);
    expect(q.status).toBe(201);
    const p = provider();
    const registry = connectStablepayRegistry(String(stack.chains?.chains[0]?.addresses.registry), p);
    const epoch = (await registry.merchantAuth(toOnChainId(stack.demoMerchantId))).epoch;
    const nonce = Number((await subscription(target.id))['charge_nonce']);
    const deadline = BigInt((await p.getBlock('latest'))?.timestamp ?? 0) + 3600n;
    const quoteCode = String(q.body['quote_code']);
    const amount = String(q.body['amount']);
    const { signature } = await signCharge(
      merchantSigner,
      { chain: CHAIN, verifyingContract: target.manager },
      { subscriptionId: target.id, amount, nonce, deadline, quoteCode, epoch },
    );
    return { amount, nonce, deadline: Number(deadline), signature, quote_code: quoteCode };
  };
  const postCharge = (body: Json, id = subscriptionId) => api('POST', `/subscriptions/${id}/charge`, body);
  const chargeNow = async (target = { id: subscriptionId, manager: managerAddress }) =>
    postCharge(await signedCharge(target), target.id);

  /**
   * A subscription of `who` through HTTP: price 1,500.00 ARS, cap 3,000.00, budget 9,000.00, hourly windows, USDC;
   * the wallet's approve and subscribe (`beforeSubscribe` runs between them), the report; returns once the indexer
   * observed the subscribe too.
   */
  const subscribeWith = async (who: Wallet, beforeSubscribe?: () => Promise<void>) => {
    const checkout = await api('POST', '/subscription-checkouts', {
      price: '150000',
      price_currency: 'ARS',
      cap: '300000',
      budget: '900000',
      period_duration: 3600,
      supported_chains: [CHAIN],
    });
    expect(checkout.status).toBe(201);
    const usdc = (checkout.body['subscription_options'] as Json[]).find((o) => o['token_symbol'] === 'USDC');
    const path = `/subscription-checkouts/${String(checkout.body['id'])}/subscribe`;
    const params = { chain: CHAIN, asset: usdc?.['asset'], subscriber: who.address };
    const auth = await api('POST', path, params, false);
    expect(auth.status).toBe(200);
    const token = connectTestStablecoin(String(auth.body['token_address']), who);
    await (await token.mint(who.address, BigInt(String(auth.body['budget_amount'])) * 3n)).wait();
    const [approve, subscribe] = auth.body['transactions'] as Json[];
    await (
      await who.sendTransaction({ to: String(approve?.['to']), data: String(approve?.['data']) })
    ).wait();
    await beforeSubscribe?.();
    const sent = await who.sendTransaction({
      to: String(subscribe?.['to']),
      data: String(subscribe?.['data']),
    });
    await sent.wait();
    const reported = await api('POST', path, { ...params, tx_hash: sent.hash }, false);
    expect(reported.body['status']).toBe('recorded');
    await until(() => observed(sent.hash), Boolean, 'the indexer to observe the subscribe');
    return {
      id: String(checkout.body['onchain_id']),
      manager: String(auth.body['manager_address']),
      token: String(auth.body['token_address']),
      checkoutId: String(checkout.body['id']),
      txHash: sent.hash,
    };
  };

  beforeAll(async () => {
    receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        received.push({ body: Buffer.concat(chunks).toString('utf8'), headers: req.headers });
        res.writeHead(200).end('ok');
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
        LOG_LEVEL: 'error',
        STABLEPAY_LOCAL_CHAINS: 'true',
        LOCAL_CHAIN_IDS: '8453',
        INDEXER_POLL_MS: '100',
        ALLOW_LOCAL_WEBHOOKS: 'true',
        WEBHOOK_POLL_INTERVAL_MS: '100',
        CHARGE_RECEIPT_TIMEOUT_MS: '3000',
      },
      dataDir: 'memory',
    });
    expect(
      (
        await api('POST', '/settings', {
          merchant_signer: merchantSigner.address,
          settlement_address: Wallet.createRandom().address,
        })
      ).status,
    ).toBe(200);
    const declaration = await api('GET', '/settings/pauser');
    await api('POST', '/settings/pauser', {
      merchant_pauser: merchantPauser.address,
      signature: await merchantPauser.signMessage(String(declaration.body['declaration_message'])),
    });
    const settings = await api('PATCH', '/settings', {
      webhook_url: `http://127.0.0.1:${address.port}/hooks`,
    });
    webhookSecret = String(settings.body['webhook_secret']);
    subscriber = wallet(3);
    const first = await subscribeWith(subscriber);
    subscriptionId = first.id;
    managerAddress = first.manager;
  }, 180_000);

  afterAll(async () => {
    for (const p of providers) p.destroy();
    await stack?.stop();
    await db?.drop();
    await new Promise<void>((resolve) => receiver?.close(() => resolve()));
  });

  it('compliance screening at subscribe: a sanctioned subscriber wallet flags the subscription (subscription.flagged), charges refused at preflight', async () => {
    const sanctioned = wallet(9);
    expect(sanctioned.address).toBe(SANDBOX_SANCTIONED_PAYER);
    const flaggedSub = await subscribeWith(sanctioned);
    const flagged = await until(
      () => subscription(flaggedSub.id),
      (s) => s['flagged'] === true,
      'the subscription flagged',
    );
    expect(flagged).toMatchObject({ status: 'active', subscriber: sanctioned.address });
    const event = await hook('subscription.flagged', (e) => e.data['object']?.['id'] === flaggedSub.id);
    expect(event.data['object']).toEqual({
      id: flaggedSub.id,
      subscription_id: flaggedSub.id,
      object: 'subscription',
      subscriber: sanctioned.address,
    });
    const refused = await chargeNow(flaggedSub);
    expect(refused.status).toBe(422);
    expect(refused.body['error']).toMatchObject({ type: 'cannot_process', code: 'subscription_flagged' });
    expect(await subscription(flaggedSub.id)).toMatchObject({ charge_nonce: 1 });
    // A clear subscriber is never flagged.
    expect(await subscription()).toMatchObject({ flagged: false });
  }, 120_000);

  it('compliance screening at migration: moving a subscription to a sanctioned wallet flags it', async () => {
    const owner = wallet(4);
    const sub = await subscribeWith(owner);
    expect(await subscription(sub.id)).toMatchObject({ flagged: false });
    const sanctioned = wallet(9);
    const manager = connectSubscriptionManager(sub.manager, owner);
    // A proposal voided by a change of terms, then the one accepted: each recorded as a fact.
    await (await manager.proposeMigration(sub.id, sanctioned.address)).wait();
    const cap = BigInt(String((await subscription(sub.id))['cap_amount']));
    await (await manager.updateCap(sub.id, cap - 1n)).wait();
    await until(
      () => subscription(sub.id),
      (s) => s['cap_amount'] === (cap - 1n).toString(),
      'the cap update',
    );
    await (await manager.proposeMigration(sub.id, sanctioned.address)).wait();
    await (await connectTestStablecoin(sub.token, sanctioned).approve(sub.manager, 1000n)).wait();
    const terms = await subscription(sub.id);
    await (
      await connectSubscriptionManager(sub.manager, sanctioned).acceptMigration(
        sub.id,
        BigInt(String(terms['cap_amount'])),
        BigInt(String(terms['budget'])),
      )
    ).wait();
    const flagged = await until(
      () => subscription(sub.id),
      (s) => s['flagged'] === true,
      'the migrated subscription flagged',
    );
    expect(flagged).toMatchObject({ subscriber: sanctioned.address });
    const event = await hook('subscription.flagged', (e) => e.data['object']?.['id'] === sub.id);
    expect(event.data['object']).toMatchObject({ subscriber: sanctioned.address });
    const refused = await chargeNow(sub);
    expect(refused.body['error']).toMatchObject({ code: 'subscription_flagged' });
    const types = (
      await stack.service.app.get<EventStore>(EVENT_STORE).readStream(subscriptionStreamId(sub.id))
    ).map((e) => e.type);
    expect(
      types.filter((t) => t.startsWith('SubscriptionMigration') || t === 'SubscriptionMigrated.v1'),
    ).toEqual([
      'SubscriptionMigrationProposed.v1',
      'SubscriptionMigrationVoided.v1',
      'SubscriptionMigrationProposed.v1',
      'SubscriptionMigrated.v1',
    ]);
  }, 120_000);

  it('the merchant pauser pauses the manager: recorded from the indexer, charges refused manager_paused writing nothing; unpaused, charges go through', async () => {
    const manager = connectSubscriptionManager(managerAddress, merchantPauser.connect(provider()));
    const recorded = async () =>
      (
        await stack.service.app
          .get<EventStore>(EVENT_STORE)
          .readStream(subscriptionManagerStreamId(CHAIN, managerAddress))
      ).map((e) => e.type);
    const before = await subscription();
    await ledgerListed(stack);
    const ledgerBefore = await ledgerCount();
    await (await manager.pause()).wait();
    await until(recorded, (t) => t.includes('SubscriptionManagerPaused.v1'), 'the pause recorded');
    const refused = await chargeNow();
    expect(refused.status).toBe(409);
    expect(refused.body['error']).toMatchObject({ type: 'invalid_request', code: 'manager_paused' });
    expect(await ledgerCount()).toBe(ledgerBefore);
    // The dunning brake is another thing: the subscription is not paused by the manager's incident brake.
    expect(await subscription()).toMatchObject({ charge_nonce: before['charge_nonce'], paused: false });
    await (await manager.unpause()).wait();
    await until(recorded, (t) => t.includes('SubscriptionManagerUnpaused.v1'), 'the unpause recorded');
    const charged = await chargeNow();
    expect(charged.status).toBe(200);
    expect(charged.body).toMatchObject({ status: 'succeeded', charge_nonce: before['charge_nonce'] });
  }, 120_000);

  it('a cap the subscriber lowered below a quote already given: the charge is refused at preflight with 422 amount_exceeds_cap, nothing sent, and that amount is no longer quoted', async () => {
    const owner = wallet(6);
    const sub = await subscribeWith(owner);
    const body = await signedCharge(sub);
    const lowered = BigInt(body.amount) - 1n;
    await (await connectSubscriptionManager(sub.manager, owner).updateCap(sub.id, lowered)).wait();
    await until(
      () => subscription(sub.id),
      (s) => s['cap_amount'] === lowered.toString(),
      'the cap update',
    );
    const before = await subscription(sub.id);
    const funds = await connectTestStablecoin(sub.token, provider()).balanceOf(owner.address);
    const refused = await postCharge(body, sub.id);
    expect(refused.status).toBe(422);
    expect(refused.body['error']).toMatchObject({
      type: 'cannot_process',
      code: 'amount_exceeds_cap',
      param: 'amount',
    });
    expect(await subscription(sub.id)).toMatchObject({ charge_nonce: before['charge_nonce'] });
    expect(await connectTestStablecoin(sub.token, provider()).balanceOf(owner.address)).toBe(funds);
    const quoted = await api('POST', `/subscriptions/${sub.id}/charge-quote`);
    expect(quoted.status).toBe(422);
    expect(quoted.body['error']).toMatchObject({ type: 'cannot_process', code: 'amount_exceeds_cap' });
  }, 120_000);

  it('a charge receipt timeout: 503 charge_pending, a retry sends nothing new, the indexer records the charge when it lands, the retry then answers it', async () => {
    const p = provider();
    const before = Number((await subscription())['charge_nonce']);
    const pool = async () =>
      Object.values(
        ((await p.send('txpool_content', [])) as { pending: Record<string, Record<string, unknown>> })
          .pending,
      ).reduce((n, byNonce) => n + Object.keys(byNonce).length, 0);
    const body = await signedCharge();
    await p.send('evm_setAutomine', [false]);
    let txHash = '';
    try {
      const first = await postCharge(body);
      expect(first.status).toBe(503);
      expect(first.body['error']).toMatchObject({ type: 'api_error', code: 'charge_pending' });
      txHash = /0x[0-9a-f]{64}/.exec(String((first.body['error'] as Json)['message']))?.[0] ?? '';
      expect(txHash).not.toBe('');
      expect(await pool()).toBe(1);
      // The merchant retries: the service waits for the same transaction and sends nothing.
      const retry = await postCharge(body);
      expect(retry.status).toBe(503);
      expect(String((retry.body['error'] as Json)['message'])).toContain(txHash);
      expect(await pool()).toBe(1);
      // Other terms on the pending nonce are refused; nothing is recorded while it is pending.
      const other = await postCharge({ ...body, amount: String(BigInt(String(body.amount)) - 1n) });
      expect(other.body['error']).toMatchObject({ code: 'charge_pending', param: 'nonce' });
      expect(await subscription()).toMatchObject({ charge_nonce: before });
      expect(
        (
          (await api('GET', `/merchants/${stack.demoMerchantId}/charges?subscription_id=${subscriptionId}`))
            .body['data'] as Json[]
        ).some((c) => c['tx_hash'] === txHash),
      ).toBe(false);
      await p.send('evm_mine', []);
    } finally {
      await p.send('evm_setAutomine', [true]);
    }
    // The indexer reconciles: the charge is recorded from its log, the ledger row written by the indexer (no fiat
    // fields: SPEC fiat field rule 4).
    await until(subscription, (s) => s['charge_nonce'] === before + 1, 'the indexer to record the charge');
    // The charge ledger writes its row from the subscription's fact, after it.
    const row = await until(
      async () => (await ledgerRows()).find((c) => c['tx_hash'] === txHash),
      (r) => r !== undefined,
      'the ledger row of the indexer-recorded charge',
    );
    expect(row).toMatchObject({ status: 'succeeded', charge_nonce: before, fiat_amount: null });
    // The same request again answers the landed charge (already charged): still one transaction.
    const answered = await postCharge(body);
    expect(answered.status).toBe(200);
    expect(answered.body).toMatchObject({ id: row?.['id'], tx_hash: txHash, status: 'succeeded' });
    expect(await pool()).toBe(0);
  }, 120_000);

  it('a charge mined then reverted by a reorg, with a cap update in the same fork: both undone, ledger row charge_lost_to_reorg, webhooks', async () => {
    const before = await subscription();
    expect(before).toMatchObject({ status: 'active' });
    const n = Number(before['charge_nonce']);
    const p = provider();
    const snapshot = (await p.send('evm_snapshot', [])) as string;

    const charged = await chargeNow();
    expect(charged.status).toBe(200);
    expect(charged.body).toMatchObject({ status: 'succeeded', charge_nonce: n });
    const chargeId = String(charged.body['id']);
    const chargeTx = String(charged.body['tx_hash']);
    const newCap = BigInt(String(before['cap_amount'])) - 7n;
    const capTx = await connectSubscriptionManager(managerAddress, subscriber).updateCap(
      subscriptionId,
      newCap,
    );
    await capTx.wait();
    await until(
      subscription,
      (s) => s['charge_nonce'] === n + 1 && s['cap_amount'] === newCap.toString(),
      'the charge and the cap update recorded',
    );
    expect(BigInt(String((await subscription())['spent_this_period']))).toBeGreaterThan(
      BigInt(String(before['spent_this_period'])),
    );
    await until(async () => (await observed(chargeTx)) && (await observed(capTx.hash)), Boolean, 'observed');
    // The charge as signed and broadcast, to put it back into the new fork later (a reorg's usual ending).
    const sentCharge = await p.getTransaction(chargeTx);
    if (!sentCharge) throw new Error('charge transaction not found');
    const rawCharge = Transaction.from(sentCharge).serialized;

    await p.send('evm_revert', [snapshot]);
    // A longer fork without the two transactions: the follower sees the parent hashes change and retracts them.
    await p.send('anvil_mine', ['0x8']);

    const after = await until(
      subscription,
      (s) => s['charge_nonce'] === n && s['cap_amount'] === before['cap_amount'],
      'the reorg to undo the charge and the cap update',
    );
    expect(after).toMatchObject({
      status: 'active',
      spent_this_period: before['spent_this_period'],
      remaining_budget: before['remaining_budget'],
      last_charged_at: before['last_charged_at'],
    });
    const row = await until(
      () => ledgerRow(chargeId),
      (r) => r?.['status'] === 'failed',
      'the ledger row marked',
    );
    expect(row).toMatchObject({
      id: chargeId,
      status: 'failed',
      failure_reason: 'charge_lost_to_reorg',
      tx_hash: chargeTx,
      fee: '0',
      block_number: '0',
      charge_nonce: n,
    });
    const failed = await hook('subscription.charge_failed', (e) => e.data['charge']?.['id'] === chargeId);
    expect(failed.data['charge']).toMatchObject({ status: 'failed', failure_reason: 'charge_lost_to_reorg' });
    expect(failed.data['object']).toMatchObject({ charge_nonce: n, subscription_id: subscriptionId });
    const reorged = await hook('subscription.reorged', (e) => e.data['object']?.['id'] === subscriptionId);
    expect(reorged.data['reorged']).toEqual({ event_type: 'subscription.cap_updated', tx_hash: capTx.hash });
    expect(reorged.data['object']).toMatchObject({ cap_amount: before['cap_amount'] });

    // The same transaction re-included in the new fork: the indexer's new observation records the charge again,
    // under the same subc_ id, and the row is succeeded again (same transaction, new block).
    await p.send('eth_sendRawTransaction', [rawCharge]);
    await until(subscription, (s) => s['charge_nonce'] === n + 1, 'the re-included charge recorded');
    const back = await until(
      () => ledgerRow(chargeId),
      (r) => r?.['status'] === 'succeeded',
      'the ledger row succeeded again',
    );
    expect(back).toMatchObject({ tx_hash: chargeTx, failure_reason: null });
    expect(back?.['block_number']).not.toBe(row?.['block_number']);
    const succeededAgain = await until(
      async () =>
        hooks().filter(
          (h) =>
            h.event.type === 'subscription.charge_succeeded' && h.event.data['charge']?.['id'] === chargeId,
        ),
      (list) => list.length === 2,
      'a second charge_succeeded for the re-included charge',
    );
    expect(succeededAgain[1]?.event.data['charge']).toMatchObject({ status: 'succeeded', tx_hash: chargeTx });
    // The operator's nonce sequence has no hole: the next charge goes through.
    const next = await chargeNow();
    expect(next.status).toBe(200);
    expect(next.body).toMatchObject({ status: 'succeeded', charge_nonce: n + 1 });
  }, 180_000);

  /** Mines nothing more of the fork since `snapshot`: back to it, then a longer fork without those transactions. */
  const reorgTo = async (snapshot: string) => {
    const p = provider();
    await p.send('evm_revert', [snapshot]);
    await p.send('anvil_mine', ['0x8']);
  };
  const rawOf = async (txHash: string) => {
    const sent = await provider().getTransaction(txHash);
    if (!sent) throw new Error(`transaction ${txHash} not found`);
    return Transaction.from(sent).serialized;
  };
  const streamOf = async (id: string) =>
    (await stack.service.app
      .get<EventStore>(EVENT_STORE)
      .readStream(subscriptionStreamId(id))) as ReadonlyArray<{
      type: string;
      data: Json;
    }>;

  it('a charge that released the paused brake, reorged out: paused again (its charge_failed webhook shows it); re-included, released again', async () => {
    const owner = wallet(5);
    const sub = await subscribeWith(owner);
    const token = connectTestStablecoin(sub.token, owner);
    const funds = await token.balanceOf(owner.address);
    await (await token.transfer(Wallet.createRandom().address, funds)).wait();
    const refused = await chargeNow(sub);
    expect(refused.body).toMatchObject({ status: 'failed', failure_reason: 'InsufficientBalance' });
    expect(await subscription(sub.id)).toMatchObject({ paused: true, charge_nonce: 1 });
    await (await token.mint(owner.address, funds)).wait();

    const snapshot = (await provider().send('evm_snapshot', [])) as string;
    const charged = await chargeNow(sub);
    expect(charged.body).toMatchObject({ status: 'succeeded', charge_nonce: 1 });
    const chargeId = String(charged.body['id']);
    const chargeTx = String(charged.body['tx_hash']);
    expect(await subscription(sub.id)).toMatchObject({ paused: false, charge_nonce: 2 });
    await until(() => observed(chargeTx), Boolean, 'the charge observed');
    const raw = await rawOf(chargeTx);

    await reorgTo(snapshot);
    const after = await until(
      () => subscription(sub.id),
      (s) => s['charge_nonce'] === 1,
      'the reorg to undo the releasing charge',
    );
    // SPEC paused table: the success that released the brake is gone from the chain, so the brake is on again.
    expect(after).toMatchObject({ paused: true, status: 'active' });
    const lost = await hook('subscription.charge_failed', (e) => e.data['charge']?.['id'] === chargeId);
    expect(lost.data['charge']).toMatchObject({ failure_reason: 'charge_lost_to_reorg' });
    expect(lost.data['object']).toMatchObject({ paused: true, charge_nonce: 1 });

    await provider().send('eth_sendRawTransaction', [raw]);
    expect(
      await until(
        () => subscription(sub.id),
        (s) => s['charge_nonce'] === 2,
        'the re-included charge recorded',
      ),
    ).toMatchObject({ paused: false });
  }, 180_000);

  it('a migration proposal voided by a cap change, the void reorged out: the proposal is pending again, so the re-included void voids it again', async () => {
    const owner = wallet(8);
    const sub = await subscribeWith(owner);
    const manager = connectSubscriptionManager(sub.manager, owner);
    const migrationFacts = async () =>
      (await streamOf(sub.id)).flatMap((e) => {
        if (e.type.startsWith('SubscriptionMigration')) return [e.type];
        const fact = String(e.data['fact']);
        return e.type === 'SubscriptionFactRetracted.v1' && fact.startsWith('migration')
          ? [`retracted ${fact}`]
          : [];
      });
    await (await manager.proposeMigration(sub.id, Wallet.createRandom().address)).wait();
    await until(migrationFacts, (f) => f.length === 1, 'the proposal recorded');
    const cap = BigInt(String((await subscription(sub.id))['cap_amount']));

    const snapshot = (await provider().send('evm_snapshot', [])) as string;
    const capTx = await manager.updateCap(sub.id, cap - 1n);
    await capTx.wait();
    await until(migrationFacts, (f) => f.length === 2, 'the void recorded');
    await until(() => observed(capTx.hash), Boolean, 'the cap update observed');
    const raw = await rawOf(capTx.hash);

    await reorgTo(snapshot);
    expect(
      await until(
        migrationFacts,
        (f) => f.includes('retracted migration_voided'),
        'the reorg to undo the void',
      ),
    ).toEqual([
      'SubscriptionMigrationProposed.v1',
      'SubscriptionMigrationVoided.v1',
      'retracted migration_voided',
    ]);
    await until(
      () => subscription(sub.id),
      (s) => s['cap_amount'] === cap.toString(),
      'the cap update undone',
    );

    // The same cap update in the new fork voids the proposal on chain again: recorded again, as it is pending here.
    await provider().send('eth_sendRawTransaction', [raw]);
    expect(await until(migrationFacts, (f) => f.length === 4, 'the re-included void recorded')).toEqual([
      'SubscriptionMigrationProposed.v1',
      'SubscriptionMigrationVoided.v1',
      'retracted migration_voided',
      'SubscriptionMigrationVoided.v1',
    ]);
  }, 180_000);

  it('a cancel while a migration is proposed: the proposal is recorded as voided with it, not left pending', async () => {
    const owner = wallet(8);
    const sub = await subscribeWith(owner);
    const manager = connectSubscriptionManager(sub.manager, owner);
    await (await manager.proposeMigration(sub.id, Wallet.createRandom().address)).wait();
    await (await manager.subscriberCancel(sub.id)).wait();
    const types = await until(
      async () => (await streamOf(sub.id)).map((e) => e.type),
      (t) => t.includes('SubscriptionCancelled.v1') && t.includes('SubscriptionMigrationVoided.v1'),
      'the cancel and the void recorded',
    );
    expect(types.filter((t) => t.startsWith('SubscriptionMigration'))).toEqual([
      'SubscriptionMigrationProposed.v1',
      'SubscriptionMigrationVoided.v1',
    ]);
  }, 120_000);

  it('a subscribe transaction reorged out: its checkout is pending again (subscription_checkout.reorged) and the subscription gone; re-included, completed again with a second completed', async () => {
    const p = provider();
    let snapshot = '';
    const sub = await subscribeWith(wallet(2), async () => {
      snapshot = (await p.send('evm_snapshot', [])) as string;
    });
    const checkout = () => api('GET', `/subscription-checkouts/${sub.checkoutId}`).then((r) => r.body);
    const completions = () =>
      hooks().filter(
        (h) =>
          h.event.type === 'subscription_checkout.completed' &&
          h.event.data['object']?.['id'] === sub.checkoutId,
      );
    await until(checkout, (c) => c['status'] === 'completed', 'the intent completed');
    const first = await hook(
      'subscription_checkout.completed',
      (e) => e.data['object']?.['id'] === sub.checkoutId,
    );
    const raw = await rawOf(sub.txHash);

    await reorgTo(snapshot);
    const back = await until(checkout, (c) => c['status'] !== 'completed', 'the completion undone');
    // As if the subscribe never confirmed (SPEC: never completed without a confirmed first charge): pending again.
    expect(back).toMatchObject({ status: 'pending', subscriber: null, completed_at: null });
    const reorged = await hook(
      'subscription_checkout.reorged',
      (e) => e.data['object']?.['id'] === sub.checkoutId,
    );
    expect(reorged.data['reorged']).toEqual({
      event_type: 'subscription_checkout.completed',
      tx_hash: sub.txHash,
    });
    expect(reorged.data['object']).toMatchObject({ status: 'pending', completed_at: null });
    // The subscription's own undo (its creation, then its first charge) may land after the intent's.
    expect(
      await until(
        () => subscription(sub.id),
        (s) => s['charge_nonce'] === 0,
        'the first charge undone',
      ),
    ).toMatchObject({ status: 'cancelled' });
    expect(completions()).toHaveLength(1);

    // The same transaction in the new fork: on chain the subscribe stands again, so the intent completes again.
    await p.send('eth_sendRawTransaction', [raw]);
    await until(checkout, (c) => c['status'] === 'completed', 'the intent completed again');
    const both = await until(
      async () => completions(),
      (list) => list.length === 2,
      'a second subscription_checkout.completed',
    );
    expect(both[1]?.event.id).not.toBe(both[0]?.event.id);
    expect(both[1]?.event.data['object']).toMatchObject({
      status: 'completed',
      subscriber: wallet(2).address,
    });
    // Each completion's first_charge is the ledger row as its recording left it: succeeded, in its own block.
    expect(both[1]?.event.data['first_charge']).toMatchObject({
      id: first.data['first_charge']?.['id'],
      status: 'succeeded',
      tx_hash: sub.txHash,
      created_at: first.data['first_charge']?.['created_at'],
    });
    expect(both[1]?.event.data['first_charge']?.['block_number']).not.toBe(
      first.data['first_charge']?.['block_number'],
    );
    expect(await subscription(sub.id)).toMatchObject({ status: 'active', charge_nonce: 1 });
  }, 180_000);
});
