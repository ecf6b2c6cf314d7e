import type { LookupAddress } from 'node:dns';
import { FakeDnsServer, HostResolver } from '@stablepay/node-util';
import { TestReceiver } from '../testing/test-receiver';
import { admittedAddresses, checkWebhookTarget } from './egress-policy';
import { WebhookHttpSender, type WebhookHttpSenderOptions } from './webhook-http-sender';

/**
 * The webhook HTTP client against a real loopback receiver: SSRF egress policy at send time (literal addresses,
 * resolved names, IPv4-mapped IPv6, DNS answers that change), the vetted address pinned for the connection,
 * redirects not followed, the deadline, and the response read limit.
 */
const body = Buffer.from('{"id":"evt_x"}');
const headers = { 'content-type': 'application/json' };

function answer(...addresses: string[]): () => Promise<LookupAddress[]> {
  return async () => addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
}

describe('egress policy (SPEC: publicly reachable HTTPS only, checked again at send time)', () => {
  const strict = { allowLoopback: false };

  it.each([
    'https://127.0.0.1/hook',
    'https://[::1]/hook',
    'https://[::ffff:127.0.0.1]/hook',
    'https://[::ffff:7f00:1]/hook',
    'https://10.1.2.3/hook',
    'https://172.16.0.1/hook',
    'https://192.168.1.1/hook',
    'https://169.254.169.254/latest/meta-data',
    'https://100.64.0.1/hook',
    'https://224.0.0.1/hook',
    'https://240.0.0.1/hook',
    'https://192.0.2.10/hook',
    'https://198.51.100.1/hook',
    'https://203.0.113.1/hook',
    'https://[fd00::1]/hook',
    'https://[fe80::1]/hook',
    'https://[2001:db8::1]/hook',
    'https://0.0.0.0/hook',
  ])('refuses the literal %s', (url) => {
    expect(checkWebhookTarget(url, strict)).toMatchObject({ ok: false, code: 'blocked_address' });
  });

  it('admits a public literal and any https name (the name is vetted when resolved)', () => {
    expect(checkWebhookTarget('https://8.8.8.8/hook', strict)).toMatchObject({
      ok: true,
      literal: { address: '8.8.8.8', family: 4 },
    });
    expect(checkWebhookTarget('https://hooks.example.com/x', strict)).toMatchObject({
      ok: true,
      literal: null,
    });
  });

  it.each([
    'http://hooks.example.com/x',
    'ftp://hooks.example.com/x',
    'https://user:pw@hooks.example.com/x',
    'not a url',
  ])('refuses %s as invalid_url', (url) => {
    expect(checkWebhookTarget(url, strict)).toMatchObject({ ok: false, code: 'invalid_url' });
  });

  it('ALLOW_LOCAL_WEBHOOKS admits loopback, http included, and nothing else private', () => {
    const local = { allowLoopback: true };
    expect(checkWebhookTarget('http://127.0.0.1:8080/x', local)).toMatchObject({ ok: true });
    expect(checkWebhookTarget('http://localhost:8080/x', local)).toMatchObject({ ok: true });
    expect(checkWebhookTarget('http://[::ffff:127.0.0.1]:8080/x', local)).toMatchObject({
      ok: true,
      literal: { address: '127.0.0.1' },
    });
    expect(checkWebhookTarget('https://10.0.0.1/x', local)).toMatchObject({
      ok: false,
      code: 'blocked_address',
    });
    expect(checkWebhookTarget('http://hooks.example.com/x', local)).toMatchObject({
      ok: false,
      code: 'invalid_url',
    });
  });

  it('drops every non-public answer, canonicalising IPv4-mapped IPv6 first', () => {
    const answers: LookupAddress[] = [
      { address: '10.0.0.1', family: 4 },
      { address: '::ffff:127.0.0.1', family: 6 },
      { address: '::ffff:169.254.169.254', family: 6 },
      { address: '93.184.216.34', family: 4 },
      { address: '2606:2800:220:1:248:1893:25c8:1946', family: 6 },
      { address: 'fd12::1', family: 6 },
    ];
    expect(admittedAddresses(answers, { allowLoopback: false }).map((a) => a.address)).toEqual([
      '93.184.216.34',
      '2606:2800:220:1:248:1893:25c8:1946',
    ]);
    expect(admittedAddresses(answers, { allowLoopback: true }).map((a) => a.address)).toEqual([
      '127.0.0.1',
      '93.184.216.34',
      '2606:2800:220:1:248:1893:25c8:1946',
    ]);
  });
});

describe('WebhookHttpSender against a real receiver', () => {
  const receiver = new TestReceiver();
  /** Two merchants' names: one answered, one whose name server black-holes every query. */
  const dnsServer = new FakeDnsServer()
    .set('hooks.merchant-b.test', { kind: 'answer', a: ['127.0.0.1'] })
    .set('hooks.merchant-a.test', { kind: 'blackhole' })
    .set('hooks.merchant-c.test', { kind: 'hold' });
  let dns: HostResolver;
  const senders: WebhookHttpSender[] = [];
  const sender = (over: Partial<WebhookHttpSenderOptions> = {}) => {
    const s = new WebhookHttpSender({
      allowLoopback: true,
      maxResponseBytes: 16 * 1024,
      excerptBytes: 64,
      resolveAll: (hostname) => dns.resolve(hostname),
      ...over,
    });
    senders.push(s);
    return s;
  };

  beforeAll(async () => {
    await receiver.start();
    await dnsServer.start();
    dns = new HostResolver({ timeoutMs: 2_000, servers: [dnsServer.server] });
  });

  afterAll(async () => {
    for (const s of senders) s.close();
    await receiver.stop();
    await dnsServer.stop();
  });

  it('delivers to http://localhost with ALLOW_LOCAL_WEBHOOKS (answered without DNS: c-ares reads no /etc/hosts)', async () => {
    const port = new URL(receiver.url()).port;
    const outcome = await sender().send({
      url: `http://localhost:${port}/by-name`,
      body,
      headers,
      timeoutMs: 2000,
    });
    expect(outcome).toMatchObject({ kind: 'response', status: 204 });
    expect(dnsServer.queries.filter((q) => q.name === 'localhost')).toEqual([]);
  });

  it("one merchant's unanswered DNS holds nothing another merchant needs", async () => {
    const port = new URL(receiver.url()).port;
    // No deadline can pass while the test looks: merchant c's name server answers only when the test says.
    const patient = new HostResolver({ timeoutMs: 3_600_000, servers: [dnsServer.server] });
    const s = sender({ resolveAll: (hostname) => patient.resolve(hostname) });
    let slowSettled = false;
    const slow = s
      .send({ url: `https://hooks.merchant-c.test:${port}/c`, body, headers, timeoutMs: 3_600_000 })
      .finally(() => (slowSettled = true));
    await dnsServer.queried('hooks.merchant-c.test');
    // https to a name only the test's DNS server knows, resolving to the plain-HTTP receiver: the connection is
    // made (its TLS handshake then fails), so the name was resolved while merchant c's was pending.
    const other = await s.send({
      url: `https://hooks.merchant-b.test:${port}/b`,
      body,
      headers,
      timeoutMs: 3_600_000,
    });
    expect(other).toMatchObject({ kind: 'network_error', code: 'tls_error' });
    expect(slowSettled).toBe(false);
    expect(dnsServer.heldQueries('hooks.merchant-c.test').length).toBeGreaterThan(0);

    dnsServer.set('hooks.merchant-c.test', { kind: 'answer' });
    dnsServer.release('hooks.merchant-c.test');
    expect(await slow).toMatchObject({ kind: 'network_error', code: 'dns_error' });
    expect(receiver.on('/c')).toHaveLength(0);
  });

  it('a name whose server never answers ends as a dns_error at the resolver deadline', async () => {
    const port = new URL(receiver.url()).port;
    const outcome = await sender().send({
      url: `https://hooks.merchant-a.test:${port}/a`,
      body,
      headers,
      timeoutMs: 3_600_000,
    });
    expect(outcome).toMatchObject({ kind: 'network_error', code: 'dns_error', detail: 'ETIMEOUT' });
    expect(receiver.on('/a')).toHaveLength(0);
  });

  it('posts the exact bytes with the given headers and reports a 2xx', async () => {
    const outcome = await sender().send({ url: receiver.url('/ok'), body, headers, timeoutMs: 2000 });
    expect(outcome).toMatchObject({ kind: 'response', status: 204 });
    const [got] = receiver.on('/ok');
    expect(got?.rawBody.equals(body)).toBe(true);
    expect(got?.headers['content-type']).toBe('application/json');
  });

  it('connects to the address its own lookup vetted (a name the system cannot resolve reaches the receiver)', async () => {
    const port = new URL(receiver.url()).port;
    const outcome = await sender({ resolveAll: answer('10.0.0.7', '127.0.0.1') }).send({
      url: `http://localhost:${port}/pinned`,
      body,
      headers,
      timeoutMs: 2000,
    });
    expect(outcome).toMatchObject({ kind: 'response', status: 204 });
    const resolved: string[] = [];
    const named = sender({
      resolveAll: async (hostname) => {
        resolved.push(hostname);
        return answer('192.168.0.9', '127.0.0.1')();
      },
    });
    // https to a name only this lookup knows, whose one admitted address is loopback: the connection is made (the
    // TLS handshake then fails against the plain-HTTP receiver) - not a DNS error, and the private answer unused.
    const tls = await named.send({
      url: `https://hooks.rebind.test:${port}/tls`,
      body,
      headers,
      timeoutMs: 2000,
    });
    expect(tls).toMatchObject({ kind: 'network_error', code: 'tls_error' });
    expect(resolved).toEqual(['hooks.rebind.test']);
    expect(receiver.on('/tls')).toHaveLength(0);
  });

  it('DNS rebinding: a name that now resolves to private or loopback addresses only is refused before connecting', async () => {
    const port = new URL(receiver.url()).port;
    for (const addresses of [
      ['127.0.0.1'],
      ['10.0.0.1', '::ffff:127.0.0.1'],
      ['169.254.169.254'],
      ['100.64.1.1', 'fd00::2'],
    ]) {
      const strict = sender({ allowLoopback: false, resolveAll: answer(...addresses) });
      const outcome = await strict.send({
        url: `https://hooks.example.com:${port}/rebind`,
        body,
        headers,
        timeoutMs: 2000,
      });
      expect(outcome).toMatchObject({ kind: 'refused', code: 'blocked_address' });
    }
    expect(receiver.on('/rebind')).toHaveLength(0);
  });

  it('refuses loopback literals when local webhooks are not allowed', async () => {
    const outcome = await sender({ allowLoopback: false }).send({
      url: receiver.url('/strict'),
      body,
      headers,
      timeoutMs: 2000,
    });
    expect(outcome).toMatchObject({ kind: 'refused', code: 'invalid_url' });
    const https = await sender({ allowLoopback: false }).send({
      url: 'https://[::ffff:127.0.0.1]/x',
      body,
      headers,
      timeoutMs: 2000,
    });
    expect(https).toMatchObject({ kind: 'refused', code: 'blocked_address' });
    expect(receiver.on('/strict')).toHaveLength(0);
  });

  it('does not follow redirects: the 3xx is the outcome and the target is never requested', async () => {
    receiver.script('/moved', { kind: 'redirect', status: 307, location: receiver.url('/target') });
    const outcome = await sender().send({ url: receiver.url('/moved'), body, headers, timeoutMs: 2000 });
    expect(outcome).toMatchObject({ kind: 'response', status: 307 });
    expect(receiver.on('/target')).toHaveLength(0);
  });

  it('times out a receiver that does not answer within the deadline', async () => {
    receiver.script('/hang', { kind: 'hang' });
    const started = Date.now();
    const outcome = await sender().send({ url: receiver.url('/hang'), body, headers, timeoutMs: 300 });
    expect(outcome).toMatchObject({ kind: 'timeout' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it('a status that arrived in time counts even if the body is still trickling at the deadline', async () => {
    receiver.script('/slow-body', { kind: 'slow-body', status: 200, ms: 5_000 });
    const outcome = await sender().send({ url: receiver.url('/slow-body'), body, headers, timeoutMs: 300 });
    expect(outcome).toMatchObject({ kind: 'response', status: 200, bodyExcerpt: 'partial' });
  });

  it('a closed connection is a network error', async () => {
    receiver.script('/close', { kind: 'close' });
    expect(
      await sender().send({ url: receiver.url('/close'), body, headers, timeoutMs: 2000 }),
    ).toMatchObject({ kind: 'network_error', code: 'network_error' });
  });

  it('a kept-alive connection closed after the request was read is a network error, and the request is not sent again', async () => {
    const s = sender();
    expect(await s.send({ url: receiver.url('/warm'), body, headers, timeoutMs: 2000 })).toBeDefined();
    receiver.script('/dropped', { kind: 'close' });
    const outcome = await s.send({ url: receiver.url('/dropped'), body, headers, timeoutMs: 2000 });
    expect(outcome).toMatchObject({ kind: 'network_error', code: 'network_error' });
    expect(receiver.on('/dropped')).toHaveLength(1);
  });

  it('keeps connections alive between deliveries to one endpoint', async () => {
    const s = sender();
    for (let i = 0; i < 10; i++)
      expect(await s.send({ url: receiver.url('/reuse'), body, headers, timeoutMs: 2000 })).toMatchObject({
        kind: 'response',
        status: 204,
      });
    const ports = new Set(receiver.on('/reuse').map((r) => r.remotePort));
    // Not one connection per delivery (undici's pool alternates between two for back-to-back sends: the next send
    // is dispatched before the connection that answered the last one is marked free).
    expect(ports.size).toBeLessThanOrEqual(2);
  });

  it('a refused connection is a network error', async () => {
    const outcome = await sender().send({
      url: 'http://127.0.0.1:1/nothing',
      body,
      headers,
      timeoutMs: 2000,
    });
    expect(outcome).toMatchObject({ kind: 'network_error', code: 'network_error', detail: 'ECONNREFUSED' });
  });

  it('reads the response up to the limit and keeps only a short excerpt', async () => {
    receiver.script('/big', { kind: 'big', bytes: 1024 * 1024 });
    const outcome = await sender().send({ url: receiver.url('/big'), body, headers, timeoutMs: 2000 });
    expect(outcome).toMatchObject({ kind: 'response', status: 200 });
    if (outcome.kind !== 'response') throw new Error('no response');
    expect(outcome.bodyExcerpt).toBe('x'.repeat(64));
  });
});
