import { FakeDnsServer, HostResolver } from '@stablepay/node-util';
import { eventually, type TestDatabase } from '@stablepay/testing';
import { ManualClock } from '@stablepay/util';
import { TestReceiver } from './testing/test-receiver';
import { createWebhookTestDatabase as createTestDatabase } from './testing/webhook-test-database';
import { startWebhookStack, type WebhookStack } from './testing/webhook-stack';

/**
 * One merchant's name server does not answer: its deliveries hold at most its own slots
 * (WEBHOOK_CONCURRENCY_PER_MERCHANT) and one DNS query in flight, another merchant's delivery is resolved and made
 * meanwhile, and once its server answers that the name has no address they end as `dns_error` attempts. The
 * dispatcher uses the merchants config's resolver, the one the URL was checked with at save.
 *
 * The slow name's queries are held by the fake server until the test releases them, and the test's own deadlines
 * (the resolver's, the attempt's, the lease) cannot pass. c-ares's could: it sets each try's timeout from the
 * latency it measured of the server, 5 times the average once it has 3 answers in the current minute (at least
 * 250 ms), and the saves alone give it 4 (A and AAAA of two names): a held query was then given up after ~2 s
 * however long the configured timeout, and on a loaded machine the slow deliveries ended as `dns_error` before the
 * fine one was made, which proved nothing. So the URLs are saved through one stack and name server, and delivered
 * by a second stack whose resolver (a new c-ares channel) asks a second name server: nothing measured, each try
 * gets the configured timeout, capped by c-ares at 5 s (node 20 cannot raise the cap), and a held name is given up
 * only after ~14 s (two tries). The fine delivery, made in well under a second, must come while every slow
 * delivery still waits on DNS. That a name never answered ends as a `dns_error` at the resolver's deadline is
 * webhook-http-sender.int.spec's.
 */
/** Longer than any run of this file: a deadline the test never reaches. */
const UNREACHED_MS = 3_600_000;

describe('webhook delivery while a merchant’s DNS does not answer', () => {
  const clock = new ManualClock('2026-11-02T00:00:00.000Z');
  // Answers the saves' checks: both names have public addresses.
  const saveDns = new FakeDnsServer()
    .set('hooks.slow-dns.test', { kind: 'answer', a: ['93.184.216.34'] })
    .set('hooks.fine-dns.test', { kind: 'answer', a: ['93.184.216.35'] });
  // Asked at delivery: the slow merchant's name is held (until released), the fine one's points at the local
  // receiver (loopback is admitted at send time: ALLOW_LOCAL_WEBHOOKS).
  const deliveryDns = new FakeDnsServer()
    .set('hooks.slow-dns.test', { kind: 'hold' })
    .set('hooks.fine-dns.test', { kind: 'answer', a: ['127.0.0.1'] });
  const receiver = new TestReceiver();
  let db: TestDatabase;
  let stack: WebhookStack | undefined;

  const startStack = (dns: FakeDnsServer): Promise<WebhookStack> =>
    startWebhookStack({
      databaseUrl: db.url,
      clock,
      webhookDns: new HostResolver({ timeoutMs: UNREACHED_MS, servers: [dns.server] }),
      dispatch: {
        pollIntervalMs: 60_000,
        concurrency: 4,
        perMerchantConcurrency: 2,
        leaseMs: 3 * UNREACHED_MS,
        policy: { jitterRatio: 0, responseDeadlineMs: UNREACHED_MS },
      },
    });

  beforeAll(async () => {
    [db] = await Promise.all([createTestDatabase(), receiver.start(), saveDns.start(), deliveryDns.start()]);
  });

  afterAll(async () => {
    deliveryDns.release('hooks.slow-dns.test');
    await stack?.stop();
    await Promise.all([receiver.stop(), saveDns.stop(), deliveryDns.stop(), db?.drop()]);
  });

  it("delivers another merchant's event while the slow merchant's deliveries wait on DNS; those end as dns_error", async () => {
    const port = new URL(receiver.url()).port;
    const saving = await startStack(saveDns);
    stack = saving;
    const slow = await saving.createMerchant('Slow DNS');
    const fine = await saving.createMerchant('Fine DNS');
    await saving.configureWebhook(slow.merchantId, `https://hooks.slow-dns.test:${port}/slow`);
    await saving.configureWebhook(fine.merchantId, `https://hooks.fine-dns.test:${port}/fine`);
    stack = undefined;
    await saving.stop();
    const delivering = await startStack(deliveryDns);
    stack = delivering;

    for (let i = 0; i < 6; i++)
      await delivering.emit(slow.merchantId, 'TestChargeSucceeded.v1', {
        chargeId: `subc_slow${i}`,
        amount: '1',
      });
    await delivering.recorder.caughtUp();
    delivering.dispatcher.wake();
    await deliveryDns.queried('hooks.slow-dns.test');

    await delivering.emit(fine.merchantId, 'TestChargeSucceeded.v1', { chargeId: 'subc_fine', amount: '1' });
    await delivering.recorder.caughtUp();
    delivering.dispatcher.wake();
    const [fineRow] = (
      await eventually(
        () => delivering.events.list({ merchantId: fine.merchantId, limit: 10 }),
        ({ rows }) => rows[0]?.attemptCount === 1,
        'the fine merchant’s attempt',
        { timeoutMs: 30_000, intervalMs: 20 },
      )
    ).rows;
    // Resolved and connected: the TLS handshake then fails against the plain-HTTP receiver.
    expect(fineRow).toMatchObject({ lastError: 'tls_error' });
    // Made while every slow delivery still waited on its name: none attempted, the query still held.
    const slowMeanwhile = (await delivering.events.list({ merchantId: slow.merchantId, limit: 10 })).rows;
    expect(slowMeanwhile.map((r) => r.attemptCount)).toEqual([0, 0, 0, 0, 0, 0]);
    expect(deliveryDns.heldQueries('hooks.slow-dns.test').length).toBeGreaterThan(0);

    // The name server answers at last: the name has no address (NODATA for A and AAAA).
    deliveryDns.set('hooks.slow-dns.test', { kind: 'answer' });
    deliveryDns.release('hooks.slow-dns.test');
    await delivering.settle();
    const slowRows = (await delivering.events.list({ merchantId: slow.merchantId, limit: 10 })).rows;
    expect(slowRows).toHaveLength(6);
    for (const row of slowRows)
      expect(row).toMatchObject({ attemptCount: 1, lastError: 'dns_error', deliveryStatus: 'failed' });
    // At most one A and one AAAA per delivery, fewer where deliveries shared one (host-resolver.int.spec proves the
    // sharing); a second try of c-ares only if the release came after its first try's 5 s.
    const askedAtDelivery = deliveryDns.queries.filter((q) => q.name === 'hooks.slow-dns.test').length;
    expect(askedAtDelivery).toBeLessThanOrEqual(2 * 6);
    expect(receiver.on('/slow')).toHaveLength(0);
  });
});
