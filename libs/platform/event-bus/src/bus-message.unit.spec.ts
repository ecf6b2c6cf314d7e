import fc from 'fast-check';
import type { RecordedEvent } from '@stablepay/event-store';
import { decodeBusMessage, encodeBusMessage, MalformedBusMessageError, toBusMessage } from './bus-message';
import type { BusMessage } from './event-bus.port';

const recorded = (streamId: string): RecordedEvent => ({
  id: 'evt_01',
  streamId,
  type: 'PaymentCaptured',
  data: { amount: '1500000' },
  metadata: { merchantId: 'mer_1', mode: 'test' },
  revision: 4,
  globalPosition: 1234n,
  recordedAt: new Date('2026-02-03T04:05:06.789Z'),
});

describe('toBusMessage', () => {
  it('takes the topic from the stream category, the key from the stream id and keeps the event id', () => {
    expect(toBusMessage(recorded('payment-pay_123'))).toEqual({
      id: 'evt_01',
      topic: 'payments.payment.v1',
      key: 'payment-pay_123',
      type: 'PaymentCaptured',
      data: { amount: '1500000' },
      metadata: { merchantId: 'mer_1', mode: 'test' },
      revision: 4,
      recordedAt: '2026-02-03T04:05:06.789Z',
    });
  });

  it('refuses a stream whose category has no topic', () => {
    expect(() => toBusMessage(recorded('scratch-1'))).toThrow(/no topic/);
  });
});

describe('the JSON envelope', () => {
  const message = (data: unknown): BusMessage => ({ ...toBusMessage(recorded('checkout-chk_1')), data });

  it('round-trips any JSON payload unchanged', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (data) => {
        const decoded = decodeBusMessage(encodeBusMessage(message(data)));
        expect(decoded).toEqual(JSON.parse(JSON.stringify(message(data))));
      }),
    );
  });

  it('writes bigint values as decimal strings instead of failing', () => {
    const decoded = decodeBusMessage(
      Buffer.from(encodeBusMessage(message({ amount: 12345678901234567890n }))),
    );
    expect(decoded.data).toEqual({ amount: '12345678901234567890' });
  });

  it('rejects text that is not an envelope', () => {
    expect(() => decodeBusMessage('not json')).toThrow(MalformedBusMessageError);
    expect(() => decodeBusMessage('[]')).toThrow(MalformedBusMessageError);
    expect(() => decodeBusMessage(JSON.stringify({ ...message({}), revision: -1 }))).toThrow(/revision/);
    expect(() => decodeBusMessage(JSON.stringify({ ...message({}), id: '' }))).toThrow(/'id'/);
  });
});
