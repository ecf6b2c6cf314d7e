import type { LookupAddress, LookupOptions } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import { canonicalIp, isLoopbackAddress, isPublicAddress } from '@stablepay/node-util';

/**
 * SPEC Settings (the webhook URL must be a publicly reachable HTTPS address), enforced again at send time:
 * - https only; `http:` only for loopback targets when ALLOW_LOCAL_WEBHOOKS=true (local development, tests);
 * - a literal address must be public (IPv4-mapped IPv6 such as `[::ffff:127.0.0.1]` is canonicalised first);
 * - a name is resolved HERE, every private, loopback, link-local, shared (100.64/10), multicast, reserved,
 *   documentation, unique-local and metadata address is dropped (`isPublicAddress`), and the socket connects
 *   only to an address that survived: the resolution that was vetted is the one connected to, so a DNS answer
 *   that changes between check and connect (rebinding) cannot slip a private address through.
 */
export interface EgressPolicy {
  /** ALLOW_LOCAL_WEBHOOKS=true: admit loopback targets, `http:` included. */
  readonly allowLoopback: boolean;
}

/**
 * Every address of a name. Production's is `HostResolver.resolve` (c-ares with a deadline, never `dns.lookup`:
 * getaddrinfo holds one of libuv's four pool threads for as long as a merchant's name server keeps silent, so a
 * few slow names stalled every merchant's deliveries; see @stablepay/node-util host-resolver.ts).
 */
export type ResolveAll = (hostname: string) => Promise<LookupAddress[]>;

export type TargetCheck =
  | {
      readonly ok: true;
      readonly url: URL;
      /** The host without IPv6 brackets. */
      readonly hostname: string;
      /** Set when the URL names an address: it is connected to directly (already vetted). */
      readonly literal: { readonly address: string; readonly family: 4 | 6 } | null;
    }
  | { readonly ok: false; readonly code: 'invalid_url' | 'blocked_address'; readonly detail: string };

export class BlockedAddressError extends Error {
  readonly code = 'EWEBHOOKBLOCKED';
  constructor(hostname: string) {
    super(`${hostname} resolves to no public address`);
    this.name = 'BlockedAddressError';
  }
}

function admitted(address: string, policy: EgressPolicy): boolean {
  return isPublicAddress(address, { allowLoopback: policy.allowLoopback });
}

/** Checks a webhook URL before any connection: scheme, credentials, literal addresses. */
export function checkWebhookTarget(raw: string, policy: EgressPolicy): TargetCheck {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, code: 'invalid_url', detail: 'not an absolute URL' };
  }
  if (url.username || url.password)
    return { ok: false, code: 'invalid_url', detail: 'credentials in the URL' };
  const hostname = url.hostname.replace(/^\[|\]$/g, '');
  const canonical = canonicalIp(hostname);
  const family = isIP(canonical);
  const loopbackTarget = family !== 0 ? isLoopbackAddress(canonical) : /^localhost$/i.test(hostname);
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && policy.allowLoopback && loopbackTarget)) {
    return { ok: false, code: 'invalid_url', detail: `scheme ${url.protocol} is not allowed (https only)` };
  }
  if (family === 0) return { ok: true, url, hostname, literal: null };
  if (!admitted(canonical, policy))
    return { ok: false, code: 'blocked_address', detail: `${canonical} is not a public address` };
  return { ok: true, url, hostname, literal: { address: canonical, family: family === 4 ? 4 : 6 } };
}

/** The addresses of one answer that may be connected to, canonicalised (IPv4-mapped IPv6 becomes IPv4). */
export function admittedAddresses(
  addresses: readonly LookupAddress[],
  policy: EgressPolicy,
  family?: number,
): LookupAddress[] {
  const out: LookupAddress[] = [];
  for (const a of addresses) {
    const address = canonicalIp(a.address);
    const f = isIP(address);
    if (f === 0 || !admitted(address, policy)) continue;
    if (family === 4 || family === 6) {
      if (f !== family) continue;
    }
    if (!out.some((o) => o.address === address)) out.push({ address, family: f });
  }
  return out;
}

/**
 * A `lookup` for http(s).request: resolves, filters by the policy and hands the socket only admitted addresses
 * (every one of them when Node asks for all, for happy-eyeballs). Nothing admitted fails the connection with
 * BlockedAddressError before a packet is sent.
 */
export function vettedLookup(policy: EgressPolicy, resolveAll: ResolveAll): LookupFunction {
  return (
    hostname: string,
    options: LookupOptions,
    callback: (
      error: NodeJS.ErrnoException | null,
      address: string | LookupAddress[],
      family?: number,
    ) => void,
  ) => {
    resolveAll(hostname).then(
      (addresses) => {
        const family = options.family === 'IPv4' ? 4 : options.family === 'IPv6' ? 6 : options.family;
        const survivors = admittedAddresses(addresses, policy, family);
        const first = survivors[0];
        if (!first) {
          callback(new BlockedAddressError(hostname), '', 0);
          return;
        }
        if (options.all === true) callback(null, survivors);
        else callback(null, first.address, first.family);
      },
      (error: unknown) => callback(error instanceof Error ? error : new Error(String(error)), '', 0),
    );
  };
}
