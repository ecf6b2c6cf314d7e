import { Resolver } from 'node:dns/promises';

export interface ResolvedAddress {
  readonly address: string;
  readonly family: 4 | 6;
}

export interface HostResolverOptions {
  /** Longest one name's resolution (A and AAAA together) may take; a name not answered by then fails. */
  readonly timeoutMs: number;
  /**
   * DNS servers as `ip`, `ip:port` or `[ipv6]:port`. Absent: the system's (c-ares reads /etc/resolv.conf).
   * Tests point this at a local server.
   */
  readonly servers?: readonly string[];
}

/** A name that did not resolve: `code` is c-ares's (ENOTFOUND, ENODATA, ESERVFAIL, ...) or ETIMEOUT. */
export class HostResolutionError extends Error {
  constructor(
    readonly hostname: string,
    readonly code: string,
  ) {
    super(`${hostname} did not resolve (${code})`);
    this.name = 'HostResolutionError';
  }

  get timedOut(): boolean {
    return this.code === 'ETIMEOUT';
  }
}

/**
 * `localhost` is answered here, never asked of DNS: c-ares does not read /etc/hosts, and RFC 6761 reserves the
 * name for loopback, so no server may say otherwise. IPv4 first: local receivers mostly listen there.
 */
const LOCALHOST: readonly ResolvedAddress[] = [
  { address: '127.0.0.1', family: 4 },
  { address: '::1', family: 6 },
];

/**
 * How long the other family (A or AAAA) is waited for once one has answered with addresses. A server that drops
 * one type's queries (AAAA, mostly) otherwise cost every resolution of the name the full deadline: half of each
 * delivery's 10 s. A healthy server answers both within a round trip of each other; Happy Eyeballs
 * (RFC 8305, section 3) waits only 50 ms for AAAA after A. 250 ms leaves room for a slow but working server.
 */
const OTHER_FAMILY_GRACE_MS = 250;

function codeOf(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : 'EBADNAME';
}

/**
 * Resolves names for outbound connections to addresses of other parties (merchants' webhook URLs) through c-ares
 * (`dns.Resolver`), never `dns.lookup`: getaddrinfo runs on libuv's four pool threads without a deadline, so one
 * party's name server that never answers held every thread, and every other party's resolutions (and the
 * process's fs and crypto work) queued behind it. Here a resolution holds no thread, ends by `timeoutMs`, and
 * concurrent resolutions of one name share one query, so many deliveries to one slow name cost one query.
 */
export class HostResolver {
  private readonly resolver: Resolver;
  private readonly inFlight = new Map<string, Promise<ResolvedAddress[]>>();

  constructor(private readonly options: HostResolverOptions) {
    if (!Number.isInteger(options.timeoutMs) || options.timeoutMs < 1)
      throw new Error('HostResolver timeoutMs must be a positive integer');
    // Two tries of a third of the deadline each, so an unanswered query is given up by c-ares soon after the
    // deadline rather than minutes later. c-ares's own timeouts are not precise here: node checks them on a
    // one-second tick, so the tries end later than their nominal t (measured with c-ares 1.34.6: timeout 1,666 ms
    // and 2 tries gave up after ~5 s, timeout 500 ms and 3 tries after ~3.5 s). And c-ares shortens each try to a
    // multiple of the latency it has measured of the server (5 times the average once the server gave 3 answers in
    // the current or previous minute, at least 250 ms): a query a fast server leaves unanswered is given up after
    // ~2 s even with 1,200,000 ms configured. Before any such answer a try gets the configured timeout, capped by
    // c-ares at 5 s (node 20's Resolver cannot raise the cap): ~14 s for two tries. The timer in `query` ends the
    // resolution at the deadline whatever c-ares does; a query c-ares is still retrying then cannot be cancelled
    // alone (`Resolver.cancel` ends every query in flight), so its late answer is dropped.
    this.resolver = new Resolver({ timeout: Math.max(1, Math.floor(options.timeoutMs / 3)), tries: 2 });
    if (options.servers !== undefined) this.resolver.setServers([...options.servers]);
  }

  /** IPv4 then IPv6 addresses of a name (no literal addresses: callers connect to those directly). */
  resolve(hostname: string): Promise<ResolvedAddress[]> {
    const name = hostname.toLowerCase().replace(/\.$/, '');
    if (name === 'localhost') return Promise.resolve(LOCALHOST.map((a) => ({ ...a })));
    const shared = this.inFlight.get(name);
    if (shared) return shared.then((addresses) => addresses.map((a) => ({ ...a })));
    const query = this.query(name).finally(() => {
      if (this.inFlight.get(name) === query) this.inFlight.delete(name);
    });
    this.inFlight.set(name, query);
    return query.then((addresses) => addresses.map((a) => ({ ...a })));
  }

  /**
   * A and AAAA in parallel. Once one family has answered with addresses, the other is waited for only
   * OTHER_FAMILY_GRACE_MS (a server that drops AAAA queries neither makes a name with an A record fail nor costs
   * it the deadline); with no address by the deadline, ETIMEOUT. What is returned is all that is used: answers
   * after the end are dropped, so the addresses the caller vets are the ones it connects to.
   */
  private query(name: string): Promise<ResolvedAddress[]> {
    return new Promise<ResolvedAddress[]>((resolve, reject) => {
      const found: ResolvedAddress[][] = [[], []];
      const codes: string[] = [];
      let pending = 2;
      let done = false;
      let grace: ReturnType<typeof setTimeout> | undefined;
      const end = (timedOut: boolean) => {
        done = true;
        clearTimeout(timer);
        clearTimeout(grace);
        const addresses = [...(found[0] ?? []), ...(found[1] ?? [])];
        if (addresses.length > 0) resolve(addresses);
        else reject(new HostResolutionError(name, timedOut ? 'ETIMEOUT' : preferredCode(codes)));
      };
      const timer = setTimeout(() => end(true), this.options.timeoutMs);
      const settle = (index: 0 | 1, addresses: ResolvedAddress[] | null, error?: unknown) => {
        if (done) return;
        if (addresses) found[index] = addresses;
        else codes.push(codeOf(error));
        if (--pending === 0) end(false);
        else if (addresses && addresses.length > 0)
          grace = setTimeout(() => end(false), OTHER_FAMILY_GRACE_MS);
      };
      const ask = (family: 4 | 6) =>
        (family === 4 ? this.resolver.resolve4(name) : this.resolver.resolve6(name)).then(
          (list) =>
            settle(
              family === 4 ? 0 : 1,
              list.map((address) => ({ address, family })),
            ),
          (error: unknown) => settle(family === 4 ? 0 : 1, null, error),
        );
      try {
        void ask(4);
        void ask(6);
      } catch (error) {
        // A name c-ares refuses outright (not a DNS name) throws instead of rejecting.
        done = true;
        clearTimeout(timer);
        reject(new HostResolutionError(name, codeOf(error)));
      }
    });
  }
}

/** The code that says most: a timeout over a missing record type, a missing record type last. */
function preferredCode(codes: readonly string[]): string {
  if (codes.includes('ETIMEOUT')) return 'ETIMEOUT';
  return codes.find((c) => c !== 'ENODATA') ?? codes[0] ?? 'ENODATA';
}
