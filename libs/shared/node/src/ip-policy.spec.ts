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
      // 6to4 2002::/16 (RFC 3056): refused wholesale (deprecated, relays are anycast)
      ['6to4', '2002:a00:1::'],
      ['6to4', '2002:c0a8:101::1'],
      ['6to4', '2002:808:808::1'],
      // Teredo 2001::/32 (RFC 4380): refused wholesale (the client IPv4 is obfuscated in the low bits)
      ['Teredo', '2001:0:4136:e378:8000:63bf:3fff:fdd2'],
      ['Teredo', '2001::f5ff:fffe'],
    ])('refuses %s %s', (_form, ip) => expect(isPublicAddress(ip)).toBe(false));

    it.each(['64:ff9b::808:808', '64:ff9b::8.8.8.8', '::ffff:0:808:808', '::ffff:1.1.1.1'])(
      'admits %s, which embeds a public IPv4 address',
      (ip) => expect(isPublicAddress(ip)).toBe(true),
    );

    it('never takes an embedded 127.0.0.1 for loopback, even when loopback is allowed', () => {
      expect(isPublicAddress('64:ff9b::7f00:1', { allowLoopback: true })).toBe(false);
      expect(isPublicAddress('::ffff:0:7f00:1', { allowLoopback: true })).toBe(false);
    });
  });
});
