import { execFileSync } from 'node:child_process';
import { constants, open as openCallback, openSync, closeSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FakeDnsServer } from './fake-dns-server';
import { HostResolutionError, HostResolver } from './host-resolver';

/**
 * Occupies every libuv pool thread: each open(2) of a FIFO for reading blocks in a pool thread until a writer
 * opens it. Released by opening the FIFO read-write (never blocks on Linux, and counts as the writer).
 */
async function withPoolBlocked<T>(work: () => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), 'pool-block-'));
  const fifo = join(dir, 'fifo');
  execFileSync('mkfifo', [fifo]);
  const threads = Number(process.env['UV_THREADPOOL_SIZE'] ?? 4);
  const readers = Array.from(
    { length: threads },
    () =>
      new Promise<number>((resolve, reject) =>
        openCallback(fifo, constants.O_RDONLY, (error, fd) => (error ? reject(error) : resolve(fd))),
      ),
  );
  try {
    return await work();
  } finally {
    const writer = openSync(fifo, constants.O_RDWR);
    for (const fd of await Promise.all(readers)) closeSync(fd);
    closeSync(writer);
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('HostResolver', () => {
  const dns = new FakeDnsServer()
    .set('hooks.good.test', { kind: 'answer', a: ['93.184.216.34'], aaaa: ['2606:2800:220:1::248'] })
    .set('v4only.good.test', { kind: 'answer', a: ['93.184.216.35'] })
    .set('slow.evil.test', { kind: 'blackhole' })
    .set('no-aaaa.good.test', {
      kind: 'answer',
      a: ['93.184.216.36'],
      aaaa: ['2606:2800:220:1::249'],
      hold: 'aaaa',
    });
  let resolver: HostResolver;

  beforeAll(async () => {
    await dns.start();
    resolver = new HostResolver({ timeoutMs: 1_500, servers: [dns.server] });
  });
  afterAll(() => dns.stop());

  it('resolves A and AAAA from the configured servers, IPv4 first', async () => {
    await expect(resolver.resolve('hooks.good.test')).resolves.toEqual([
      { address: '93.184.216.34', family: 4 },
      { address: '2606:2800:220:1::248', family: 6 },
    ]);
    await expect(resolver.resolve('V4ONLY.good.test.')).resolves.toEqual([
      { address: '93.184.216.35', family: 4 },
    ]);
  });

  it('fails an unknown name with ENOTFOUND', async () => {
    await expect(resolver.resolve('nowhere.good.test')).rejects.toMatchObject({
      name: 'HostResolutionError',
      code: 'ENOTFOUND',
    });
  });

  it('answers localhost with loopback without asking DNS (c-ares reads no /etc/hosts)', async () => {
    const before = dns.queries.length;
    await expect(resolver.resolve('LocalHost.')).resolves.toEqual([
      { address: '127.0.0.1', family: 4 },
      { address: '::1', family: 6 },
    ]);
    expect(dns.queries.length).toBe(before);
  });

  it('resolves other names while a black-holed one is pending, and times the black-holed one out', async () => {
    const order: string[] = [];
    const slow = resolver.resolve('slow.evil.test').then(
      () => order.push('slow resolved'),
      (error: unknown) => {
        order.push('slow failed');
        return error;
      },
    );
    await dns.queried('slow.evil.test');
    await resolver.resolve('hooks.good.test');
    order.push('good resolved');
    const error = await slow;
    expect(order).toEqual(['good resolved', 'slow failed']);
    expect(error).toBeInstanceOf(HostResolutionError);
    expect(error).toMatchObject({ code: 'ETIMEOUT', timedOut: true });
  });

  it('shares one query among concurrent resolutions of one name', async () => {
    const queriesBefore = dns.queries.filter((q) => q.name === 'slow.evil.test').length;
    const all = await Promise.allSettled(
      Array.from({ length: 20 }, () => resolver.resolve('slow.evil.test')),
    );
    expect(all.every((r) => r.status === 'rejected')).toBe(true);
    const queries = dns.queries.filter((q) => q.name === 'slow.evil.test').length - queriesBefore;
    // One A and one AAAA query, each sent at most twice (tries: 2): not 20 of each.
    expect(queries).toBeGreaterThanOrEqual(2);
    expect(queries).toBeLessThanOrEqual(4);
  });

  // The deadline is one no run reaches. Without the grace the resolution waits until c-ares gives the AAAA query
  // up, after its second try (tries: 2), so the server would have held two AAAA queries, not one (or jest's
  // timeout ends the test).
  it('answers with the A addresses when the server drops AAAA queries, without waiting for the deadline', async () => {
    const patient = new HostResolver({ timeoutMs: 3_600_000, servers: [dns.server] });
    try {
      await expect(patient.resolve('no-aaaa.good.test')).resolves.toEqual([
        { address: '93.184.216.36', family: 4 },
      ]);
      expect(dns.heldQueries('no-aaaa.good.test')).toEqual([{ name: 'no-aaaa.good.test', type: 28 }]);
    } finally {
      // Answers the held AAAA query, so c-ares keeps no query of this test open.
      dns.set('no-aaaa.good.test', { kind: 'answer', a: ['93.184.216.36'] }).release('no-aaaa.good.test');
    }
  }, 30_000);

  it('uses no libuv pool thread: it resolves while every pool thread is blocked', async () => {
    const addresses = await withPoolBlocked(() => resolver.resolve('hooks.good.test'));
    expect(addresses[0]).toEqual({ address: '93.184.216.34', family: 4 });
  });
});
