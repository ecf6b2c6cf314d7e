import { FakeDnsServer, HostResolver } from '@stablepay/node-util';
import { eventually, type TestDatabase } from '@stablepay/testing';
import { ManualClock } from '@stablepay/util';
import { TestReceiver } from './testing/test-receiver';
import { createWebhookTestDatabase as createTestDatabase } from './testing/webhook-test-database';
import { startWebhookStack, type WebhookStack } from './testing/webhook-stack';

/**
 * One merchant's name server black-holes queries: its deliveries hold at most its own slots
 * (WEBHOOK_CONCURRENCY_PER_MERCHANT) and one DNS query in flight, another merchant's delivery is resolved and made
 * meanwhile, and the black-holed ones end as `dns_error` attempts at the resolver's deadline. The dispatcher uses
 * the merchants config's resolver, the one the URL was checked with at save.
 */
describe('webhook delivery when a merchant’s DNS never answers', () => {
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
      webhookDns: new HostResolver({ timeoutMs: 3_000, servers: [dnsServer.server] }),
      dispatch: {
        pollIntervalMs: 60_000,
        concurrency: 4,
        perMerchantConcurrency: 2,
        policy: { jitterRatio: 0, responseDeadlineMs: 5_000 },
      },
    });
  });

  afterAll(async () => {
    await stack?.stop();
    await Promise.all([receiver.stop(), dnsServer.stop(), db?.drop()]);
  });

  it("delivers another merchant's event while the black-holed deliveries are pending; those end as dns_error", async () => {
    const port = new URL(receiver.url()).port;
    const slow = await stack.createMerchant('Slow DNS');
    const fine = await stack.createMerchant('Fine DNS');
    // Both names resolve to public addresses when saved; then the slow merchant's name server stops answering,
    // and the fine one's points at the local receiver (loopback is admitted at send time: ALLOW_LOCAL_WEBHOOKS).
    await stack.configureWebhook(slow.merchantId, `https://hooks.slow-dns.test:${port}/slow`);
    await stack.configureWebhook(fine.merchantId, `https://hooks.fine-dns.test:${port}/fine`);
    dnsServer.set('hooks.slow-dns.test', { kind: 'blackhole' });
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
    expect(slowMeanwhile.map((r) => r.attemptCount)).toEqual([0, 0, 0, 0, 0, 0]);

    await stack.settle();
    const slowRows = (await stack.events.list({ merchantId: slow.merchantId, limit: 10 })).rows;
    expect(slowRows).toHaveLength(6);
    for (const row of slowRows)
      expect(row).toMatchObject({ attemptCount: 1, lastError: 'dns_error', deliveryStatus: 'failed' });
    // Deliveries waiting on one name share its query: A and AAAA, each tried at most twice.
    const askedAtDelivery =
      dnsServer.queries.filter((q) => q.name === 'hooks.slow-dns.test').length - queriedAtSave;
    expect(askedAtDelivery).toBeLessThanOrEqual(2 * 2 * 3);
    expect(receiver.on('/slow')).toHaveLength(0);
  });
});
