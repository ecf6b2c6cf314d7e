import {
  buildEnvelope,
  serializeEnvelope,
  serializeRecordedEnvelope,
  WEBHOOK_EVENT_ID,
  webhookEventId,
} from './envelope';
import {
  isEventTypeSelected,
  isWebhookEventType,
  TEST_DELIVERY_EVENT_TYPE,
  WEBHOOK_EVENT_TYPES,
} from './event-types';
import { testDeliveryEvent } from './test-delivery';

const createdAt = new Date('2026-03-01T12:00:00.000Z');

describe('SPEC Events > Envelope', () => {
  it('has id, object "event", type, created_at and data; no livemode on live events', () => {
    const envelope = buildEnvelope({
      id: 'evt_x',
      type: 'payment.settled',
      createdAt,
      data: { object: { id: 'pay_1' } },
    });
    expect(envelope).toEqual({
      id: 'evt_x',
      object: 'event',
      type: 'payment.settled',
      created_at: '2026-03-01T12:00:00.000Z',
      data: { object: { id: 'pay_1' } },
    });
    expect('livemode' in envelope).toBe(false);
  });

  it('carries livemode: false on a test delivery only', () => {
    expect(buildEnvelope(testDeliveryEvent('evt_t', createdAt), { testDelivery: true }).livemode).toBe(false);
  });

  it('serialises to the bytes that are signed; a bigint becomes a decimal string, never a float', () => {
    const body = serializeEnvelope(
      buildEnvelope({
        id: 'evt_x',
        type: 'payment.settled',
        createdAt,
        data: { object: { amount: 12345678901234567890n } },
      }),
    );
    expect(body.toString('utf8')).toContain('"amount":"12345678901234567890"');
  });
});

describe('the envelope around stored data (what the dispatcher sends for a recorded event)', () => {
  const event = { id: 'evt_x', type: 'payment.settled', createdAt };
  const data = { object: { id: 'pay_1', amount: '1500', nested: { n: 1, s: 'a "quoted" é' } } };

  it('has the content of serializeEnvelope, envelope keys in the same order', () => {
    // The database's text of a jsonb value: its own key order and whitespace.
    const stored =
      '{"object": {"id": "pay_1", "amount": "1500", "nested": {"n": 1, "s": "a \\"quoted\\" é"}}}';
    const sent = serializeRecordedEnvelope(event, stored).toString('utf8');
    const parsed = JSON.parse(sent) as Record<string, unknown>;
    expect(parsed).toEqual(JSON.parse(serializeEnvelope(buildEnvelope({ ...event, data })).toString('utf8')));
    expect(Object.keys(parsed)).toEqual(['id', 'object', 'type', 'created_at', 'data']);
    expect('livemode' in parsed).toBe(false);
  });

  it('keeps the digits of a stored integer beyond 2^53 (a parse and re-serialisation would round it)', () => {
    const sent = serializeRecordedEnvelope(event, '{"object": {"n": 12345678901234567891}}').toString('utf8');
    expect(sent).toContain('12345678901234567891');
  });

  it('sends data compact as JSON.stringify would (jsonb text spaces removed), strings untouched', () => {
    const stored = '{"a": 1, "note": "a, b: \\"c\\"  d", "list": [1, 2, {"k": null}]}';
    const sent = serializeRecordedEnvelope(event, stored).toString('utf8');
    const parsed = JSON.parse(sent) as Record<string, unknown>;
    // What a receiver re-serialising the parsed body computes is the very bytes that were signed.
    expect(JSON.stringify(parsed)).toBe(sent);
    expect((parsed['data'] as Record<string, unknown>)['note']).toBe('a, b: "c"  d');
  });

  it('escapes the id and type as JSON strings', () => {
    const sent = serializeRecordedEnvelope({ ...event, type: 'a"b\\c' }, '{}').toString('utf8');
    expect((JSON.parse(sent) as Record<string, unknown>)['type']).toBe('a"b\\c');
  });
});

describe('SPEC Events > event ids: unique and stable across retries', () => {
  it('is the same for the same domain event and type, and differs otherwise', () => {
    const a = webhookEventId('5d1c0a0e-0000-4000-8000-000000000001', 'subscription.created', createdAt);
    expect(webhookEventId('5d1c0a0e-0000-4000-8000-000000000001', 'subscription.created', createdAt)).toBe(a);
    expect(
      webhookEventId('5d1c0a0e-0000-4000-8000-000000000001', 'subscription_checkout.completed', createdAt),
    ).not.toBe(a);
    expect(
      webhookEventId('5d1c0a0e-0000-4000-8000-000000000002', 'subscription.created', createdAt),
    ).not.toBe(a);
    expect(a).toMatch(WEBHOOK_EVENT_ID);
  });

  it('sorts by creation time like every other id', () => {
    const early = webhookEventId('b', 'payment.settled', createdAt);
    const late = webhookEventId('a', 'payment.settled', new Date(createdAt.getTime() + 1));
    expect(early < late).toBe(true);
  });
});

describe('the event type catalogue and selection', () => {
  it('lists every SPEC event type once, with ours', () => {
    expect(new Set(WEBHOOK_EVENT_TYPES).size).toBe(WEBHOOK_EVENT_TYPES.length);
    // Payments 12 of SPEC + recovered, rescued; checkouts 4 + reorged; subscriptions 11 + 2; payouts 8.
    expect(WEBHOOK_EVENT_TYPES.length).toBe(14 + 5 + 13 + 8);
    expect(isWebhookEventType('payment.recovered')).toBe(true);
    expect(isWebhookEventType('payment.rescued')).toBe(true);
    expect(isWebhookEventType('subscription.charge_succeeded')).toBe(true);
    expect(isWebhookEventType('subscription.charged')).toBe(false);
  });

  it('null selects everything, a list selects exactly its types', () => {
    expect(isEventTypeSelected(null, 'payment.settled')).toBe(true);
    expect(isEventTypeSelected(['payment.settled'], 'payment.settled')).toBe(true);
    expect(isEventTypeSelected(['payment.settled'], 'payment.failed')).toBe(false);
    expect(isEventTypeSelected([], 'payment.settled')).toBe(false);
  });
});

describe('SPEC Events > test delivery placeholder', () => {
  it('is a subscription.charge_succeeded shaped like the real one, amounts as integer strings', () => {
    const event = testDeliveryEvent('evt_t', createdAt);
    expect(event.type).toBe(TEST_DELIVERY_EVENT_TYPE);
    expect(event.data.object).toMatchObject({
      object: 'subscription',
      subscription_charge_id: 'subc_test_placeholder',
      amount: '1000000',
    });
    expect(event.data['charge']).toMatchObject({
      object: 'subscription_charge',
      charge_nonce: 0,
      fee: '1200',
    });
    const object = event.data.object;
    expect(object['id']).toBe(object['subscription_id']);
  });
});
