import { randomBytes } from 'node:crypto';
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

  const start = async (env: Record<string, string> = {}, dir = dataDir) =>
    startEmbedded({
      env: {
        PORT: '0',
        LOG_LEVEL: 'error',
        ...(db ? { DATABASE_URL: db.url } : {}),
        ...env,
      },
      dataDir: dir,
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

  const api = (
    s: EmbeddedStack,
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ) =>
    fetch(`${s.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${s.demoApiKey}`,
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        ...headers,
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

  it('survives an encryption key rotation: the old key opens what it sealed, secrets are re-sealed, a lost key is a clear 500 fixed by one rotation (a kept answer it sealed: 500 idempotent_replay_unreadable)', async () => {
    await stack?.stop();
    stack = undefined;
    if (db) {
      // A database of its own: the first test's merchant and secrets live in the other one.
      await db.drop();
      db = await createTestDatabase();
    }
    const rotationDir = mkdtempSync(join(tmpdir(), 'stablepay-sealing-rotation-'));
    const key = () => randomBytes(32).toString('hex');
    const [k1, k2, k3] = [key(), key(), key()];
    const signedWith = (secret: string) =>
      verifyWebhook(
        (received.at(-1) as { body: Buffer }).body,
        (received.at(-1) as { headers: IncomingHttpHeaders }).headers as Record<string, string>,
        secret,
      ).valid;
    try {
      stack = await start({ WEBHOOK_SECRET_ENCRYPTION_KEY: k1 }, rotationDir);
      const set = await api(stack, 'PATCH', '/settings', { webhook_url: receiverUrl });
      const first = ((await set.json()) as { webhook_secret: string }).webhook_secret;
      // With an Idempotency-Key: its kept answer (the secret) is sealed with the key in force.
      const rotate = (s: EmbeddedStack) =>
        api(s, 'POST', '/settings/webhook/secret', undefined, { 'idempotency-key': 'rotate-once' });
      const rotated = await rotate(stack);
      expect(rotated.status).toBe(200);
      const second = ((await rotated.json()) as { webhook_secret: string }).webhook_secret;
      await stack.stop();

      // The operator replaces the key and keeps the old one as previous: both secrets (current and the one in its
      // 24-hour window) still open and sign.
      stack = await start(
        { WEBHOOK_SECRET_ENCRYPTION_KEY: k2, WEBHOOK_SECRET_ENCRYPTION_KEY_PREVIOUS: k1 },
        rotationDir,
      );
      expect((await api(stack, 'POST', '/settings/webhook/test')).status).toBe(200);
      expect([signedWith(second), signedWith(first)]).toEqual([true, true]);
      const replayed = await rotate(stack);
      expect([replayed.status, replayed.headers.get('idempotent-replayed')]).toEqual([200, 'true']);
      expect(((await replayed.json()) as { webhook_secret: string }).webhook_secret).toBe(second);
      await stack.stop();

      // Opening them re-sealed them under the new key: the old key can be retired.
      stack = await start({ WEBHOOK_SECRET_ENCRYPTION_KEY: k2 }, rotationDir);
      expect((await api(stack, 'POST', '/settings/webhook/test')).status).toBe(200);
      expect([signedWith(second), signedWith(first)]).toEqual([true, true]);
      await stack.stop();

      // A key lost without keeping the old one: the test delivery says so in the envelope, and one rotation (not
      // two) makes deliveries work again, the unreadable previous secret being left out.
      stack = await start({ WEBHOOK_SECRET_ENCRYPTION_KEY: k3 }, rotationDir);
      const lost = await api(stack, 'POST', '/settings/webhook/test');
      expect(lost.status).toBe(500);
      expect(await lost.json()).toMatchObject({
        error: { type: 'api_error', code: 'webhook_secret_unreadable' },
      });
      // The kept answer sealed with k1 opens with no configured key: said so, never replayed as something else and
      // never run again (a rotation the client did not ask for twice).
      const unreadable = await rotate(stack);
      expect(unreadable.status).toBe(500);
      expect(await unreadable.json()).toMatchObject({
        error: { type: 'api_error', code: 'idempotent_replay_unreadable' },
      });
      expect((await api(stack, 'POST', '/settings/webhook/test')).status).toBe(500);
      const third = await api(stack, 'POST', '/settings/webhook/secret');
      expect(third.status).toBe(200);
      const thirdSecret = ((await third.json()) as { webhook_secret: string }).webhook_secret;
      expect((await api(stack, 'POST', '/settings/webhook/test')).status).toBe(200);
      expect([signedWith(thirdSecret), signedWith(second)]).toEqual([true, false]);
    } finally {
      await stack?.stop();
      stack = undefined;
      rmSync(rotationDir, { recursive: true, force: true });
    }
  }, 240_000);
});
