import { Client } from 'pg';
import { SettingsReader, WebhookSecrets } from '@stablepay/merchants-service';
import { type Clock, fingerprint } from '@stablepay/util';
import type { EmbeddedStack } from './embedded';
import { startStackWithoutChains } from './test-support/stack';
import { createMerchant, stackApi } from './test-support/http';

/**
 * Concurrent POST /settings/webhook/secret for one merchant: rotations serialize on the merchant's stream, and each
 * response describes the rotation its own request made (its secret and the expiry its event gave the secret it
 * replaced), never a later one's state read back from the read model.
 */
const ADMIN_TOKEN = 'admin-token-for-tests-0123456789';
// An attempt loses its append only to another rotation landing, so six rotations need at most six attempts each:
// handleCommand's first try and its five retries. More could exhaust them: a 500 today.
const ROTATIONS = 6;

/** A clock that moves one second on every reading, so no two rotations can give the same expiry. */
class TickingClock implements Clock {
  private current = new Date('2026-06-01T10:00:00.000Z').getTime();
  now(): Date {
    this.current += 1000;
    return new Date(this.current);
  }
}

interface Rotated {
  readonly secretId: string;
  readonly fingerprint: string;
  readonly previousSecretId: string;
  readonly previousSecretExpiresAt: string;
}

describe('concurrent webhook secret rotations (embedded stack)', () => {
  let running: Awaited<ReturnType<typeof startStackWithoutChains>> | undefined;
  let key: string;
  let merchantId: string;
  const clock = new TickingClock();
  const stack = (): EmbeddedStack => {
    if (!running) throw new Error('stack not started');
    return running.stack;
  };
  const api = stackApi(stack);

  beforeAll(async () => {
    running = await startStackWithoutChains({ ADMIN_TOKEN, ALLOW_LOCAL_WEBHOOKS: 'false' }, clock);
    ({ id: merchantId, apiKey: key } = await createMerchant(stack(), ADMIN_TOKEN, 'Rotating'));
    const configured = await api(
      'PATCH',
      '/settings',
      { webhook_url: 'https://hooks.example.com/rotate' },
      key,
    );
    expect(configured.status).toBe(200);
  });

  afterAll(async () => {
    await running?.stop();
  });

  it('answers every rotation with its own secret and its own event expiry; the last event is what is stored', async () => {
    const responses = await Promise.all(
      Array.from({ length: ROTATIONS }, () => api('POST', '/settings/webhook/secret', undefined, key)),
    );
    const client = new Client({ connectionString: running?.db.url });
    await client.connect();
    let rotations: Rotated[];
    try {
      const { rows } = await client.query<{ data: Rotated }>(
        `SELECT data FROM events WHERE stream_id = $1 AND type = 'WebhookSecretRotated.v1' ORDER BY revision`,
        [`merchant-${merchantId}`],
      );
      rotations = rows.map((r) => r.data);
    } finally {
      await client.end();
    }

    // Every request rotated (none was refused or lost), each once, one after another on the stream.
    expect(responses.map((r) => r.status)).toEqual(Array<number>(ROTATIONS).fill(200));
    expect(rotations).toHaveLength(ROTATIONS);
    rotations.slice(1).forEach((r, i) => expect(r.previousSecretId).toBe(rotations[i]?.secretId));

    // Each response is exactly one event: its secret's fingerprint and the expiry that event recorded.
    const answered = responses.map((r) => {
      const secret = String(r.body['webhook_secret']);
      const event = rotations.find((e) => e.fingerprint === fingerprint(secret));
      return {
        fingerprint: fingerprint(secret),
        previous_secret_expires_at: r.body['previous_secret_expires_at'],
        event: event && {
          fingerprint: event.fingerprint,
          previous_secret_expires_at: event.previousSecretExpiresAt,
        },
      };
    });
    for (const a of answered)
      expect({
        fingerprint: a.fingerprint,
        previous_secret_expires_at: a.previous_secret_expires_at,
      }).toEqual(a.event);
    expect(new Set(answered.map((a) => a.fingerprint)).size).toBe(ROTATIONS);

    // The read model holds the last rotation: its secret current, the one it replaced previous until its expiry.
    const last = rotations.at(-1);
    const settings = await stack().service.app.get(SettingsReader).get(merchantId);
    expect({
      id: settings.webhook_secret_id,
      fingerprint: settings.webhook_secret_fingerprint,
      previousId: settings.previous_webhook_secret_id,
      expires:
        settings.previous_secret_expires_at && new Date(settings.previous_secret_expires_at).toISOString(),
    }).toEqual({
      id: last?.secretId,
      fingerprint: last?.fingerprint,
      previousId: last?.previousSecretId,
      expires: last?.previousSecretExpiresAt,
    });
    const active = await stack().service.app.get(WebhookSecrets).active(settings, clock);
    expect(fingerprint(String(active?.current))).toBe(last?.fingerprint);
  });
});
