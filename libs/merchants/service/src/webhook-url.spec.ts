import { FakeDnsServer, HostResolver } from '@stablepay/node-util';
import { validateWebhookUrl as validate } from './webhook-url';

describe('validateWebhookUrl', () => {
  const dnsServer = new FakeDnsServer()
    .set('hooks.public.test', { kind: 'answer', a: ['93.184.216.34'] })
    .set('rebind.evil.test', { kind: 'answer', a: ['93.184.216.34'], aaaa: ['fd00::1'] })
    .set('meta.evil.test', { kind: 'answer', a: ['169.254.169.254'] })
    .set('slow.evil.test', { kind: 'blackhole' });
  let dns: HostResolver;
  const validateWebhookUrl = (raw: string, allowLocal: boolean) => validate(raw, allowLocal, dns);

  beforeAll(async () => {
    await dnsServer.start();
    dns = new HostResolver({ timeoutMs: 2_000, servers: [dnsServer.server] });
  });
  afterAll(() => dnsServer.stop());

  it('admits loopback over http only when local webhooks are allowed', async () => {
    await expect(validateWebhookUrl('http://127.0.0.1:4000/hook', true)).resolves.toBe(
      'http://127.0.0.1:4000/hook',
    );
    await expect(validateWebhookUrl('http://localhost:4000/hook', true)).resolves.toBe(
      'http://localhost:4000/hook',
    );
    await expect(validateWebhookUrl('http://127.0.0.1:4000/hook', false)).rejects.toMatchObject({
      param: 'webhook_url',
    });
  });
  it('still refuses private networks when local webhooks are allowed', async () => {
    await expect(validateWebhookUrl('http://10.0.0.1/hook', true)).rejects.toMatchObject({
      param: 'webhook_url',
    });
    await expect(validateWebhookUrl('https://192.168.0.1/hook', true)).rejects.toMatchObject({
      param: 'webhook_url',
    });
  });
  it.each([
    'https://[64:ff9b::a9fe:a9fe]/latest/meta-data',
    'https://[64:ff9b::10.0.0.1]/hook',
    'https://[64:ff9b:1::808:808]/hook',
    'https://[::ffff:0:a00:1]/hook',
    'https://[::10.0.0.1]/hook',
    'https://[2002:a00:1::1]/hook',
    'https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/hook',
  ])('refuses the IPv4-embedding literal %s, even with local webhooks allowed', async (url) => {
    await expect(validateWebhookUrl(url, true)).rejects.toMatchObject({ param: 'webhook_url' });
  });
  it.each([
    'https://localhost./hook',
    'https://runsc./hook',
    'https://metadata.google.internal./computeMetadata',
    'https://foo.internal./hook',
  ])('refuses the local name %s written with its trailing dot', async (url) => {
    await expect(validateWebhookUrl(url, false)).rejects.toMatchObject({
      param: 'webhook_url',
      message: expect.stringMatching(/local host names/),
    });
  });
  it('refuses credentials in the URL', async () => {
    await expect(validateWebhookUrl('https://user:pw@hooks.example.com/x', false)).rejects.toMatchObject({
      param: 'webhook_url',
    });
  });
  it.each([
    ['https://93.184.216.34:0/hook', false],
    ['https://hooks.public.test:00/hook', false],
    ['http://127.0.0.1:0/hook', true],
  ] as const)('refuses port 0, where nothing receives: %s', async (url, allowLocal) => {
    await expect(validateWebhookUrl(url, allowLocal)).rejects.toMatchObject({
      param: 'webhook_url',
      message: expect.stringMatching(/port from 1 to 65535/),
    });
  });
  it('accepts a public https literal', async () => {
    await expect(validateWebhookUrl('https://93.184.216.34/hook', false)).resolves.toBe(
      'https://93.184.216.34/hook',
    );
  });
  it('refuses a name with any private answer, and accepts a public or an unpublished one', async () => {
    await expect(validateWebhookUrl('https://hooks.public.test/x', false)).resolves.toBe(
      'https://hooks.public.test/x',
    );
    await expect(validateWebhookUrl('https://nowhere.public.test/x', false)).resolves.toBe(
      'https://nowhere.public.test/x',
    );
    for (const url of ['https://rebind.evil.test/x', 'https://meta.evil.test/x']) {
      await expect(validateWebhookUrl(url, false)).rejects.toMatchObject({
        param: 'webhook_url',
        message: expect.stringMatching(/private or reserved address/),
      });
    }
  });
  it('refuses a name whose DNS never answers with a 400, while other names are checked meanwhile', async () => {
    const order: string[] = [];
    const slow = validateWebhookUrl('https://slow.evil.test/x', false).then(
      () => order.push('slow saved'),
      (error: unknown) => {
        order.push('slow refused');
        return error;
      },
    );
    await dnsServer.queried('slow.evil.test');
    await validateWebhookUrl('https://hooks.public.test/y', false);
    order.push('other saved');
    expect(await slow).toMatchObject({
      status: 400,
      type: 'validation_error',
      param: 'webhook_url',
      code: 'webhook_url_dns_timeout',
    });
    expect(order).toEqual(['other saved', 'slow refused']);
  });
});
