import { BlockList, isIP } from 'node:net';

/**
 * Which IP addresses a merchant webhook may point at. Only public unicast addresses pass: private, loopback,
 * link-local (cloud metadata lives at 169.254.169.254), shared CGNAT, multicast, reserved, documentation,
 * benchmarking, unique-local and the like are refused. IPv4-mapped and IPv4-compatible IPv6 literals are
 * canonicalised to IPv4 first so `[::ffff:127.0.0.1]` cannot sneak past as "IPv6"; NAT64 and IPv4-translated
 * literals are judged by the IPv4 address they reach; 6to4, Teredo and local-use NAT64 are refused wholesale.
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
const v6: Array<[string, number]> = [
  ['::', 128], // unspecified
  ['::1', 128], // loopback
  ['64:ff9b:1::', 48], // local-use NAT64
  ['100::', 64], // discard-only
  ['2001::', 23], // IETF protocol assignments (Teredo, benchmarking, ORCHID...)
  ['2001:db8::', 32], // documentation
  ['2002::', 16], // 6to4: embeds arbitrary IPv4
  ['3fff::', 20], // documentation
  ['fc00::', 7], // unique local
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local (deprecated)
  ['ff00::', 8], // multicast
];
for (const [net, prefix] of v6) blocked.addSubnet(net, prefix, 'ipv6');

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
 * The IPv4 address a translated IPv6 literal reaches: NAT64's well-known prefix 64:ff9b::/96 (RFC 6052) and
 * SIIT's IPv4-translated ::ffff:0:0:0/96 (RFC 2765) carry it in the low 32 bits. Other embedding forms are
 * refused wholesale by the block list (6to4 2002::/16, Teredo 2001::/32, local-use NAT64 64:ff9b:1::/48) or
 * canonicalised to IPv4 (mapped, compatible).
 */
export function translatedIpv4(address: string): string | null {
  const groups = ipv6Groups(address.replace(/^\[|\]$/g, '').toLowerCase());
  if (!groups) return null;
  const [g0, g1, g2, g3, g4, g5, g6 = 0, g7 = 0] = groups;
  const nat64 = g0 === 0x64 && g1 === 0xff9b && g2 === 0 && g3 === 0 && g4 === 0 && g5 === 0;
  const translated = g0 === 0 && g1 === 0 && g2 === 0 && g3 === 0 && g4 === 0xffff && g5 === 0;
  return nat64 || translated ? `${g6 >> 8}.${g6 & 0xff}.${g7 >> 8}.${g7 & 0xff}` : null;
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
  return !blocked.check(ip, family === 4 ? 'ipv4' : 'ipv6');
}
