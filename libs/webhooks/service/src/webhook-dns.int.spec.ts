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
 * (the resolver's, the attempt's, the lease) cannot pass. c-ares's can: it adapts each try's timeout to the latency
 * it measured of the server (here ~1 ms, at save), so a held query ends as ETIMEOUT after ~2 s (two tries of ~1 s,
 * node checks them on a one-second tick) however long the configured timeout (measured with c-ares 1.34.6: 1,200,000
 * ms configured). On a loaded machine some slow deliveries may so end as `dns_error` before the fine one is made;
 * none is ever delivered, and none holds the fine one up. That a name never answered ends as a `dns_error` at the
 * resolver's deadline is webhook-http-sender.int.spec's.
 */
/** Longer than any run of this file: a deadline the test never reaches. */
const UNREACHED_MS = 3_600_000;

describe('webhook delivery while a merchant’s DNS does not answer', () => {
  const clock = new ManualClock('2026-11-02T00:00:00.000Z');
  const dnsServer = new FakeDnsServer()
    .set('hooks.slow-dns.test', { kind: 'answer', a: ['93.184.216.34'] })
    .set('hooks.fine-dns.test', { kind: 'answer', a: ['93.184.216.35'] });
  const receiver = new TestReceiver();
  let db: TestDatabase;
  let stack: WebhookStack;

  beforeAll(async () => {
    [db] = await Promise.all([createTestDatabase(), receiver.start(), dnsServer.start()]);
    stack = await startWebhookStack({
      databaseUrl: db.url,
      clock,
      webhookDns: new HostResolver({ timeoutMs: UNREACHED_MS, servers: [dnsServer.server] }),
      dispatch: {
        pollIntervalMs: 60_000,
        concurrency: 4,
        perMerchantConcurrency: 2,
        leaseMs: 3 * UNREACHED_MS,
        policy: { jitterRatio: 0, responseDeadlineMs: UNREACHED_MS },
      },
    });
  });

  afterAll(async () => {
    await stack?.stop();
    await Promise.all([receiver.stop(), dnsServer.stop(), db?.drop()]);
  });

  it("delivers another merchant's event while the slow merchant's deliveries wait on DNS; those end as dns_error", async () => {
    const port = new URL(receiver.url()).port;
    const slow = await stack.createMerchant('Slow DNS');
    const fine = await stack.createMerchant('Fine DNS');
    // Both names resolve to public addresses when saved; then the slow merchant's name server stops answering
    // (until released), and the fine one's points at the local receiver (loopback is admitted at send time:
    // ALLOW_LOCAL_WEBHOOKS).
    await stack.configureWebhook(slow.merchantId, `https://hooks.slow-dns.test:${port}/slow`);
    await stack.configureWebhook(fine.merchantId, `https://hooks.fine-dns.test:${port}/fine`);
    dnsServer.set('hooks.slow-dns.test', { kind: 'hold' });
    dnsServer.set('hooks.fine-dns.test', { kind: 'answer', a: ['127.0.0.1'] });
    const queriedAtSave = dnsServer.queries.filter((q) => q.name === 'hooks.slow-dns.test').length;

    for (let i = 0; i < 6; i++)
      await stack.emit(slow.merchantId, 'TestChargeSucceeded.v1', { chargeId: `subc_slow${i}`, amount: '1' });
    await stack.recorder.caughtUp();
    stack.dispatcher.wake();
    await dnsServer.queried('hooks.slow-dns.test');
    await eventually(
      async () => dnsServer.queries.filter((q) => q.name === 'hooks.slow-dns.test').length,
      (n) => n > queriedAtSave,
      'the slow merchant’s name asked at delivery',
    );

    await stack.emit(fine.merchantId, 'TestChargeSucceeded.v1', { chargeId: 'subc_fine', amount: '1' });
    await stack.recorder.caughtUp();
    stack.dispatcher.wake();
    const [fineRow] = (
      await eventually(
        () => stack.events.list({ merchantId: fine.merchantId, limit: 10 }),
        ({ rows }) => rows[0]?.attemptCount === 1,
        'the fine merchant’s attempt',
        { timeoutMs: 30_000, intervalMs: 20 },
      )
    ).rows;
    // Resolved and connected: the TLS handshake then fails against the plain-HTTP receiver.
    expect(fineRow).toMatchObject({ lastError: 'tls_error' });
    const slowMeanwhile = (await stack.events.list({ merchantId: slow.merchantId, limit: 10 })).rows;
    expect(slowMeanwhile).toHaveLength(6);
    // Still waiting on DNS, or given up by c-ares's adaptive timeout (see above): never anything else.
    for (const row of slowMeanwhile.filter((r) => r.attemptCount > 0))
      expect(row).toMatchObject({ attemptCount: 1, lastError: 'dns_error' });
    expect(receiver.on('/slow')).toHaveLength(0);
    expect(dnsServer.heldQueries('hooks.slow-dns.test').length).toBeGreaterThan(0);

    // The name server answers at last: the name has no address (NODATA for A and AAAA).
    dnsServer.set('hooks.slow-dns.test', { kind: 'answer' });
    dnsServer.release('hooks.slow-dns.test');
    await stack.settle();
    const slowRows = (await stack.events.list({ merchantId: slow.merchantId, limit: 10 })).rows;
    expect(slowRows).toHaveLength(6);
    for (const row of slowRows)
      expect(row).toMatchObject({ attemptCount: 1, lastError: 'dns_error', deliveryStatus: 'failed' });
    // At most two tries (the resolver's `tries`) of one A and one AAAA per delivery, fewer where deliveries shared
    // one (host-resolver.int.spec proves the sharing).
    const askedAtDelivery =
      dnsServer.queries.filter((q) => q.name === 'hooks.slow-dns.test').length - queriedAtSave;
    expect(askedAtDelivery).toBeLessThanOrEqual(2 * 2 * 6);
    expect(receiver.on('/slow')).toHaveLength(0);
  });
});
