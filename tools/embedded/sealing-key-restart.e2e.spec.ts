import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { verifyWebhook } from '@stablepay/merchant-sdk';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { type EmbeddedStack, startEmbedded } from './embedded';

/**
 * The embedded run seals webhook secrets with a key it keeps beside its data: after a restart on the same data the
 * secrets it sealed before still open, so deliveries and POST /settings/webhook/test keep working.
 */
describe('embedded: the webhook sealing key survives a restart', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'stablepay-sealing-'));
  let db: TestDatabase | undefined;
  let stack: EmbeddedStack | undefined;
  let receiver: Server;
  let receiverUrl: string;
  const received: Array<{ body: Buffer; headers: IncomingHttpHeaders }> = [];

  const start = async () =>
    startEmbedded({
      env: {
        PORT: '0',
        LOG_LEVEL: 'error',
        ...(db ? { DATABASE_URL: db.url } : {}),
      },
      dataDir,
      localChains: false,
    });

  beforeAll(async () => {
    if (process.env['DATABASE_URL']) db = await createTestDatabase();
    receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        received.push({ body: Buffer.concat(chunks), headers: req.headers });
        res.writeHead(200).end('ok');
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    const address = receiver.address();
    receiverUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/hook`;
  });
  afterAll(async () => {
    await stack?.stop();
    await new Promise((r) => receiver.close(r));
    await db?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const api = (s: EmbeddedStack, method: string, path: string, body?: unknown) =>
    fetch(`${s.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${s.demoApiKey}`,
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });

  it('sends a signed test delivery before and after the restart with the same secret; the key file is private', async () => {
    stack = await start();
    const set = await api(stack, 'PATCH', '/settings', { webhook_url: receiverUrl });
    expect(set.status).toBe(200);
    const secret = ((await set.json()) as { webhook_secret: string }).webhook_secret;
    expect((await api(stack, 'POST', '/settings/webhook/test')).status).toBe(200);
    const keyFile = join(dataDir, 'webhook-secret-key');
    expect(statSync(keyFile).mode & 0o777).toBe(0o600);
    await stack.stop();
    stack = undefined;

    stack = await start();
    const again = await api(stack, 'POST', '/settings/webhook/test');
    expect({ status: again.status, body: await again.text() }).toMatchObject({ status: 200 });
    expect(received).toHaveLength(2);
    for (const delivery of received) {
      expect(verifyWebhook(delivery.body, delivery.headers as Record<string, string>, secret).valid).toBe(
        true,
      );
    }
  }, 240_000);
});
