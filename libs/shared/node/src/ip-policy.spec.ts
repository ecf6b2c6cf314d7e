import { canonicalIp, isPublicAddress } from './ip-policy';

describe('webhook address policy', () => {
  it.each([
    '127.0.0.1',
    '10.1.2.3',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    '0.0.0.0',
    '224.0.0.1',
    '255.255.255.255',
    '192.0.2.10',
    '198.51.100.1',
    '203.0.113.7',
    '198.18.0.1',
    '::1',
    '::',
    'fe80::1',
    'fc00::1',
    'fd12:3456::1',
    'ff02::1',
    '2001:db8::1',
    '::ffff:127.0.0.1',
    '[::ffff:127.0.0.1]',
    '::ffff:7f00:1',
    '::ffff:169.254.169.254',
    '::ffff:a9fe:a9fe',
    '::127.0.0.1',
    '2002:7f00:1::',
  ])('refuses %s', (ip) => expect(isPublicAddress(ip)).toBe(false));

  it.each(['8.8.8.8', '1.1.1.1', '93.184.216.34', '2606:4700:4700::1111', '::ffff:8.8.8.8'])(
    'admits %s',
    (ip) => expect(isPublicAddress(ip)).toBe(true),
  );

  it('refuses things that are not IP literals', () => {
    expect(isPublicAddress('localhost')).toBe(false);
    expect(isPublicAddress('')).toBe(false);
  });

  it('admits loopback only when local development is allowed, and still refuses private ranges then', () => {
    expect(isPublicAddress('127.0.0.1', { allowLoopback: true })).toBe(true);
    expect(isPublicAddress('::ffff:127.0.0.1', { allowLoopback: true })).toBe(true);
    expect(isPublicAddress('::1', { allowLoopback: true })).toBe(true);
    expect(isPublicAddress('10.0.0.1', { allowLoopback: true })).toBe(false);
  });

  it('canonicalises IPv4-mapped IPv6 to IPv4', () => {
    expect(canonicalIp('::ffff:7f00:1')).toBe('127.0.0.1');
    expect(canonicalIp('[::FFFF:10.0.0.1]')).toBe('10.0.0.1');
    expect(canonicalIp('2606:4700::1111')).toBe('2606:4700::1111');
  });

  describe('every IPv6 form that embeds an IPv4 address is judged by that IPv4 address', () => {
    it.each([
      // NAT64 well-known prefix 64:ff9b::/96 (RFC 6052), hex and dotted tails
      ['NAT64', '64:ff9b::a00:1'],
      ['NAT64', '64:ff9b::7f00:1'],
      ['NAT64', '64:ff9b::169.254.169.254'],
      ['NAT64', '64:ff9b::c0a8:101'],
      ['NAT64', '[64:FF9B::10.0.0.1]'],
      ['NAT64', '64:ff9b:0:0:0:0:a9fe:a9fe'],
      // local-use NAT64 64:ff9b:1::/48 (RFC 8215): refused whatever it embeds
      ['local-use NAT64', '64:ff9b:1::a00:1'],
      ['local-use NAT64', '64:ff9b:1:ffff::808:808'],
      // IPv4-mapped ::ffff:0:0/96
      ['IPv4-mapped', '::ffff:10.0.0.1'],
      ['IPv4-mapped', '0:0:0:0:0:ffff:c0a8:0101'],
      // IPv4-compatible ::/96 (deprecated)
      ['IPv4-compatible', '::10.0.0.1'],
      ['IPv4-compatible', '::a9fe:a9fe'],
      ['IPv4-compatible', '::0.0.0.2'],
      // IPv4-translated ::ffff:0:0:0/96 (RFC 2765 SIIT)
      ['IPv4-translated', '::ffff:0:10.0.0.1'],
      ['IPv4-translated', '::ffff:0:7f00:1'],
      ['IPv4-translated', '0:0:0:0:ffff:0:a9fe:a9fe'],
      // 6to4 2002::/16 (RFC 3056): the IPv4 address follows the prefix
      ['6to4', '2002:a00:1::'],
      ['6to4', '2002:c0a8:101::1'],
      ['6to4', '2002:7f00:1::1'],
      ['6to4', '2002:a9fe:a9fe::'],
      ['6to4', '2002:c058:6301::'],
      // Teredo 2001::/32 (RFC 4380): refused wholesale (the client IPv4 is obfuscated in the low bits)
      ['Teredo', '2001:0:4136:e378:8000:63bf:3fff:fdd2'],
      ['Teredo', '2001::f5ff:fffe'],
    ])('refuses %s %s', (_form, ip) => expect(isPublicAddress(ip)).toBe(false));

    it.each([
      '64:ff9b::808:808',
      '64:ff9b::8.8.8.8',
      '::ffff:0:808:808',
      '::ffff:1.1.1.1',
      '2002:808:808::1',
    ])('admits %s, which embeds a public IPv4 address', (ip) => expect(isPublicAddress(ip)).toBe(true));

    it('never takes an embedded 127.0.0.1 for loopback, even when loopback is allowed', () => {
      expect(isPublicAddress('64:ff9b::7f00:1', { allowLoopback: true })).toBe(false);
      expect(isPublicAddress('::ffff:0:7f00:1', { allowLoopback: true })).toBe(false);
    });
  });

  describe('IPv6 is admitted only inside global unicast 2000::/3, less what the IANA special-purpose registry marks non-global', () => {
    it.each([
      ['discard-only 100::/64', '100::1'],
      ['dummy prefix 100:0:0:1::/64', '100:0:0:1::1'],
      ['SRv6 SIDs 5f00::/16', '5f00::1'],
      ['site-local fec0::/10 (deprecated)', 'fec0::1'],
      ['IPv4-compatible ::2', '::2'],
      ['unassigned 4000::/3', '4000::1'],
      ['unassigned 6000::/3', '6000::1'],
      ['unassigned 8000::/3', '8000::1'],
      ['unassigned c000::/3', 'c000::1'],
      ['unassigned e000::/4', 'e000::1'],
      ['unassigned f000::/5', 'f000::1'],
      ['unassigned fe00::/9', 'fe00::1'],
      ['unassigned 200::/7', '200::1'],
      ['unassigned 400::/6', '400::1'],
      ['unassigned 800::/5', '800::1'],
      ['unassigned 1000::/4', '1000::1'],
      ['unassigned ::/8 beside IPv4 forms', '::1:0:0:1'],
      ['unassigned ::/8 beside IPv4 forms', '0:0:0:1::1'],
      ['64:ff9b::/32 outside both NAT64 prefixes', '64:ff9b:2::1'],
      ['documentation 3fff::/20', '3fff:fff::1'],
      ['documentation 2001:db8::/32', '2001:db8:ffff::1'],
      ['IETF protocol assignments 2001::/23', '2001:100::1'],
      ['IETF protocol assignments 2001::/23', '2001:1::4'],
      ['benchmarking 2001:2::/48', '2001:2::1'],
      ['deprecated ORCHID 2001:10::/28', '2001:10::1'],
      ['Teredo 2001::/32', '2001::1'],
      ['multicast ff00::/8', 'ff0e::1'],
    ])('refuses %s: %s', (_block, ip) => expect(isPublicAddress(ip)).toBe(false));

    it.each([
      ['global unicast', '2606:4700:4700::1111'],
      ['global unicast', '2a00:1450:4001:82a::200e'],
      ['global unicast, first address', '2000::1'],
      ['global unicast just past 3fff::/20', '3fff:1000::1'],
      ['global unicast just past 2001::/23', '2001:200::1'],
      ['AS112 direct delegation 2620:4f:8000::/48', '2620:4f:8000::1'],
      ['PCP anycast 2001:1::1', '2001:1::1'],
      ['TURN anycast 2001:1::2', '2001:1::2'],
      ['DNS-SD SRP anycast 2001:1::3', '2001:1::3'],
      ['AMT 2001:3::/32', '2001:3::1'],
      ['AS112-v6 2001:4:112::/48', '2001:4:112::1'],
      ['ORCHIDv2 2001:20::/28', '2001:2f::1'],
      ['drone DETs 2001:30::/28', '2001:30::1'],
    ])('admits %s: %s', (_block, ip) => expect(isPublicAddress(ip)).toBe(true));
  });
});
