import nodeCrypto from 'node:crypto';
import {
  WebhookVerificationError,
  constantTimeEqual,
  parseWebhookEvent,
  signWebhookPayload,
  verifyWebhook,
  type WebhookHeaders,
} from './webhooks';

// Fixed vectors, computed once with `openssl dgst -sha256 -hmac <secret>` (independently of this code).
const SECRET = 'whsec_test_5WbX5kEWLlfzsGNjH64I8lOOqUB6e9FH';
const PREVIOUS_SECRET = 'whsec_test_old_Ue2Vq9jPcLrT7mXa4sKd3nHb';
const EVENT_ID = 'evt_01jgxq3t0000000000000000';
const TIMESTAMP = 1_767_225_600; // 2026-01-01T00:00:00Z
const BODY =
  '{"id":"evt_01jgxq3t0000000000000000","object":"event","type":"subscription.charge_succeeded","created_at":"2026-01-01T00:00:00.000Z","data":{"object":{"amount":"1000000"}}}';
const VECTOR = {
  hexCurrent: '6aa67600214114c6cac3a8e19e8ac28a1a9bda82c66ff61e33d28973539e30e1',
  hexPrevious: '2a5f2d4e439b3a4a8cadc8ebcdfc80f0e5de59e8c6a23f8052ef20b2165eda82',
  base64Current: 'g7txzWe/nLmhjJpwWgK/t6AqS/otIcOOyzlwkep/bAc=',
  base64Previous: 'Oc9i+R5ScNIEDztYpczABK7lqnCx/UHoGA+Ss10wevI=',
};
const NOW = new Date(TIMESTAMP * 1000);

const stablepayOnly = (signature: string, previous?: string): WebhookHeaders => ({
  'X-Webhook-Id': EVENT_ID,
  'X-Signature': signature,
  ...(previous !== undefined ? { 'X-Signature-Previous': previous } : {}),
});
const standardOnly = (signature: string, timestamp = TIMESTAMP): WebhookHeaders => ({
  'webhook-id': EVENT_ID,
  'webhook-timestamp': String(timestamp),
  'webhook-signature': signature,
});

describe('signWebhookPayload', () => {
  it('produces the checked-in vectors for both header schemes', () => {
    expect(signWebhookPayload(BODY, SECRET, { id: EVENT_ID, timestamp: TIMESTAMP })).toEqual({
      'X-Webhook-Id': EVENT_ID,
      'X-Signature': VECTOR.hexCurrent,
      'webhook-id': EVENT_ID,
      'webhook-timestamp': String(TIMESTAMP),
      'webhook-signature': `v1,${VECTOR.base64Current}`,
    });
  });

  it('signs with both secrets during a rotation window, the current one first', () => {
    const headers = signWebhookPayload(Buffer.from(BODY), SECRET, {
      id: EVENT_ID,
      timestamp: NOW,
      previousSecret: PREVIOUS_SECRET,
    });
    expect(headers['X-Signature']).toBe(VECTOR.hexCurrent);
    expect(headers['X-Signature-Previous']).toBe(VECTOR.hexPrevious);
    expect(headers['webhook-signature']).toBe(`v1,${VECTOR.base64Current} v1,${VECTOR.base64Previous}`);
  });

  it('refuses an id that cannot travel in a header', () => {
    expect(() => signWebhookPayload(BODY, SECRET, { id: 'evt 1', timestamp: NOW })).toThrow(TypeError);
  });
});

describe('verifyWebhook with the Stablepay headers', () => {
  it('accepts the checked-in X-Signature vector', () => {
    expect(verifyWebhook(BODY, stablepayOnly(VECTOR.hexCurrent), SECRET, { now: NOW })).toEqual({
      valid: true,
      schemes: ['stablepay'],
      webhookId: EVENT_ID,
      timestamp: null,
      matchedPreviousSecret: false,
    });
  });

  it('verifies the raw bytes given as a Buffer', () => {
    expect(verifyWebhook(Buffer.from(BODY, 'utf8'), stablepayOnly(VECTOR.hexCurrent), SECRET).valid).toBe(
      true,
    );
  });

  it('reads header names case-insensitively and accepts upper-case hex', () => {
    const headers = { 'x-signature': VECTOR.hexCurrent.toUpperCase() };
    expect(verifyWebhook(BODY, headers, SECRET).valid).toBe(true);
  });

  it('rejects a wrong secret', () => {
    expect(verifyWebhook(BODY, stablepayOnly(VECTOR.hexCurrent), 'whsec_wrong')).toMatchObject({
      valid: false,
      reason: 'signature_mismatch',
    });
  });

  it('rejects a body tampered by one character', () => {
    const tampered = BODY.replace('1000000', '9000000');
    expect(verifyWebhook(tampered, stablepayOnly(VECTOR.hexCurrent), SECRET)).toMatchObject({
      valid: false,
      reason: 'signature_mismatch',
    });
  });

  it('rejects the same JSON re-serialised with another key order: only the raw bytes count', () => {
    const reordered = JSON.stringify({ object: 'event', ...(JSON.parse(BODY) as Record<string, unknown>) });
    expect(verifyWebhook(reordered, stablepayOnly(VECTOR.hexCurrent), SECRET).valid).toBe(false);
  });

  it('does not accept the secret without its whsec_ prefix', () => {
    expect(verifyWebhook(BODY, stablepayOnly(VECTOR.hexCurrent), SECRET.slice('whsec_'.length)).valid).toBe(
      false,
    );
  });

  it('accepts X-Signature-Previous for a merchant still holding the previous secret, and says so', () => {
    const result = verifyWebhook(BODY, stablepayOnly(VECTOR.hexCurrent, VECTOR.hexPrevious), PREVIOUS_SECRET);
    expect(result).toMatchObject({ valid: true, matchedPreviousSecret: true });
  });

  it('accepts the current secret during a rotation window', () => {
    const result = verifyWebhook(BODY, stablepayOnly(VECTOR.hexCurrent, VECTOR.hexPrevious), SECRET);
    expect(result).toMatchObject({ valid: true, matchedPreviousSecret: false });
  });

  it('accepts a repeated header joined by a comma', () => {
    expect(verifyWebhook(BODY, { 'X-Signature': ['deadbeef', VECTOR.hexCurrent] }, SECRET).valid).toBe(true);
    expect(verifyWebhook(BODY, { 'X-Signature': `deadbeef, ${VECTOR.hexCurrent}` }, SECRET).valid).toBe(true);
  });

  it('rejects a delivery without any signature header', () => {
    expect(verifyWebhook(BODY, { 'X-Webhook-Id': EVENT_ID }, SECRET)).toMatchObject({
      valid: false,
      reason: 'missing_signature',
    });
  });

  it('rejects a truncated signature without throwing', () => {
    expect(verifyWebhook(BODY, stablepayOnly(VECTOR.hexCurrent.slice(0, 63)), SECRET)).toMatchObject({
      valid: false,
      reason: 'signature_mismatch',
    });
  });
});

describe('verifyWebhook with the Standard Webhooks headers', () => {
  it('accepts the checked-in vector and returns the signed id and timestamp', () => {
    expect(verifyWebhook(BODY, standardOnly(`v1,${VECTOR.base64Current}`), SECRET, { now: NOW })).toEqual({
      valid: true,
      schemes: ['standard'],
      webhookId: EVENT_ID,
      timestamp: NOW,
      matchedPreviousSecret: false,
    });
  });

  it('accepts a timestamp just inside the default 5-minute tolerance, either way', () => {
    const headers = standardOnly(`v1,${VECTOR.base64Current}`);
    expect(verifyWebhook(BODY, headers, SECRET, { now: new Date((TIMESTAMP + 300) * 1000) }).valid).toBe(
      true,
    );
    expect(verifyWebhook(BODY, headers, SECRET, { now: new Date((TIMESTAMP - 300) * 1000) }).valid).toBe(
      true,
    );
  });

  it('rejects a stale timestamp (a replay) even with a valid signature', () => {
    const result = verifyWebhook(BODY, standardOnly(`v1,${VECTOR.base64Current}`), SECRET, {
      now: new Date((TIMESTAMP + 301) * 1000),
    });
    expect(result).toMatchObject({ valid: false, reason: 'timestamp_out_of_tolerance' });
  });

  it('rejects a timestamp too far in the future', () => {
    const result = verifyWebhook(BODY, standardOnly(`v1,${VECTOR.base64Current}`), SECRET, {
      now: new Date((TIMESTAMP - 301) * 1000),
    });
    expect(result).toMatchObject({ valid: false, reason: 'timestamp_out_of_tolerance' });
  });

  it('honours a custom tolerance', () => {
    const later = { now: new Date((TIMESTAMP + 60) * 1000) };
    expect(
      verifyWebhook(BODY, standardOnly(`v1,${VECTOR.base64Current}`), SECRET, {
        ...later,
        toleranceSeconds: 30,
      }).valid,
    ).toBe(false);
  });

  it('rejects a signature made for another timestamp (the timestamp is signed)', () => {
    const result = verifyWebhook(BODY, standardOnly(`v1,${VECTOR.base64Current}`, TIMESTAMP + 1), SECRET, {
      now: NOW,
    });
    expect(result).toMatchObject({ valid: false, reason: 'signature_mismatch' });
  });

  it('accepts the previous-secret entry of a rotation window', () => {
    const headers = standardOnly(`v1,${VECTOR.base64Current} v1,${VECTOR.base64Previous}`);
    expect(verifyWebhook(BODY, headers, PREVIOUS_SECRET, { now: NOW })).toMatchObject({
      valid: true,
      matchedPreviousSecret: true,
    });
    expect(verifyWebhook(BODY, headers, SECRET, { now: NOW })).toMatchObject({
      valid: true,
      matchedPreviousSecret: false,
    });
  });

  it('ignores entries of other versions', () => {
    const result = verifyWebhook(BODY, standardOnly(`v1a,${VECTOR.base64Current}`), SECRET, { now: NOW });
    expect(result).toMatchObject({ valid: false, reason: 'signature_mismatch' });
  });

  it('rejects an incomplete set of headers as malformed', () => {
    const headers = { 'webhook-id': EVENT_ID, 'webhook-signature': `v1,${VECTOR.base64Current}` };
    expect(verifyWebhook(BODY, headers, SECRET, { now: NOW })).toMatchObject({
      valid: false,
      reason: 'malformed_headers',
    });
  });

  it('rejects a non-numeric timestamp as malformed', () => {
    const headers = {
      ...standardOnly(`v1,${VECTOR.base64Current}`),
      'webhook-timestamp': '2026-01-01T00:00:00Z',
    };
    expect(verifyWebhook(BODY, headers, SECRET, { now: NOW })).toMatchObject({
      valid: false,
      reason: 'malformed_headers',
    });
  });
});

describe('verifyWebhook with both schemes', () => {
  const both = signWebhookPayload(BODY, SECRET, {
    id: EVENT_ID,
    timestamp: TIMESTAMP,
    previousSecret: PREVIOUS_SECRET,
  });

  it('verifies what signWebhookPayload produced, with either secret of the rotation', () => {
    expect(verifyWebhook(BODY, both, SECRET, { now: NOW })).toMatchObject({
      valid: true,
      schemes: ['standard', 'stablepay'],
    });
    expect(verifyWebhook(BODY, both, PREVIOUS_SECRET, { now: NOW })).toMatchObject({
      valid: true,
      matchedPreviousSecret: true,
    });
  });

  it('requires every scheme present to verify', () => {
    const brokenStablepay = { ...both, 'X-Signature': VECTOR.hexPrevious, 'X-Signature-Previous': undefined };
    expect(verifyWebhook(BODY, brokenStablepay, SECRET, { now: NOW })).toMatchObject({
      valid: false,
      reason: 'signature_mismatch',
    });
  });

  it('rejects an X-Webhook-Id that differs from the signed webhook-id', () => {
    expect(verifyWebhook(BODY, { ...both, 'X-Webhook-Id': 'evt_other' }, SECRET, { now: NOW })).toMatchObject(
      {
        valid: false,
        reason: 'malformed_headers',
      },
    );
  });

  it('refuses a stripped-down legacy-only delivery when a timestamp is required (no downgrade)', () => {
    const legacyOnly = stablepayOnly(VECTOR.hexCurrent);
    expect(verifyWebhook(BODY, legacyOnly, SECRET, { now: NOW, requireTimestamp: true })).toMatchObject({
      valid: false,
      reason: 'missing_signature',
    });
    expect(verifyWebhook(BODY, both, SECRET, { now: NOW, requireTimestamp: true }).valid).toBe(true);
  });
});

describe('parseWebhookEvent', () => {
  it('returns the parsed event of an authentic delivery', () => {
    const event = parseWebhookEvent<{ id: string; type: string }>(
      BODY,
      stablepayOnly(VECTOR.hexCurrent),
      SECRET,
    );
    expect(event).toMatchObject({ id: EVENT_ID, type: 'subscription.charge_succeeded' });
  });

  it('throws WebhookVerificationError with the reason otherwise', () => {
    let caught: unknown;
    try {
      parseWebhookEvent(BODY, stablepayOnly(VECTOR.hexPrevious), SECRET);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(WebhookVerificationError);
    expect(caught).toMatchObject({ reason: 'signature_mismatch' });
  });
});

describe('constantTimeEqual', () => {
  afterEach(() => jest.restoreAllMocks());

  it('compares equal-length inputs with crypto.timingSafeEqual', () => {
    const spy = jest.spyOn(nodeCrypto, 'timingSafeEqual');
    expect(constantTimeEqual(Buffer.from('abcd'), Buffer.from('abcd'))).toBe(true);
    expect(constantTimeEqual(Buffer.from('abcd'), Buffer.from('abce'))).toBe(false);
    expect(spy).toHaveBeenCalledTimes(2);
  });

  it('still runs a timingSafeEqual comparison for unequal lengths, and returns false without throwing', () => {
    const spy = jest.spyOn(nodeCrypto, 'timingSafeEqual');
    expect(constantTimeEqual(Buffer.from('abc'), Buffer.from('abcd'))).toBe(false);
    expect(spy).toHaveBeenCalledTimes(1);
  });

  it('runs the comparison for every candidate signature, including a short one', () => {
    const spy = jest.spyOn(nodeCrypto, 'timingSafeEqual');
    verifyWebhook(BODY, { 'X-Signature': ['abc', VECTOR.hexCurrent] }, SECRET);
    expect(spy).toHaveBeenCalledTimes(2);
  });
});
