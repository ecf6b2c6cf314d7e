import { verifyWebhook } from '@stablepay/merchant-sdk';
import type { TestDatabase } from '@stablepay/testing';
import { createWebhookTestDatabase as createTestDatabase } from './testing/webhook-test-database';
import { HOUR, ManualClock, MINUTE } from '@stablepay/util';
import { type ReceivedDelivery, TestReceiver } from './testing/test-receiver';
import { startWebhookStack, type WebhookStack } from './testing/webhook-stack';

/**
 * SPEC Delivery rule 4 (rotation): for 24 hours after POST /settings/webhook/secret every delivery is signed with
 * both secrets (new in X-Signature, old in X-Signature-Previous; two `v1,` entries in webhook-signature); after
 * that only the new one; one previous-secret slot, so rotating again inside the window drops the older secret.
 */
const clock = new ManualClock('2026-07-01T08:00:00.000Z');

function str(value: unknown): string {
  if (typeof value !== 'string') throw new Error(`expected a string, got ${JSON.stringify(value)}`);
  return value;
}

describe('webhook secret rotation', () => {
  let db: TestDatabase;
  let stack: WebhookStack;
  const receiver = new TestReceiver();
  let merchantId: string;
  let first: string;

  const last = (): ReceivedDelivery => {
    const d = receiver.on('/rotate').at(-1);
    if (!d) throw new Error('nothing delivered');
    return d;
  };
  const verifies = (d: ReceivedDelivery, secret: string) =>
    verifyWebhook(d.rawBody, d.headers, secret, { now: clock.now() });
  /** The X-Signature-Previous header alone, to prove which secret made it. */
  const onlyPrevious = (d: ReceivedDelivery) => ({ 'x-signature': d.headers['x-signature-previous'] });
  let k = 0;
  const deliverOne = async () => {
    await stack.emit(merchantId, 'TestChargeSucceeded.v1', { chargeId: `subc_rot_${++k}`, amount: '1' });
    await stack.settle();
    return last();
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    await receiver.start();
    stack = await startWebhookStack({
      databaseUrl: db.url,
      clock,
      dispatch: { pollIntervalMs: 60_000, policy: { jitterRatio: 0 } },
    });
    ({ merchantId } = await stack.createMerchant('Rotating'));
    first = str(await stack.configureWebhook(merchantId, receiver.url('/rotate')));
  });

  afterAll(async () => {
    await stack?.stop();
    await receiver.stop();
    await db?.drop();
  });

  it('before any rotation: one secret, no X-Signature-Previous, one v1 entry', async () => {
    const d = await deliverOne();
    expect(d.headers['x-signature-previous']).toBeUndefined();
    expect(String(d.headers['webhook-signature']).split(' ')).toHaveLength(1);
    expect(verifies(d, first)).toMatchObject({ valid: true, matchedPreviousSecret: false });
  });

  it('inside the 24-hour window both secrets sign every delivery; after it only the new one', async () => {
    const { secret: second, row } = await stack.commands.rotateWebhookSecret(merchantId);
    expect(row.previous_secret_expires_at).toEqual(new Date(clock.now().getTime() + 24 * HOUR));

    const during = await deliverOne();
    expect(during.headers['x-signature']).toMatch(/^[0-9a-f]{64}$/);
    expect(during.headers['x-signature-previous']).toMatch(/^[0-9a-f]{64}$/);
    expect(String(during.headers['webhook-signature']).split(' ')).toHaveLength(2);
    expect(verifies(during, second)).toMatchObject({ valid: true, matchedPreviousSecret: false });
    expect(verifies(during, first)).toMatchObject({ valid: true, matchedPreviousSecret: true });
    // X-Signature is the new secret's, X-Signature-Previous the old one's.
    expect(
      verifyWebhook(during.rawBody, { 'x-signature': during.headers['x-signature'] }, second).valid,
    ).toBe(true);
    expect(verifyWebhook(during.rawBody, onlyPrevious(during), first).valid).toBe(true);

    clock.advance(24 * HOUR - MINUTE);
    expect(verifies(await deliverOne(), first).valid).toBe(true); // a minute before the end: still both

    clock.advance(MINUTE);
    const after = await deliverOne();
    expect(after.headers['x-signature-previous']).toBeUndefined();
    expect(String(after.headers['webhook-signature']).split(' ')).toHaveLength(1);
    expect(verifies(after, second).valid).toBe(true);
    expect(verifies(after, first)).toMatchObject({ valid: false, reason: 'signature_mismatch' });
  });

  it('a retry is signed with the secrets valid when it is sent, not when the event was first tried', async () => {
    const { secret: current } = await stack.commands.rotateWebhookSecret(merchantId);
    receiver.script(
      '/rotate',
      { kind: 'status', status: 500 },
      { kind: 'status', status: 500 },
      { kind: 'status', status: 204 },
    );
    const firstTry = await deliverOne();
    expect(firstTry.headers['x-signature-previous']).toBeDefined();
    clock.advance(24 * HOUR); // the 5-minute retry is made late (dispatcher was busy), when the window has ended
    await stack.settle();
    clock.advance(15 * MINUTE);
    await stack.settle();
    const attempts = receiver
      .on('/rotate')
      .filter((d) => d.headers['x-webhook-id'] === firstTry.headers['x-webhook-id']);
    expect(attempts).toHaveLength(3);
    expect(attempts.map((a) => a.headers['x-signature-previous'] !== undefined)).toEqual([
      true,
      false,
      false,
    ]);
    for (const a of attempts) {
      expect(
        verifyWebhook(a.rawBody, a.headers, current, {
          now: new Date(Number(a.headers['webhook-timestamp']) * 1000),
        }).valid,
      ).toBe(true);
    }
  });

  it('one slot: rotating again inside the window invalidates the older secret at once', async () => {
    const { secret: a } = await stack.commands.rotateWebhookSecret(merchantId);
    clock.advance(2 * HOUR);
    const { secret: b } = await stack.commands.rotateWebhookSecret(merchantId);
    clock.advance(HOUR);
    const { secret: c, row } = await stack.commands.rotateWebhookSecret(merchantId);
    // A new 24-hour window for the secret just replaced (b).
    expect(row.previous_secret_expires_at).toEqual(new Date(clock.now().getTime() + 24 * HOUR));
    const d = await deliverOne();
    expect(verifies(d, c)).toMatchObject({ valid: true, matchedPreviousSecret: false });
    expect(verifies(d, b)).toMatchObject({ valid: true, matchedPreviousSecret: true });
    expect(verifies(d, a)).toMatchObject({ valid: false });
    expect(String(d.headers['webhook-signature']).split(' ')).toHaveLength(2);
  });
});
