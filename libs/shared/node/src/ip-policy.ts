import { BlockList, isIP } from 'node:net';

/**
 * Which IP addresses a merchant webhook may point at. Only public unicast addresses pass: private, loopback,
 * link-local (cloud metadata lives at 169.254.169.254), shared CGNAT, multicast, reserved, documentation,
 * benchmarking, unique-local and the like are refused. IPv4-mapped and IPv4-compatible IPv6 literals are
 * canonicalised to IPv4 first so `[::ffff:127.0.0.1]` cannot sneak past as "IPv6"; NAT64, IPv4-translated and
 * 6to4 literals are judged by the IPv4 address they reach; Teredo and local-use NAT64 are refused wholesale.
 *
 * IPv4 is judged by a deny list, IPv6 by an allow list: the IPv6 space holds far more special-purpose and
 * unassigned blocks than a deny list can keep up with (discard-only 100::/64, SRv6 SIDs 5f00::/16, deprecated
 * site-local fec0::/10 and every block IANA has not allocated yet), so anything not known to be global is out.
 */
const blocked = new BlockList();
const v4: Array<[string, number]> = [
  ['0.0.0.0', 8], // "this network"
  ['10.0.0.0', 8], // private
  ['100.64.0.0', 10], // shared address space (CGNAT)
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local, cloud metadata
  ['172.16.0.0', 12], // private
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // documentation TEST-NET-1
  ['192.88.99.0', 24], // 6to4 relay anycast (deprecated)
  ['192.168.0.0', 16], // private
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // documentation TEST-NET-2
  ['203.0.113.0', 24], // documentation TEST-NET-3
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, and 255.255.255.255 broadcast
];
for (const [net, prefix] of v4) blocked.addSubnet(net, prefix, 'ipv4');

/** 2000::/3 is the only block IANA allocates as global unicast (IANA "IPv6 Address Space", RFC 4291 2.4). */
const globalUnicastV6 = new BlockList();
globalUnicastV6.addSubnet('2000::', 3, 'ipv6');

/**
 * The blocks inside 2000::/3 that the IANA IPv6 Special-Purpose Address Registry
 * (https://www.iana.org/assignments/iana-ipv6-special-registry/, updated 2025-10-09) marks "Globally
 * Reachable: False" or "N/A". 6to4 2002::/16 (N/A) is not here: it is judged by the IPv4 address it embeds
 * (see translatedIpv4), so a 6to4 literal that tunnels to a private address is refused like that address.
 */
const nonGlobalV6 = new BlockList();
const nonGlobalV6Blocks: Array<[string, number]> = [
  ['2001::', 23], // IETF protocol assignments (Teredo 2001::/32 N/A, benchmarking 2001:2::/48, old ORCHID...)
  ['2001:db8::', 32], // documentation (RFC 3849)
  ['3fff::', 20], // documentation (RFC 9637)
];
for (const [net, prefix] of nonGlobalV6Blocks) nonGlobalV6.addSubnet(net, prefix, 'ipv6');

/** The sub-blocks of 2001::/23 the same registry marks "Globally Reachable: True". */
const globalInsideIetfV6 = new BlockList();
const globalInsideIetfV6Blocks: Array<[string, number]> = [
  ['2001:1::1', 128], // Port Control Protocol anycast (RFC 7723)
  ['2001:1::2', 128], // TURN anycast (RFC 8155)
  ['2001:1::3', 128], // DNS-SD Service Registration Protocol anycast (RFC 9665)
  ['2001:3::', 32], // AMT (RFC 7450)
  ['2001:4:112::', 48], // AS112-v6 (RFC 7535)
  ['2001:20::', 28], // ORCHIDv2 (RFC 7343)
  ['2001:30::', 28], // Drone Remote ID Protocol Entity Tags (RFC 9374)
];
for (const [net, prefix] of globalInsideIetfV6Blocks) globalInsideIetfV6.addSubnet(net, prefix, 'ipv6');

/** Global unicast and not one of the registry's non-global blocks inside it. */
function isGlobalIpv6(address: string): boolean {
  if (!globalUnicastV6.check(address, 'ipv6')) return false;
  return !nonGlobalV6.check(address, 'ipv6') || globalInsideIetfV6.check(address, 'ipv6');
}

const LOOPBACK_V4 = new BlockList();
LOOPBACK_V4.addSubnet('127.0.0.0', 8, 'ipv4');

/** Expands an IPv6 literal to its 8 groups of 16 bits, or null if it is not one. */
function ipv6Groups(address: string): number[] | null {
  if (isIP(address) !== 6) return null;
  let text = address;
  // A dotted IPv4 tail (::ffff:1.2.3.4) becomes two hex groups.
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted?.[1]) {
    const parts = dotted[1].split('.').map(Number);
    const [a = 0, b = 0, c = 0, d = 0] = parts;
    text = text.slice(0, -dotted[1].length) + `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const headGroups = head ? head.split(':') : [];
  const tailGroups = tail !== undefined && tail !== '' ? tail.split(':') : [];
  const missing = 8 - headGroups.length - tailGroups.length;
  const all =
    tail === undefined ? headGroups : [...headGroups, ...Array<string>(missing).fill('0'), ...tailGroups];
  return all.map((g) => parseInt(g, 16));
}

/** Returns the IPv4 address an IPv4-mapped/-compatible IPv6 literal stands for, else the input (lowercased). */
export function canonicalIp(address: string): string {
  const bare = address.replace(/^\[|\]$/g, '').toLowerCase();
  const groups = ipv6Groups(bare);
  if (!groups) return bare;
  const [g0, g1, g2, g3, g4, g5, g6 = 0, g7 = 0] = groups;
  const upperZero = g0 === 0 && g1 === 0 && g2 === 0 && g3 === 0 && g4 === 0;
  if (upperZero && (g5 === 0xffff || (g5 === 0 && (g6 !== 0 || g7 > 1)))) {
    return `${g6 >> 8}.${g6 & 0xff}.${g7 >> 8}.${g7 & 0xff}`;
  }
  return bare;
}

/**
 * The IPv4 address a translated or tunnelling IPv6 literal reaches: NAT64's well-known prefix 64:ff9b::/96
 * (RFC 6052) and SIIT's IPv4-translated ::ffff:0:0:0/96 (RFC 2765) carry it in the low 32 bits, 6to4
 * 2002::/16 (RFC 3056) in the 32 bits after the prefix. Other embedding forms are refused wholesale (Teredo
 * 2001::/32 inside the non-global 2001::/23, local-use NAT64 64:ff9b:1::/48 outside 2000::/3) or canonicalised
 * to IPv4 (mapped, compatible).
 */
export function translatedIpv4(address: string): string | null {
  const groups = ipv6Groups(address.replace(/^\[|\]$/g, '').toLowerCase());
  if (!groups) return null;
  const [g0, g1 = 0, g2 = 0, g3, g4, g5, g6 = 0, g7 = 0] = groups;
  const dotted = (hi: number, lo: number) => `${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`;
  if (g0 === 0x2002) return dotted(g1, g2);
  const nat64 = g0 === 0x64 && g1 === 0xff9b && g2 === 0 && g3 === 0 && g4 === 0 && g5 === 0;
  const translated = g0 === 0 && g1 === 0 && g2 === 0 && g3 === 0 && g4 === 0xffff && g5 === 0;
  return nat64 || translated ? dotted(g6, g7) : null;
}

export interface AddressPolicy {
  /** Admit 127.0.0.0/8 and ::1 (local development and tests only). */
  readonly allowLoopback?: boolean;
}

export function isLoopbackAddress(address: string): boolean {
  const ip = canonicalIp(address);
  const family = isIP(ip);
  if (family === 4) return LOOPBACK_V4.check(ip, 'ipv4');
  return family === 6 && ip === '::1';
}

/** True when the address is a public unicast address a webhook may be delivered to. */
export function isPublicAddress(address: string, policy: AddressPolicy = {}): boolean {
  const ip = canonicalIp(address);
  const family = isIP(ip);
  if (family === 0) return false;
  if (policy.allowLoopback && isLoopbackAddress(ip)) return true;
  // A translated address is only as public as the IPv4 address it reaches (and never counts as loopback).
  const reached = family === 6 ? translatedIpv4(ip) : null;
  if (reached !== null) return !blocked.check(reached, 'ipv4');
  return family === 4 ? !blocked.check(ip, 'ipv4') : isGlobalIpv6(ip);
}
