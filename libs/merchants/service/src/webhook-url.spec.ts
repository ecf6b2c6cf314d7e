import { validateWebhookUrl } from './webhook-url';

describe('validateWebhookUrl', () => {
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
  it('accepts a public https literal', async () => {
    await expect(validateWebhookUrl('https://93.184.216.34/hook', false)).resolves.toBe(
      'https://93.184.216.34/hook',
    );
  });
});
